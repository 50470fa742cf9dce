"""Parse an op written in its declarative format (the reverse of the printer's format interpreter).

Each format element consumes what the printer would have produced: literals, value references, attribute
spellings, type lists. An optional group is taken when its first element is next in the text, except a group
that spells an operand group's types, which is taken exactly when that operand group was given. Where two
optional operands print alike (``load_ptr_tko %p, %x``: a mask or a padding value), the value's type picks the
group, as the bytecode's operand segment sizes would (`_LOOKALIKE`). Types spelled
for operands are checked against the operands' known types; types spelled for results give the result
types (results whose type is not spelled take it from `RESULT_TYPE_FROM` or from the first spelled result).
The op is created as soon as a region directive needs it, so regions can refer to the op's block arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING

from tile.ir._asm_attrs import enum_from_word, parse_dense, parse_hints, parse_identities, parse_predicate
from tile.ir._asm_formats import RESULT_TYPE_FROM, AttrDict, Custom, Element, Lit, OIList, Optional, Ref, TypeOf, Ws
from tile.ir._attrs import ArrayAttr
from tile.ir._enums import RoundingMode
from tile.ir._ir import Operation, Value
from tile.ir._types import TileType, Type, i1
from tile.ir.ops import CATALOG, AttrKind, AttrSpec, OpDef, OperandKind

if TYPE_CHECKING:
    from tile.ir._asm import _Parser

__all__ = ["parse_declarative"]

_REGIONS = {"then": 0, "else": 1, "body": 0}


def _is_mask(t: Type) -> bool:
    return isinstance(t, TileType) and t.element == i1


# op -> (first optional operand, the next one, whether a type fits the first): consecutive optional operands that
# print identically when only one is present. A lone value the first cannot take belongs to the second (the text
# is ambiguous only for an i1 padding value, which goes to the mask, as in NVIDIA's parser).
_LOOKALIKE: dict[str, tuple[str, str, Callable[[Type], bool]]] = {
    "load_ptr_tko": ("mask", "paddingValue", _is_mask),
}
_IMPLICIT = {"if": "yield"}


class _OpText:
    """The pieces of one op gathered while its format is read."""

    def __init__(self, parser: _Parser, name: str) -> None:
        self.p = parser
        self.name = name
        self.opdef: OpDef = CATALOG[name]
        self.groups: dict[str, list[Value]] = {}
        self.attrs: dict[str, object] = {}
        self.result_types: dict[str, Type] = {}
        self.variadic_results: list[Type] = []
        self.op: Operation | None = None

    def operand_kind(self, name: str) -> OperandKind | None:
        return next((o.kind for o in self.opdef.operands if o.name == name), None)

    def is_result(self, name: str) -> bool:
        return any(r.name == name for r in self.opdef.results)

    def spec(self, name: str) -> AttrSpec:
        return self.opdef.attr(name)

    def enum(self, name: str) -> type[IntEnum]:
        """The enum class of enum attribute `name` (the catalog gives one to every ENUM attribute)."""
        enum = self.spec(name).enum
        assert enum is not None, f"'{self.name}.{name}' has no enum class in the catalog"
        return enum

    # --- elements -----------------------------------------------------------------------------------

    def elements(self, elements: tuple[Element, ...]) -> None:
        for e in elements:
            self.element(e)

    def element(self, e: Element) -> None:
        lex = self.p.lex
        if isinstance(e, Lit):
            lex.expect(e.text, f"in '{self.name}'")
        elif isinstance(e, (Ws, AttrDict)):
            return
        elif isinstance(e, Optional):
            if self.taken(e):
                self.elements(e.elements)
        elif isinstance(e, OIList):
            words = dict(e.clauses)
            while lex.peek_keyword() in words:
                self.attrs[words[lex.keyword()]] = True
        elif isinstance(e, Ref):
            self.ref(e)
        elif isinstance(e, TypeOf):
            self.type_of(e.name)
        else:
            self.custom(e)

    def taken(self, e: Optional) -> bool:
        """Whether optional group `e` is in the text."""
        anchor = next(x for x in e.elements if isinstance(x, (Ref, TypeOf, Custom)) and x.anchor)
        if isinstance(anchor, TypeOf) and self.operand_kind(anchor.name) is not None:
            return bool(self.groups.get(anchor.name))  # an operand group's types are spelled iff the group is
        return self.starts(e.elements[0])

    def starts(self, e: Element) -> bool:
        lex = self.p.lex
        if isinstance(e, Lit):
            return lex.at(e.text)
        if isinstance(e, Ref) and self.operand_kind(e.name) is not None:
            return lex.at_value()
        if isinstance(e, Custom) and e.kind == "Keyword":
            return lex.peek_keyword() in {str(m) for m in self.enum(e.name)}
        raise ValueError(f"cannot decide optional group starting with {e}")

    def ref(self, e: Ref) -> None:
        kind = self.operand_kind(e.name)
        if kind is OperandKind.VARIADIC:
            self.groups[e.name] = self.p.value_list() if self.p.lex.at_value() else []
        elif kind is not None:
            value = self.p.value()
            first, second, fits = _LOOKALIKE.get(self.name, ("", "", _is_mask))
            lone = e.name == first and not self.p.lex.at(",")
            self.groups[second if lone and not fits(value.type) else e.name] = [value]
        else:
            self.attr(e.name)

    def attr(self, name: str) -> None:
        spec = self.spec(name)
        lex = self.p.lex
        if spec.kind is AttrKind.UNIT:
            self.attrs[name] = True
        elif spec.kind is AttrKind.ENUM:
            lex.expect("<")
            start = lex.pos
            word = enum_from_word(lex.keyword(name.replace("_", " ")))
            members = {str(m): m for m in self.enum(name)}
            if word not in members:
                raise lex.error(f"unknown {name.replace('_', ' ')} '{word}'", start)
            self.attrs[name] = members[word]
            lex.expect(">")
        elif spec.kind is AttrKind.INT:
            self.attrs[name] = lex.integer()
        elif spec.kind is AttrKind.BOOL:
            self.attrs[name] = self.p.keyword_bool()
        elif spec.kind is AttrKind.STRING:
            self.attrs[name] = lex.string()
        elif spec.kind is AttrKind.I32_LIST:
            lex.expect("[")
            values: list[int] = []
            while not lex.accept("]"):
                if values:
                    lex.expect(",")
                values.append(lex.integer())
            self.attrs[name] = tuple(values)
        elif spec.kind is AttrKind.ARRAY:
            self.attrs[name] = ArrayAttr(parse_identities(lex))
        elif spec.kind is AttrKind.HINTS:
            self.attrs[name] = parse_hints(lex)
        else:
            raise lex.error(f"attribute '{name}' of '{self.name}' has no text form")

    def type_of(self, name: str) -> None:
        lex = self.p.lex
        if name == "results":
            self.variadic_results = self.p.read_types()
            return
        if self.is_result(name):
            self.result_types[name] = self.p.read_type()
            return
        for i, value in enumerate(self.groups.get(name, [])):
            if i:
                lex.expect(",")
            lex.skip()
            self.p.check_type(value, lex.pos)

    def custom(self, e: Custom) -> None:
        lex = self.p.lex
        if e.kind in ("IfRegion", "ArgumentRegion"):
            self.region(e)
            return
        if e.kind == "Rounding":
            if lex.accept("rounding"):
                lex.expect("<")
                self.attrs[e.name] = self.p.keyword_enum(RoundingMode, "a rounding mode")
                lex.expect(">")
        elif e.kind == "Keyword":
            self.attrs[e.name] = self.p.keyword_enum(self.enum(e.name), e.name.replace("_", " "))
        elif e.kind == "Dense":
            dense = parse_dense(lex)
            self.attrs[e.name] = dense
            self.result_types["result"] = dense.type
        elif e.kind == "Predicate":
            self.attrs[e.name] = parse_predicate(lex)
        elif e.kind == "Symbol":
            self.attrs[e.name] = lex.symbol()

    def region(self, e: Custom) -> None:
        op = self.build()
        region = op.regions[_REGIONS[e.name]]
        names: list[tuple[str, int]] = []
        types: list[Type] = []
        if e.kind == "ArgumentRegion":
            lex = self.p.lex
            lex.expect("(")
            while not lex.accept(")"):
                if names:
                    lex.expect(",")
                names.append(self.p.arg_name())
                lex.expect(":")
                types.append(self.p.read_type())
        self.p.region(region.add_block(types), names, _IMPLICIT.get(self.name))

    # --- the op -------------------------------------------------------------------------------------

    def build(self) -> Operation:
        if self.op is None:
            groups: list[object] = []
            for spec in self.opdef.operands:
                values = self.groups.get(spec.name, [])
                groups.append(values if spec.kind is OperandKind.VARIADIC else (values[0] if values else None))
            self.op = self.p.make(self.name, groups, self.attrs, self.types())
        return self.op

    def types(self) -> list[Type]:
        if self.opdef.variadic_results:
            return self.variadic_results
        fallback: Type | None = None
        if self.name in RESULT_TYPE_FROM:
            fallback = self.groups[RESULT_TYPE_FROM[self.name]][0].type
        elif self.result_types:
            fallback = next(iter(self.result_types.values()))
        out: list[Type] = []
        for r in self.opdef.results:
            t = self.result_types.get(r.name, fallback)
            if t is None:
                raise self.p.lex.error(f"cannot tell the type of result '{r.name}' of '{self.name}'")
            out.append(t)
        return out


def parse_declarative(parser: _Parser, name: str, fmt: tuple[Element, ...]) -> Operation:
    """Read op `name` in format `fmt` and append it to the parser's current block."""
    text = _OpText(parser, name)
    text.elements(fmt)
    return text.build()
