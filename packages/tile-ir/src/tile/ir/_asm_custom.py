"""Ops whose syntax the dialect writes by hand: printing and parsing, side by side per op.

``for``, ``loop``, the view loads/stores and reductions (``load_view_tko``, ``store_view_tko``,
``atomic_red_view_tko``, the ``multimem_*`` ops), the view constructors and the shape queries. Each entry
of `_CUSTOM` pairs a printer (returns the text after the op name) with a parser (consumes that text and
returns the new `Operation`); the assembler's `OpParser` protocol is all a parser sees.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

from tile.ir._asm_attrs import hints_text, parse_hints
from tile.ir._asm_types import type_text, types_text
from tile.ir._attrs import OptimizationHints
from tile.ir._enums import AtomicRMWMode, MemoryOrdering, MemoryScope, MultimemReductionKind
from tile.ir._errors import VerifyError
from tile.ir._ir import Block, Operation, Value
from tile.ir._lexer import Lexer
from tile.ir._types import PointerType, TensorViewType, TileType, Type
from tile.ir.ops import CATALOG, OpDef

if TYPE_CHECKING:
    from tile.ir._printer import _Printer

__all__ = ["OpParser", "custom_ops", "parse_custom", "print_custom"]


class OpParser(Protocol):
    """What a custom-op parser may ask of the assembler."""

    lex: Lexer

    def value(self) -> Value: ...

    def value_list(self) -> list[Value]: ...

    def read_type(self) -> Type: ...

    def read_types(self) -> list[Type]: ...

    def keyword_enum(self, enum: type[IntEnum], what: str) -> IntEnum: ...

    def keyword_bool(self) -> bool: ...

    def make(
        self, name: str, groups: list[object], attrs: dict[str, object], result_types: list[Type]
    ) -> Operation: ...

    def region(self, block: Block, arg_names: list[tuple[str, int]], implicit: str | None) -> None: ...

    def arg_name(self) -> tuple[str, int]: ...


# --- loops ---------------------------------------------------------------------------------------------


def _print_iter_values(p: _Printer, block_args: list[Value], inits: list[Value]) -> str:
    pairs = ", ".join(f"{p.ref(a)} = {p.ref(v)}" for a, v in zip(block_args, inits, strict=True))
    return f"iter_values({pairs})"


def _print_for(p: _Printer, op: Operation, indent: int) -> str:
    lb, ub, step = op.operands[:3]
    block = op.regions[0].block
    head = " unsigned" if op.attributes.get("unsignedCmp") else ""
    head += f" {p.ref(block.args[0])} in ({p.ref(lb)} to {p.ref(ub)}, step {p.ref(step)}) : {type_text(lb.type)} "
    if len(op.operands) > 3:
        head += _print_iter_values(p, block.args[1:], op.operands[3:])
        head += f" -> ({types_text([v.type for v in op.operands[3:]])}) "
    return head + p.block(block, indent, elide="continue")


def _parse_iter_values(parser: OpParser) -> tuple[list[tuple[str, int]], list[Value]]:
    names: list[tuple[str, int]] = []
    inits: list[Value] = []
    parser.lex.expect("iter_values")
    parser.lex.expect("(")
    while not parser.lex.accept(")"):
        if names:
            parser.lex.expect(",")
        names.append(parser.arg_name())
        parser.lex.expect("=")
        inits.append(parser.value())
    return names, inits


def _parse_for(parser: OpParser) -> Operation:
    lex = parser.lex
    unsigned = lex.accept("unsigned")
    iv = parser.arg_name()
    lex.expect("in")
    lex.expect("(")
    lb = parser.value()
    lex.expect("to")
    ub = parser.value()
    lex.expect(",")
    lex.expect("step")
    step = parser.value()
    lex.expect(")")
    lex.expect(":")
    iv_type = parser.read_type()
    names: list[tuple[str, int]] = []
    inits: list[Value] = []
    types: list[Type] = []
    if lex.at("iter_values"):
        names, inits = _parse_iter_values(parser)
        lex.expect("->")
        lex.expect("(")
        types = parser.read_types()
        lex.expect(")")
    op = parser.make("for", [lb, ub, step, inits], {"unsignedCmp": unsigned}, types)
    block = op.regions[0].add_block([iv_type, *types])
    parser.region(block, [iv, *names], "continue")
    return op


def _print_loop(p: _Printer, op: Operation, indent: int) -> str:
    block = op.regions[0].block
    text = " "
    if op.operands:
        text += _print_iter_values(p, block.args, op.operands) + " "
    if op.operands or op.results:
        text += ": "
    if op.operands:
        text += types_text([v.type for v in op.operands]) + " " + ("-> " if op.results else "")
    if op.results:
        text += types_text([r.type for r in op.results]) + " "
    return text + p.block(block, indent, elide="continue")


def _parse_loop(parser: OpParser) -> Operation:
    lex = parser.lex
    names: list[tuple[str, int]] = []
    inits: list[Value] = []
    results: list[Type] = []
    if lex.at("iter_values"):
        names, inits = _parse_iter_values(parser)
        lex.expect(":")
        parser.read_types()
        if lex.accept("->"):
            results = parser.read_types()
    elif lex.accept(":"):
        results = parser.read_types()
    op = parser.make("loop", [inits], {}, results)
    block = op.regions[0].add_block([v.type for v in inits])
    parser.region(block, names, "continue")
    return op


# --- view memory ops -----------------------------------------------------------------------------------


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


def _print_view_op(p: _Printer, op: Operation, indent: int) -> str:
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


def _print_multimem(p: _Printer, op: Operation, indent: int) -> str:
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


def _parse_multimem(name: str) -> Callable[[OpParser], Operation]:
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


def _parse_view_op(name: str) -> Callable[[OpParser], Operation]:
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


# --- views and shapes ----------------------------------------------------------------------------------


def _mixed(values: tuple[int | None, ...], dynamic: list[Value], p: _Printer) -> str:
    wanted = sum(v is None for v in values)
    if wanted != len(dynamic):
        raise VerifyError(f"'make_tensor_view' has {len(dynamic)} dynamic operands for the {wanted} '?' of {values}")
    it = iter(dynamic)
    return ", ".join(p.ref(next(it)) if v is None else str(v) for v in values)


def _print_tensor_view(p: _Printer, op: Operation, indent: int) -> str:
    base, shape, strides = op.operand_group(0), op.operand_group(1), op.operand_group(2)
    t = op.results[0].type
    if not isinstance(t, TensorViewType):
        raise VerifyError(f"'make_tensor_view' must make a tensor_view, makes {t}")
    text = f" {p.ref(base[0])}, shape = [{_mixed(t.shape, shape, p)}], strides = [{_mixed(t.strides, strides, p)}] : "
    if base[0].type != _plain_base(base[0].type):
        text += type_text(base[0].type) + ", "  # a base with a pointer attribute is spelled out
    dyn = shape or strides
    if dyn:
        text += f"{type_text(dyn[0].type)} -> "
    return text + type_text(t)


def _plain_base(t: Type) -> Type:
    if isinstance(t, TileType) and isinstance(t.element, PointerType) and t.element.ptr_attr is not None:
        return TileType(t.shape, PointerType(t.element.pointee))
    return t


def _parse_mixed(parser: OpParser) -> list[Value | int]:
    parser.lex.expect("[")
    out: list[Value | int] = []
    while not parser.lex.accept("]"):
        if out:
            parser.lex.expect(",")
        out.append(parser.value() if parser.lex.at("%") else parser.lex.integer())
    return out


def _parse_tensor_view(parser: OpParser) -> Operation:
    lex = parser.lex
    base = parser.value()
    lex.expect(",")
    lex.expect("shape")
    lex.expect("=")
    shape = _parse_mixed(parser)
    lex.expect(",")
    lex.expect("strides")
    lex.expect("=")
    strides = _parse_mixed(parser)
    lex.expect(":")
    t = parser.read_type()
    while lex.accept(",") or lex.accept("->"):
        t = parser.read_type()
    dyn_shape = [v for v in shape if isinstance(v, Value)]
    dyn_strides = [v for v in strides if isinstance(v, Value)]
    return parser.make("make_tensor_view", [base, dyn_shape, dyn_strides], {}, [t])


def _print_view(p: _Printer, op: Operation, indent: int) -> str:
    return f" {p.ref(op.operands[0])} : {type_text(op.results[0].type)}"


def _parse_view(name: str) -> Callable[[OpParser], Operation]:
    def parse(parser: OpParser) -> Operation:
        source = parser.value()
        parser.lex.expect(":")
        return parser.make(name, [source], {}, [parser.read_type()])

    return parse


def _print_shape_query(p: _Printer, op: Operation, indent: int) -> str:
    src = op.operands[0]
    return f" {p.ref(src)} : {type_text(src.type)} -> {type_text(op.results[0].type)}"


def _parse_shape_query(name: str) -> Callable[[OpParser], Operation]:
    def parse(parser: OpParser) -> Operation:
        src = parser.value()
        parser.lex.expect(":")
        parser.read_type()
        parser.lex.expect("->")
        result = parser.read_type()
        t = src.type
        rank = len(getattr(t, "tile_shape", getattr(t, "shape", ())))
        return parser.make(name, [src], {}, [result] * rank)

    return parse


def _opdef(op: Operation) -> OpDef:
    return CATALOG[op.name]


PrintFn = Callable[["_Printer", Operation, int], str]
ParseFn = Callable[[OpParser], Operation]

_CUSTOM: dict[str, tuple[PrintFn, ParseFn]] = {
    "for": (_print_for, _parse_for),
    "loop": (_print_loop, _parse_loop),
    "make_tensor_view": (_print_tensor_view, _parse_tensor_view),
    **{
        n: (_print_view, _parse_view(n))
        for n in ("make_partition_view", "make_strided_view", "make_gather_scatter_view")
    },
    **{n: (_print_shape_query, _parse_shape_query(n)) for n in ("get_index_space_shape", "get_tensor_shape")},
    **{n: (_print_view_op, _parse_view_op(n)) for n in ("load_view_tko", "store_view_tko", "atomic_red_view_tko")},
    **{
        n: (_print_multimem, _parse_multimem(n))
        for n in ("multimem_load_reduce_view_tko", "multimem_reduce_view_tko", "multimem_store_view_tko")
    },
}


def custom_ops() -> frozenset[str]:
    """Names of the ops with hand-written syntax."""
    return frozenset(_CUSTOM)


def print_custom(p: _Printer, op: Operation, indent: int) -> str:
    """The text after the op name of a hand-written op."""
    return _CUSTOM[op.name][0](p, op, indent)


def parse_custom(name: str, parser: OpParser) -> Operation:
    """Parse the text after the op name of a hand-written op."""
    return _CUSTOM[name][1](parser)
