"""The text syntax of every op, as one declarative format per op, shared by the printer and the assembler.

Formats use the notation of the dialect's own declarative assembly formats (MLIR ODS), with our catalog's
operand, attribute and result names:

- ```,``` a literal; ```` ``` (empty) suppresses the next space; ``` ` ``` prints one blank;
- ``$name`` an operand group or an attribute; ``type($name)`` the type(s) of an operand group or result;
- ``custom<Kind>($name)`` a directive with its own spelling (rounding modes that omit their default, bare
  enum keywords, dense constants, assume predicates, argument regions, if regions);
- ``attr-dict`` (always empty for ops we print: every attribute is spelled in the format);
- ``( ... $anchor^ ... )?`` an optional group, printed when its anchor is present;
- ``oilist(`a` $a | `b` $b)`` unit keywords printed when set.

Ops whose syntax is hand-written in the dialect (``for``, ``loop``, view loads/stores, ``make_tensor_view``
...) are in `tile.ir._asm_custom` instead. The blank-insertion rules that turn these formats into text are
MLIR's and live in `FormatState`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

__all__ = [
    "AttrDict",
    "Custom",
    "Element",
    "FormatState",
    "Lit",
    "OIList",
    "Optional",
    "Ref",
    "TypeOf",
    "Ws",
    "format_of",
]


@dataclass(frozen=True)
class Lit:
    """A literal keyword or punctuation."""

    text: str


@dataclass(frozen=True)
class Ws:
    """```` `` ```` (no space) or ``` ` ``` (one blank)."""

    blank: bool


@dataclass(frozen=True)
class Ref:
    """``$name``: an operand group or an attribute."""

    name: str
    anchor: bool = False


@dataclass(frozen=True)
class TypeOf:
    """``type($name)``."""

    name: str
    anchor: bool = False


@dataclass(frozen=True)
class Custom:
    """``custom<kind>($name)``."""

    kind: str
    name: str
    anchor: bool = False


@dataclass(frozen=True)
class AttrDict:
    """``attr-dict``."""


@dataclass(frozen=True)
class Optional:
    """``( ... )?``."""

    elements: tuple[Element, ...]

    @property
    def anchor(self) -> str:
        """Name of the element marked ``^``."""
        for e in self.elements:
            if isinstance(e, (Ref, TypeOf, Custom)) and e.anchor:
                return e.name
        raise ValueError("optional group without anchor")


@dataclass(frozen=True)
class OIList:
    """``oilist(...)``: (keyword, unit attribute name) clauses."""

    clauses: tuple[tuple[str, str], ...]


Element = Lit | Ws | Ref | TypeOf | Custom | AttrDict | Optional | OIList


class FormatState:
    """MLIR's blank-insertion rule for declarative formats.

    Before an operand, attribute, type or directive a blank is printed unless the previous literal was
    punctuation that asked for none; before a literal, unless it is punctuation that hugs its neighbour.
    The state of an optional group that is absent still advances, as in the code MLIR generates.
    """

    def __init__(self) -> None:
        self.space = True
        self.punct = False

    def before_literal(self, text: str) -> bool:
        """Whether a blank precedes literal `text`; then advance past it."""
        if len(text) != 1 and text != "->":
            blank = True
        elif self.punct:
            blank = text[0] not in ">)}],"
        else:
            blank = text[0] not in "<>(){}[],"
        blank = blank and self.space
        self.space = len(text) != 1 or text[0] not in "<({["
        self.punct = text[0] != "_" and not text[0].isalpha()
        return blank

    def before_element(self) -> bool:
        """Whether a blank precedes an operand/attribute/type/directive; then advance past it."""
        blank = self.space or not self.punct
        self.space, self.punct = True, False
        return blank

    def whitespace(self, blank: bool) -> None:
        """Advance past a ```` `` ```` or ``` ` ``` element."""
        self.space = False
        self.punct = not blank


_TOKEN = re.compile(
    r"\s*(?:`(?P<lit>[^`]*)`|(?P<custom>custom<(?P<kind>\w+)>\(\$(?P<cname>\w+)\)(?P<canchor>\^)?)"
    r"|(?P<type>type\(\$(?P<tname>\w+)\)(?P<tanchor>\^)?)|(?P<ref>\$(?P<rname>\w+)(?P<ranchor>\^)?)"
    r"|(?P<attrdict>attr-dict)|(?P<oilist>oilist\((?P<clauses>[^)]*)\))|(?P<open>\()|(?P<close>\)\?))"
)


def _parse(text: str) -> tuple[Element, ...]:
    stack: list[list[Element]] = [[]]
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"bad format near {text[pos:]!r}")
        pos = m.end()
        out = stack[-1]
        if m.group("lit") is not None:
            lit = m.group("lit")
            out.append(Ws(lit == " ") if lit in ("", " ") else Lit(lit))
        elif m.group("custom"):
            out.append(Custom(m.group("kind"), m.group("cname"), bool(m.group("canchor"))))
        elif m.group("type"):
            out.append(TypeOf(m.group("tname"), bool(m.group("tanchor"))))
        elif m.group("ref"):
            out.append(Ref(m.group("rname"), bool(m.group("ranchor"))))
        elif m.group("attrdict"):
            out.append(AttrDict())
        elif m.group("oilist"):
            clauses = [c.split() for c in m.group("clauses").split("|")]
            out.append(OIList(tuple((kw.strip("`"), ref.lstrip("$")) for kw, ref in clauses)))
        elif m.group("open"):
            stack.append([])
        else:
            group = stack.pop()
            stack[-1].append(Optional(tuple(group)))
        pos = m.end()
    return tuple(stack[0])


_UNARY = "$source attr-dict `:` type($result)"
_BINARY = "$lhs `,` $rhs attr-dict `:` type($result)"
_FLOAT_BINARY = (
    "$lhs `,` $rhs custom<Rounding>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"
)
_OVERFLOW_BINARY = "$lhs `,` $rhs (`overflow` `` $overflow^)? attr-dict `:` type($result)"
_SIGNED_BINARY = "$lhs `,` $rhs custom<Keyword>($signedness) attr-dict `:` type($result)"
_CONVERT = "$source attr-dict `:` type($source) `->` type($result)"
_MINMAX_F = (
    "$lhs `,` $rhs oilist(`flush_to_zero` $flush_to_zero | `propagate_nan` $propagate_nan) attr-dict `:` type($result)"
)
_TERMINATOR = "attr-dict ($operands^ `:` type($operands))?"
_REDUCE = (
    "$operands attr-dict ` ` `dim` `` `=` `` $dim {extra}`identities` `` `=` `` $identities "
    "`:` type($operands) `->` type($results) custom<ArgumentRegion>($body)"
)
_FTZ_UNARY = "$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)"

_FORMATS: dict[str, str] = {
    **dict.fromkeys(["addf", "subf", "mulf", "divf"], _FLOAT_BINARY),
    **dict.fromkeys(["maxf", "minf"], _MINMAX_F),
    **dict.fromkeys(["addi", "subi", "muli", "shli"], _OVERFLOW_BINARY),
    **dict.fromkeys(["remi", "maxi", "mini", "shri"], _SIGNED_BINARY),
    **dict.fromkeys(["andi", "ori", "xori", "remf"], _BINARY),
    **dict.fromkeys(
        ["absf", "absi", "negf", "ceil", "floor", "cos", "cosh", "sin", "sinh", "tan", "log", "log2"], _UNARY
    ),
    **dict.fromkeys(["exp2", "rsqrt"], _FTZ_UNARY),
    **dict.fromkeys(["bitcast", "int_to_ptr", "ptr_to_int", "ptr_to_ptr", "pack", "unpack"], _CONVERT),
    **dict.fromkeys(["broadcast", "reshape"], _CONVERT),
    **dict.fromkeys(["yield", "continue", "break", "return"], _TERMINATOR),
    "fma": "$lhs `,` $rhs `,` $acc custom<Rounding>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? "
    "attr-dict `:` type($result)",
    "mulhii": "$x `,` $y attr-dict `:` type($result)",
    "atan2": "$x `,` $y attr-dict `:` type($result)",
    "pow": "$source `,` $exponent attr-dict `:` type($result)",
    "fpowi": "$source `,` $exponent attr-dict `:` type($source) `,` type($exponent)",
    "divi": "$lhs `,` $rhs custom<Keyword>($signedness) (`rounding` `` $rounding^)? attr-dict `:` type($result)",
    "negi": "$source (`overflow` `` $overflow^)? attr-dict `:` type($result)",
    "exp": "$source custom<Rounding>($rounding_mode) attr-dict `:` type($result)",
    "tanh": "$source custom<Rounding>($rounding_mode) attr-dict `:` type($result)",
    "sqrt": "$source custom<Rounding>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? attr-dict `:` type($result)",
    "cmpf": "custom<Keyword>($comparison_predicate) custom<Keyword>($comparison_ordering) $lhs `,` $rhs attr-dict "
    "`:` type($lhs) `->` type($result)",
    "cmpi": "custom<Keyword>($comparison_predicate) $lhs `,` $rhs `,` custom<Keyword>($signedness) attr-dict "
    "`:` type($lhs) `->` type($result)",
    "select": "$cond `,` $val_if_true `,` $val_if_false attr-dict `:` type($cond) `,` type($result)",
    "ftof": "$source custom<Rounding>($rounding_mode) attr-dict `:` type($source) `->` type($result)",
    "ftoi": "$source custom<Keyword>($signedness) custom<Rounding>($rounding_mode) (`saturating` $saturating^)? "
    "attr-dict `:` type($source) `->` type($result)",
    "itof": "$source custom<Keyword>($signedness) custom<Rounding>($rounding_mode) attr-dict "
    "`:` type($source) `->` type($result)",
    "exti": "$source custom<Keyword>($signedness) attr-dict `:` type($source) `->` type($result)",
    "trunci": "$source (`overflow` `` $overflow^)? attr-dict `:` type($source) `->` type($result)",
    "permute": "$source $permutation attr-dict `:` type($source) `->` type($result)",
    "cat": "$lhs `,` $rhs `dim` `=` $dim attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)",
    "extract": "$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)",
    "insert": "$source `,` $destination `[` $indices `]` attr-dict `:` type($source) `,` type($destination)",
    "iota": "attr-dict `:` type($result)",
    "constant": "custom<Dense>($value) attr-dict",
    "get_global": "custom<Symbol>($name) attr-dict `:` type($result)",
    "get_tile_block_id": "attr-dict `:` type($blockId_x)",
    "get_num_tile_blocks": "attr-dict `:` type($gridSize_x)",
    "make_token": "attr-dict `:` type($result)",
    "join_tokens": "$tokens attr-dict `:` type($result)",
    "assume": "custom<Predicate>($predicate) `,` $value attr-dict `:` type($value)",
    "assert": "$condition `,` $message attr-dict `:` type($condition)",
    "print_tko": "$str (`,` $args^)? (`token` `` `=` `` $token^)? attr-dict (`:` type($args)^)? "
    "`->` type($result_token)",
    "alloca": "`num_elem` `=` $num_elem `,` `alignment` `=` $alignment (`global` $global^)? attr-dict "
    "`:` type($result)",
    "offset": "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset) `->` type($result)",
    "mmaf": "$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` type($lhs) `,` type($rhs) `,` type($acc)",
    "mmai": "$lhs `,` $rhs `,` $acc custom<Keyword>($signedness_lhs) custom<Keyword>($signedness_rhs) attr-dict "
    "`:` type($lhs) `,` type($rhs) `,` type($acc)",
    "mmaf_scaled": "$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` type($lhs) `,` type($rhs) `,` "
    "type($acc) `,` type($lhs_scale) `,` type($rhs_scale)",
    "load_ptr_tko": "custom<Keyword>($memory_ordering_semantics) (custom<Keyword>($memory_scope)^)? $source "
    "(`,` $mask^)? (`,` $paddingValue^)? (`token` `` `=` `` $token^)? "
    "(`optimization_hints` `=` $optimization_hints^)? attr-dict `:` type($source) (`,` type($mask)^)? "
    "(`,` type($paddingValue)^)? `->` type($result) `,` type($result_token)",
    "store_ptr_tko": "custom<Keyword>($memory_ordering_semantics) (custom<Keyword>($memory_scope)^)? $destination "
    "`,` $value (`,` $mask^)? (`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? "
    "attr-dict `:` type($destination) `,` type($value) (`,` type($mask)^)? `->` type($result_token)",
    "atomic_cas_tko": "custom<Keyword>($memory_ordering_semantics) custom<Keyword>($memory_scope) $pointers `,` $cmp "
    "`,` $val (`,` $mask^)? (`token` `` `=` `` $token^)? attr-dict `:` type($pointers) `,` type($val) "
    "(`,` type($mask)^)? `->` type($result) `,` type($result_token)",
    "atomic_rmw_tko": "custom<Keyword>($memory_ordering_semantics) custom<Keyword>($memory_scope) $pointers `,` "
    "custom<Keyword>($mode) `,` $arg (`,` $mask^)? (`token` `` `=` `` $token^)? attr-dict `:` type($pointers) "
    "`,` type($arg) (`,` type($mask)^)? `->` type($result) `,` type($result_token)",
    "reduce": _REDUCE.format(extra=""),
    "scan": _REDUCE.format(extra="`reverse` `` `=` `` $reverse "),
    "if": "$condition (`->` `(` type($results)^ `)`)? custom<IfRegion>($then) (`else` custom<IfRegion>($else)^)? "
    "attr-dict",
    "gdc_launch_dependents_tko": "(`token` `=` $token^)? attr-dict `->` type($result_token)",
    "gdc_wait_tko": "(`token` `=` $token^)? attr-dict `->` type($result_token)",
    "memory_fence_alias_tko": "$token attr-dict",
}

# When a result's type is not spelled, it is the type of this operand (or of the first spelled result).
RESULT_TYPE_FROM: dict[str, str] = {
    "mmaf": "acc",
    "mmai": "acc",
    "mmaf_scaled": "acc",
    "assume": "value",
    "insert": "destination",
    "fpowi": "source",
    "memory_fence_alias_tko": "token",
}


@cache
def format_of(op_name: str) -> tuple[Element, ...] | None:
    """The parsed declarative format of `op_name`, or None when its syntax is hand-written."""
    text = _FORMATS.get(op_name)
    return None if text is None else _parse(text)


def declared_ops() -> frozenset[str]:
    """Names of the ops that have a declarative format here."""
    return frozenset(_FORMATS)
