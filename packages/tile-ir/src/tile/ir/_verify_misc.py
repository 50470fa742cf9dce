"""Typing rules of the verifier for bit casts, extract/insert, integer widths, reductions and print formats
(``ftof`` rounding is in `_verify_convert`, ``assume`` in `_verify_assume`); `_verify_types` dispatches by op name.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tile.ir._attrs import DenseElementsAttr
from tile.ir._enums import RoundingMode, Signedness
from tile.ir._ir import Operation, Value
from tile.ir._types import ScalarType, TileType, Type, i32, scalar
from tile.ir._verify_assume import assume_problems
from tile.ir._verify_convert import ftof_problems

__all__ = ["MISC_RULES", "all_tiles"]

_PRINTF = re.compile(r"%%|%[-+ #0]*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|z|j|t)?[diouxXeEfFgGaAcsp]")


def all_tiles(*types: Type) -> list[TileType] | None:
    """The types as tiles when every one is a tile, else None."""
    return [t for t in types if isinstance(t, TileType)] if all(isinstance(t, TileType) for t in types) else None


def _bits(t: TileType) -> int:
    elem = t.element
    return elem.bits if isinstance(elem, ScalarType) else 64


def _bitcast(op: Operation) -> list[str]:
    tiles = all_tiles(op.operands[0].type, op.results[0].type)
    if tiles is None:
        return ["bitcast takes and yields tiles"]
    src, dst = tiles
    if src.shape != dst.shape or _bits(src) != _bits(dst):
        return [f"bitcast keeps the shape and the element width: {src} -> {dst}"]
    return []


def _extract(op: Operation) -> list[str]:
    source = op.operands[0].type
    dest = op.operands[1].type if op.name == "insert" else op.results[0].type
    indices = op.operands[2:] if op.name == "insert" else op.operands[1:]
    tiles = all_tiles(source, dest)
    if tiles is None:
        return [f"{op.name} takes tiles"]
    big, small = (tiles[1], tiles[0]) if op.name == "insert" else (tiles[0], tiles[1])
    if big.rank != small.rank or big.element != small.element or len(indices) != big.rank:
        return [f"{op.name} needs tiles of one rank and element type and one index per dim: {big}, {small}"]
    if any(b % s for b, s in zip(big.shape, small.shape, strict=True)):
        return [f"the slice shape {small.shape} must divide {big.shape}"]
    if op.name == "insert" and op.results[0].type != big:
        return [f"insert yields the destination type {big}"]
    if any(v.type != scalar(i32) for v in indices):
        return [f"{op.name} indices must be tile<i32>, got {', '.join(str(v.type) for v in indices)}"]
    return _constant_slots(op, indices, [b // s for b, s in zip(big.shape, small.shape, strict=True)])


def _constant_slots(op: Operation, indices: list[Value], slots: list[int]) -> list[str]:
    """A constant insert index outside 0..slots-1 makes tileiras 13.5 fail ("failed to compile Tile IR program");
    for extract it only warns (the result is undefined), so only insert is rejected."""
    if op.name != "insert":
        return []
    problems = []
    for dim, (index, count) in enumerate(zip(indices, slots, strict=True)):
        value = _constant_int(index)
        if value is not None and not 0 <= value < count:
            problems.append(f"insert index {dim} is {value}, outside 0..{count - 1}: tileiras 13.5 fails to compile it")
    return problems


def _constant_int(v: Value) -> int | None:
    """The value of a scalar i32 produced by ``constant`` (None when not a constant)."""
    op = v.defining_op
    dense = op.attributes.get("value") if op is not None and op.name == "constant" else None
    if not isinstance(dense, DenseElementsAttr) or len(dense.data) != 4:
        return None
    return int.from_bytes(dense.data, "little", signed=True)


def _reduce_results(op: Operation) -> list[str]:
    dim = op.attributes.get("dim")
    problems = []
    for operand, result in zip(op.operands, op.results, strict=False):
        tiles = all_tiles(operand.type, result.type)
        if tiles is None or not isinstance(dim, int) or not 0 <= dim < tiles[0].rank:
            return [f"{op.name} needs tile operands and a dim inside their rank"]
        src, res = tiles
        want = src if op.name == "scan" else src.with_shape(src.shape[:dim] + src.shape[dim + 1 :])
        if res != want:
            problems.append(f"{op.name} result must be {want}, got {res}")
    if len(op.results) != len(op.operands):
        problems.append(f"{op.name} yields one result per operand")
    return problems


def _print(op: Operation) -> list[str]:
    fmt = op.attributes.get("str")
    args = op.operand_group(0)
    if not isinstance(fmt, str):
        return []
    conversions = [m for m in _PRINTF.finditer(fmt) if m.group(0) != "%%"]
    if len(conversions) != len(args):
        return [f"format {fmt!r} has {len(conversions)} conversions for {len(args)} arguments"]
    return []


def _width_change(op: Operation) -> list[str]:
    tiles = all_tiles(op.operands[0].type, op.results[0].type)
    if tiles is None:
        return []
    src, dst = (_bits(t) for t in tiles)
    if op.name == "exti" and dst <= src:
        return [f"exti must widen: {tiles[0]} -> {tiles[1]}"]
    if op.name == "trunci" and dst >= src:
        return [f"trunci must narrow: {tiles[0]} -> {tiles[1]}"]
    return []


def _alloca(op: Operation) -> list[str]:
    t = op.results[0].type
    ok = isinstance(t, TileType) and t.rank == 0 and not isinstance(t.element, ScalarType)
    return [] if ok else [f"alloca yields a scalar pointer tile, got {t}"]


_R = RoundingMode


def _divi(op: Operation) -> list[str]:
    unsigned = op.attributes.get("signedness") is Signedness.UNSIGNED
    if unsigned and op.attributes.get("rounding") is _R.NEGATIVE_INF:
        return ["divi: rounding negative_inf is not allowed with unsigned operands (use zero)"]
    return []


MISC_RULES: dict[str, Callable[[Operation], list[str]]] = {
    "ftof": ftof_problems,
    "exti": _width_change,
    "trunci": _width_change,
    "alloca": _alloca,
    "bitcast": _bitcast,
    "extract": _extract,
    "insert": _extract,
    "reduce": _reduce_results,
    "scan": _reduce_results,
    "assume": assume_problems,
}
PRINT_RULE = _print
DIVI_RULE = _divi
