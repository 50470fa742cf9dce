"""Ops whose syntax the dialect writes by hand: printing and parsing, side by side per op.

``for``, ``loop``, the view loads/stores and reductions (``load_view_tko``, ``store_view_tko``,
``atomic_red_view_tko``, the ``multimem_*`` ops), the view constructors and the shape queries. Each entry
of `_CUSTOM` pairs a printer (returns the text after the op name) with a parser (consumes that text and
returns the new `Operation`); the assembler's `OpParser` protocol is all a parser sees. The view memory ops' pairs
are in `tile.ir._asm_custom_memory`.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

from tile.ir._asm_custom_memory import parse_multimem, parse_view_op, print_multimem, print_view_op
from tile.ir._asm_types import type_text, types_text
from tile.ir._errors import VerifyError
from tile.ir._ir import Block, Operation, Value
from tile.ir._lexer import Lexer
from tile.ir._types import PointerType, TensorViewType, TileType, Type

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
    **{n: (print_view_op, parse_view_op(n)) for n in ("load_view_tko", "store_view_tko", "atomic_red_view_tko")},
    **{
        n: (print_multimem, parse_multimem(n))
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
