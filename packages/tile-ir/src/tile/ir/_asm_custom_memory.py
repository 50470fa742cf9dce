"""Hand-written syntax of the view memory ops: ``load_view_tko``, ``store_view_tko``, ``atomic_red_view_tko`` and
the ``multimem_*`` view ops, printing and parsing side by side (registered in `tile.ir._asm_custom`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tile.ir._asm_attrs import hints_text, parse_hints
from tile.ir._asm_types import type_text, types_text
from tile.ir._attrs import OptimizationHints
from tile.ir._enums import AtomicRMWMode, MemoryOrdering, MemoryScope, MultimemReductionKind
from tile.ir._ir import Operation, Value
from tile.ir.ops import CATALOG, OpDef

if TYPE_CHECKING:
    from tile.ir._asm_custom import OpParser
    from tile.ir._printer import _Printer

__all__ = ["parse_multimem", "parse_view_op", "print_multimem", "print_view_op"]


def _opdef(op: Operation) -> OpDef:
    return CATALOG[op.name]


def _memory_head(op: Operation) -> str:
    scope = op.attributes.get("memory_scope")
    return f" {op.attributes['memory_ordering_semantics']}" + (f" {scope}" if scope is not None else "")


def _index_types(indices: list[Value]) -> str:
    if not indices:
        return ""
    types = [v.type for v in indices]
    if all(t == types[0] for t in types):
        return ", " + type_text(types[0])
    return "".join(", " + type_text(t) for t in types)


def _optionals(p: _Printer, op: Operation, token_group: int) -> str:
    text = ""
    tok = op.operand_group(token_group)
    if tok:
        text += f" token = {p.ref(tok[0])}"
    hints = op.attributes.get("optimization_hints")
    if hints is not None:
        assert isinstance(hints, OptimizationHints)
        text += f" optimization_hints = {hints_text(hints)}"
    inbounds = op.attributes.get("inbounds")
    if isinstance(inbounds, tuple) and any(inbounds):
        text += f" inbounds = [{', '.join('true' if b else 'false' for b in inbounds)}]"
    return text


def _view_index(p: _Printer, view: Value, index: list[Value]) -> str:
    return f" {p.ref(view)}[{p.refs(index)}]"


def print_view_op(p: _Printer, op: Operation, indent: int) -> str:
    groups = {spec.name: op.operand_group(i) for i, spec in enumerate(_opdef(op).operands)}
    view, index = groups["view"][0], groups["index"]
    text = _memory_head(op)
    token_group = [s.name for s in _opdef(op).operands].index("token")
    if op.name == "load_view_tko":
        text += _view_index(p, view, index) + _optionals(p, op, token_group)
        text += f" : {type_text(view.type)}{_index_types(index)} -> {type_text(op.results[0].type)}, token"
        return text
    value = groups.get("tile") or groups.get("value") or []
    if op.name == "atomic_red_view_tko":
        text += _view_index(p, view, index) + f", {op.attributes['mode']}, {p.ref(value[0])}"
        text += _optionals(p, op, token_group)
    else:
        text += f" {p.ref(value[0])}," + _view_index(p, view, index) + _optionals(p, op, token_group)
    return text + f" : {type_text(value[0].type)}, {type_text(view.type)}{_index_types(index)} -> token"


def print_multimem(p: _Printer, op: Operation, indent: int) -> str:
    names = [s.name for s in _opdef(op).operands]
    groups = {name: op.operand_group(i) for i, name in enumerate(names)}
    view, index, tok = groups["view"][0], groups["index"], groups["token"]
    tile = groups.get("tile", [])
    text = _memory_head(op) + f" {p.ref(view)}" + (f", {p.ref(tile[0])}" if tile else "") + f"[{p.refs(index)}]"
    if tok:
        text += f" token = {p.ref(tok[0])}"
    inbounds = op.attributes.get("inbounds")
    flags = inbounds if isinstance(inbounds, tuple) and any(inbounds) else ()
    # the inbounds directive prints its blank even when it prints nothing
    text += f" inbounds = [{', '.join('true' if b else 'false' for b in flags)}]" if flags else " "
    reduction = op.attributes.get("reduction")
    if isinstance(reduction, MultimemReductionKind) and reduction != MultimemReductionKind(0):
        text += f" attributes {{reduction = #cuda_tile.multimem_reduction_kind<{reduction}>}}"
    types = [view.type, *(v.type for v in tile), *(v.type for v in index), *(v.type for v in tok)]
    results = types_text([r.type for r in op.results])
    return text + f" : {types_text(types)} -> {results}"


def parse_multimem(name: str) -> Callable[[OpParser], Operation]:
    def parse(parser: OpParser) -> Operation:
        lex = parser.lex
        attrs: dict[str, object] = {
            "memory_ordering_semantics": parser.keyword_enum(MemoryOrdering, "a memory ordering")
        }
        if lex.peek_keyword() in {str(s) for s in MemoryScope}:
            attrs["memory_scope"] = parser.keyword_enum(MemoryScope, "a memory scope")
        view = parser.value()
        tile = None
        if lex.accept(","):
            tile = parser.value()
        lex.expect("[")
        index = [] if lex.at("]") else parser.value_list()
        lex.expect("]")
        tok = _parse_optionals(parser, attrs)
        if name != "multimem_store_view_tko":
            attrs["reduction"] = MultimemReductionKind(0)
        if lex.accept("attributes"):
            lex.expect("{")
            lex.expect("reduction")
            lex.expect("=")
            lex.expect("#cuda_tile.multimem_reduction_kind")
            lex.expect("<")
            attrs["reduction"] = parser.keyword_enum(MultimemReductionKind, "a reduction kind")
            lex.expect(">")
            lex.expect("}")
        lex.expect(":")
        parser.read_types()
        lex.expect("->")
        results = parser.read_types()
        head: list[object] = [view] if tile is None else [view, tile]
        return parser.make(name, [*head, index, tok[0] if tok else None], attrs, results)

    return parse


def _parse_optionals(parser: OpParser, attrs: dict[str, object]) -> list[Value]:
    lex = parser.lex
    tok: list[Value] = []
    if lex.accept("token"):
        lex.expect("=")
        tok = [parser.value()]
    if lex.accept("optimization_hints"):
        lex.expect("=")
        attrs["optimization_hints"] = parse_hints(lex)
    if lex.accept("inbounds"):
        lex.expect("=")
        lex.expect("[")
        flags: list[bool] = []
        while not lex.accept("]"):
            if flags:
                lex.expect(",")
            flags.append(parser.keyword_bool())
        attrs["inbounds"] = tuple(flags)
    return tok


def parse_view_op(name: str) -> Callable[[OpParser], Operation]:
    def parse(parser: OpParser) -> Operation:
        lex = parser.lex
        attrs: dict[str, object] = {
            "memory_ordering_semantics": parser.keyword_enum(MemoryOrdering, "a memory ordering")
        }
        if lex.peek_keyword() in {str(s) for s in MemoryScope}:
            attrs["memory_scope"] = parser.keyword_enum(MemoryScope, "a memory scope")
        value: Value | None = None
        if name not in ("load_view_tko", "atomic_red_view_tko"):
            value = parser.value()
            lex.expect(",")
        view = parser.value()
        lex.expect("[")
        index = [] if lex.at("]") else parser.value_list()
        lex.expect("]")
        if name == "atomic_red_view_tko":
            lex.expect(",")
            attrs["mode"] = parser.keyword_enum(AtomicRMWMode, "an atomic mode")
            lex.expect(",")
            value = parser.value()
        tok = _parse_optionals(parser, attrs)
        lex.expect(":")
        types = parser.read_types()
        lex.expect("->")
        results = parser.read_types()
        del types
        groups = _view_groups(name, view, index, tok, value)
        return parser.make(name, groups, attrs, results)

    return parse


def _view_groups(name: str, view: Value, index: list[Value], tok: list[Value], value: Value | None) -> list[object]:
    if name == "load_view_tko":
        return [view, index, tok[0] if tok else None]
    if name == "store_view_tko":
        return [value, view, index, tok[0] if tok else None]
    return [view, index, value, tok[0] if tok else None]
