"""Print a `Module` as the text `tileirdisasm` prints for the same bytecode.

Invariants: the output is byte-for-byte what ``tileirdisasm FILE`` prints (no locations), including value
names (`tile.ir._asm_names`), blank placement (MLIR's declarative-format rules in `FormatState`), float
spelling (`tile.ir._asm_floats`) and two-space indentation per region level. Ops with a declarative
format are printed by interpreting it (`tile.ir._asm_formats`); the rest by `tile.ir._asm_custom`. With
``debug=True`` the output is ``tileirdisasm -g``'s instead: location aliases from `tile.ir._asm_debug`.
On IR that does not verify the printer prints what it can; where the text cannot be written (a view op
whose result is not a view, an attribute of the wrong kind...) it raises `VerifyError` with the verifier's
problems, never an internal exception (`_guarded`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from tile.ir._asm_attrs import dense_text, enum_word, escape, hints_text, predicate_text, typed_attr_text
from tile.ir._asm_debug import LocationAliases
from tile.ir._asm_formats import (
    AttrDict,
    Custom,
    Element,
    FormatState,
    Lit,
    OIList,
    Optional,
    Ref,
    TypeOf,
    Ws,
    format_of,
)
from tile.ir._asm_names import Names, name_function
from tile.ir._asm_types import type_text, types_text
from tile.ir._attrs import ArrayAttr, DenseElementsAttr, OptimizationHints
from tile.ir._errors import VerifyError
from tile.ir._ir import Block, Function, Global, Module, Operation, Region, Value
from tile.ir.ops import CATALOG, AttrKind, OpDef, OperandKind

__all__ = ["MNEMONICS", "print_function", "print_module"]

_REGION_NAMES = {"then": 0, "else": 1, "body": 0}
_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
# Catalog names that tileirdisasm 13.5 spells differently.
MNEMONICS = {"pow": "fpowf"}
_T = TypeVar("_T")


def print_module(module: Module, *, debug: bool = False) -> str:
    """Return the text of `module` exactly as ``tileirdisasm`` prints it.

    Parameters
    ----------
    module
        The module to print (it should verify; invalid IR is printed best-effort).
    debug
        Also print locations, as ``tileirdisasm -g`` does: ``loc(#alias)`` after each op and function, and
        the alias definitions at the end.

    Raises
    ------
    VerifyError
        The module does not verify and has a part with no text form (the message lists the verifier's problems).
    """
    return _guarded(module, lambda: _module_text(module, debug))


def print_function(fn: Function) -> str:
    """Return the text of one entry function (with a trailing newline)."""
    return _guarded(Module([fn]), lambda: _Printer(name_function(fn), None).function(fn) + "\n")


def _module_text(module: Module, debug: bool) -> str:
    locs = LocationAliases(module) if debug else None
    producer = f"// Producer: {module.producer}\n" if module.producer else ""
    globals_ = "".join(_global_text(g, locs) for g in module.globals)
    functions = "".join(_Printer(name_function(fn), locs).function(fn) + "\n" for fn in module.functions)
    return producer + globals_ + functions + (locs.definitions() if locs else "")


def _guarded(module: Module, text: Callable[[], _T]) -> _T:
    """Run `text`; when IR the printer has no text for makes it fail, raise `VerifyError` naming the verifier's
    problems. A failure on IR that verifies is the printer's own bug and propagates unchanged."""
    try:
        return text()
    except VerifyError:
        raise
    except Exception as exc:
        from tile.ir._verifier import verify_problems  # the verifier prints types and ops through this module

        problems = verify_problems(module)
        if not problems:
            raise
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        reason = "; ".join(problems[:3]) + more
        raise VerifyError(f"cannot print IR that does not verify: {reason}; run tile.ir.verify() first") from exc


def _global_text(g: Global, locs: LocationAliases | None) -> str:
    # The visibility directive prints "private " (with its own blank) or nothing, after the usual blank.
    vis = "" if g.visibility == 0 else f"{g.visibility} "
    const = " constant" if g.constant else ""
    align = f" alignment = {g.alignment}" if g.alignment else ""
    loc = f" {locs.ref(None)}" if locs else ""
    return f"global {vis}{const} {symbol(g.name)}{align} {dense_text(g.value)}{loc}\n"


def symbol(name: str) -> str:
    """``@name``, quoted with MLIR escapes when `name` is not a bare identifier."""
    return f"@{name}" if _BARE_SYMBOL.fullmatch(name) else "@" + escape(name)


class _Printer:
    def __init__(self, names: Names, locs: LocationAliases | None) -> None:
        self.names = names
        self.locs = locs

    def function(self, fn: Function) -> str:
        params = ", ".join(f"{self.names.ref(p)}: {type_text(p.type)}" for p in fn.params)
        hints = f" optimization_hints={hints_text(fn.hints)}" if fn.hints and fn.hints.by_arch else ""
        loc = f" {self.locs.ref(fn.loc)}" if self.locs else ""
        return f"entry {symbol(fn.name)}({params}){hints} {self.block(fn.body, 0, elide=None)}{loc}"

    def block(self, block: Block, indent: int, elide: str | None) -> str:
        """``{`` newline, the ops one level deeper, ``}`` at `indent`; a bare `elide` terminator is implied."""
        ops = block.ops
        last = ops[-1] if ops else None
        if last is not None and last.name == elide and not last.operands:
            ops = ops[:-1]
        body = "".join(self.op_line(op, indent + 2) + "\n" for op in ops)
        return "{\n" + body + " " * indent + "}"

    def op_line(self, op: Operation, indent: int) -> str:
        head = f"{self.names.results(op)} = " if op in self.names.groups else ""
        loc = f" {self.locs.ref(op.loc)}" if self.locs else ""
        return " " * indent + head + MNEMONICS.get(op.name, op.name) + self.rest(op, indent) + loc

    def rest(self, op: Operation, indent: int) -> str:
        fmt = format_of(op.name)
        if fmt is None:
            from tile.ir._asm_custom import print_custom

            return print_custom(self, op, indent)
        out: list[str] = []
        _Render(self, op, indent, out).elements(fmt, FormatState(), emit=True)
        return "".join(out)

    def ref(self, value: Value) -> str:
        return self.names.ref(value)

    def refs(self, values: list[Value]) -> str:
        return ", ".join(self.names.ref(v) for v in values)

    def region_args(self, block: Block) -> str:
        return "(" + ", ".join(f"{self.ref(a)}: {type_text(a.type)}" for a in block.args) + ")"


class _Render:
    """Interprets one declarative format for one op."""

    def __init__(self, printer: _Printer, op: Operation, indent: int, out: list[str]) -> None:
        self.p = printer
        self.op = op
        self.opdef: OpDef = CATALOG[op.name]
        self.indent = indent
        self.out = out

    def elements(self, elements: tuple[Element, ...], st: FormatState, emit: bool) -> None:
        for e in elements:
            self.element(e, st, emit)

    def element(self, e: Element, st: FormatState, emit: bool) -> None:
        text: str | None = None
        if isinstance(e, Lit):
            blank = st.before_literal(e.text)
            text = (" " if blank else "") + e.text
        elif isinstance(e, Ws):
            st.whitespace(e.blank)
            text = " " if e.blank else ""
        elif isinstance(e, AttrDict):
            st.punct = False
        elif isinstance(e, Optional):
            self.elements(e.elements, st, emit and self.present(e.anchor))
        elif isinstance(e, OIList):
            for keyword, name in e.clauses:
                if self.op.attributes.get(name):
                    blank = st.before_literal(keyword)
                    if emit:
                        self.out.append((" " if blank else "") + keyword)
        elif isinstance(e, Ref) and e.anchor and self.is_unit(e.name):
            return
        else:
            blank = st.before_element()
            text = ((" " if blank else "") + self.value_text(e)) if emit else None
        if emit and text:
            self.out.append(text)

    def is_unit(self, name: str) -> bool:
        return any(a.name == name and a.kind is AttrKind.UNIT for a in self.opdef.attrs)

    def group(self, name: str) -> list[Value] | None:
        for i, spec in enumerate(self.opdef.operands):
            if spec.name == name:
                # a 13.1 print_tko carries no token group at all
                return self.op.operand_group(i) if i < len(self.op.segments) else []
        if name == "results":
            return self.op.results
        for i, r in enumerate(self.opdef.results):
            if r.name == name:
                return self.op.results[i : i + 1]
        return None

    def present(self, name: str) -> bool:
        values = self.group(name)
        if values is not None:
            return bool(values)
        if name in _REGION_NAMES:
            return bool(self.op.regions[_REGION_NAMES[name]].blocks)
        spec = self.opdef.attr(name)
        value = self.op.attributes.get(name)
        if spec.kind is AttrKind.UNIT:
            return bool(value)
        return value is not None and value != spec.default

    def value_text(self, e: Element) -> str:
        if isinstance(e, TypeOf):
            values = self.group(e.name)
            assert values is not None, e.name
            if not values and e.name == "result_token":
                return "token"  # 13.1 print has no result; tileirdisasm shows the token it adds
            return types_text([v.type for v in values])
        if isinstance(e, Custom):
            return self.custom(e)
        assert isinstance(e, Ref)
        values = self.group(e.name)
        if values is not None:
            return self.p.refs(values)
        return self.attr_text(e.name)

    def attr_text(self, name: str) -> str:  # noqa: PLR0911 - one return per attribute kind reads as a table
        spec = self.opdef.attr(name)
        value = self.op.attributes.get(name, spec.default)
        if spec.kind is AttrKind.ENUM:
            return f"<{enum_word(value)}>"
        if spec.kind is AttrKind.BOOL:
            return "true" if value else "false"
        if spec.kind is AttrKind.STRING:
            return escape(str(value))
        if spec.kind is AttrKind.I32_LIST:
            assert isinstance(value, tuple)
            return "[" + ", ".join(map(str, value)) + "]"
        if spec.kind is AttrKind.ARRAY:
            elements = value.elements if isinstance(value, ArrayAttr) else value
            assert isinstance(elements, tuple)
            return "[" + ", ".join(typed_attr_text(a) for a in elements) + "]"
        if spec.kind is AttrKind.HINTS:
            assert isinstance(value, OptimizationHints)
            return hints_text(value)
        return str(value)

    def custom(self, e: Custom) -> str:  # noqa: PLR0911 - one return per directive kind reads as a table
        if e.kind in ("IfRegion", "ArgumentRegion"):
            region: Region = self.op.regions[_REGION_NAMES[e.name]]
            if e.kind == "IfRegion":
                return self.p.block(region.block, self.indent, elide="yield")
            head = "\n" + " " * self.indent + self.p.region_args(region.block) + " "
            return head + self.p.block(region.block, self.indent, elide=None)
        spec = self.opdef.attr(e.name)
        value = self.op.attributes.get(e.name, spec.default)
        if e.kind == "Rounding":
            return "" if value == spec.default else f"rounding<{value}>"
        if e.kind == "Keyword":
            return str(value)
        if e.kind == "Dense":
            assert isinstance(value, DenseElementsAttr)
            return dense_text(value)
        if e.kind == "Predicate":
            return predicate_text(value)
        if e.kind == "Symbol":
            return symbol(str(value))
        raise ValueError(f"unknown directive custom<{e.kind}>")


def operand_kinds(opdef: OpDef) -> dict[str, OperandKind]:
    """Operand group name -> arity, for the assembler."""
    return {o.name: o.kind for o in opdef.operands}
