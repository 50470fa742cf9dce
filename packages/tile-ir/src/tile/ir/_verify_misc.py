"""Typing rules of the verifier for bit casts, extract/insert, matrix multiply element types, reductions,
print formats and assume predicates; `_verify_types.type_problems` dispatches to them by op name."""

from __future__ import annotations

import re
from collections.abc import Callable

from tile.ir._attrs import Bounded, DivBy, SameElements
from tile.ir._enums import RoundingMode, Signedness
from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType, Type

__all__ = ["MISC_RULES"]

_PRINTF = re.compile(r"%%|%[-+ #0]*(\d+|\*)?(\.(\d+|\*))?(hh|h|ll|l|z|j|t)?[diouxXeEfFgGaAcsp]")
_MMA_ACC = {"f8E4M3FN": {"f16", "f32"}, "f8E5M2": {"f16", "f32"}, "f16": {"f16", "f32"}, "bf16": {"f32"}}
_MMA_ACC |= {"tf32": {"f32"}, "f32": {"f32"}, "f64": {"f64"}}


def _tiles(*types: Type) -> list[TileType] | None:
    return [t for t in types if isinstance(t, TileType)] if all(isinstance(t, TileType) for t in types) else None


def _bits(t: TileType) -> int:
    elem = t.element
    return elem.bits if isinstance(elem, ScalarType) else 64


def _bitcast(op: Operation) -> list[str]:
    tiles = _tiles(op.operands[0].type, op.results[0].type)
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
    tiles = _tiles(source, dest)
    if tiles is None:
        return [f"{op.name} takes tiles"]
    big, small = (tiles[1], tiles[0]) if op.name == "insert" else (tiles[0], tiles[1])
    if big.rank != small.rank or big.element != small.element or len(indices) != big.rank:
        return [f"{op.name} needs tiles of one rank and element type and one index per dim: {big}, {small}"]
    if any(b % s for b, s in zip(big.shape, small.shape, strict=True)):
        return [f"the slice shape {small.shape} must divide {big.shape}"]
    if op.name == "insert" and op.results[0].type != big:
        return [f"insert yields the destination type {big}"]
    return []


def _mma_elements(op: Operation) -> list[str]:
    tiles = _tiles(*(v.type for v in op.operands[:3]))
    if tiles is None:
        return []
    a, b, acc = (t.element for t in tiles)
    names = tuple(getattr(e, "name", str(e)) for e in (a, b, acc))
    if op.name == "mmai":
        ok = names[0] == names[1] == "i8" and names[2] == "i32"
    else:
        same = names[0] == names[1] or {names[0], names[1]} <= {"f8E4M3FN", "f8E5M2"}
        ok = same and names[2] in _MMA_ACC.get(names[0], set())
    return [] if ok else [f"unsupported element types {names[0]} x {names[1]} -> {names[2]}"]


def _reduce_results(op: Operation) -> list[str]:
    dim = op.attributes.get("dim")
    problems = []
    for operand, result in zip(op.operands, op.results, strict=False):
        tiles = _tiles(operand.type, result.type)
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


def _assume(op: Operation) -> list[str]:
    predicate = op.attributes.get("predicate")
    if not isinstance(predicate, (DivBy, SameElements, Bounded)):
        return [f"assume needs a div_by, same_elements or bounded predicate, got {predicate!r}"]
    return [] if op.results[0].type == op.operands[0].type else ["assume yields its operand's type"]


def _width_change(op: Operation) -> list[str]:
    tiles = _tiles(op.operands[0].type, op.results[0].type)
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


def _mmaf_scaled(op: Operation) -> list[str]:
    res, acc = op.results[0].type, op.operands[2].type
    ok = isinstance(res, TileType) and getattr(res.element, "name", "") == "f32" and res == acc
    return [] if ok else [f"mmaf_scaled accumulates in f32 and yields the accumulator type, got {res} for {acc}"]


_R = RoundingMode
_DIRECTED = {_R.NEAREST_EVEN, _R.ZERO, _R.NEGATIVE_INF, _R.POSITIVE_INF}
# rounding modes tileirdisasm 13.5 accepts per ftof conversion (measured); pairs not listed are not checked
_FTOF_BY_PAIR = {
    ("f32", "f16"): {_R.NEAREST_EVEN, _R.ZERO},
    ("f32", "bf16"): {_R.NEAREST_EVEN, _R.ZERO},
    ("f32", "tf32"): {_R.NEAREST_EVEN, _R.ZERO, _R.NEAREST_AWAY},
    ("f64", "f32"): _DIRECTED,
}
_FTOF_BY_TARGET = {
    "f8E4M3FN": {_R.NEAREST_EVEN},
    "f8E5M2": {_R.NEAREST_EVEN},
    "f4E2M1FN": {_R.NEAREST_EVEN},
    "f8E8M0FNU": {_R.ZERO, _R.POSITIVE_INF},
}


def _ftof_rounding(op: Operation) -> list[str]:
    tiles = _tiles(op.operands[0].type, op.results[0].type)
    mode = op.attributes.get("rounding_mode")
    if tiles is None:
        return []
    src, dst = (getattr(t.element, "name", "") for t in tiles)
    if src == dst:
        return [f"ftof from {src} to {dst} is a no-op; drop it"]
    allowed = _FTOF_BY_TARGET.get(dst) or _FTOF_BY_PAIR.get((src, dst))
    if allowed is None and _bits(tiles[1]) > _bits(tiles[0]):
        allowed = _DIRECTED | {_R.NEAREST_AWAY}
    if allowed is not None and mode not in allowed:
        choices = ", ".join(sorted(str(m) for m in allowed))
        return [f"rounding_mode {mode} is not supported for {src} -> {dst}; use one of {choices}"]
    return []


def _divi(op: Operation) -> list[str]:
    unsigned = op.attributes.get("signedness") is Signedness.UNSIGNED
    if unsigned and op.attributes.get("rounding") is _R.NEGATIVE_INF:
        return ["divi: rounding negative_inf is not allowed with unsigned operands (use zero)"]
    return []


MISC_RULES: dict[str, Callable[[Operation], list[str]]] = {
    "ftof": _ftof_rounding,
    "exti": _width_change,
    "trunci": _width_change,
    "alloca": _alloca,
    "mmaf_scaled": _mmaf_scaled,
    "bitcast": _bitcast,
    "extract": _extract,
    "insert": _extract,
    "reduce": _reduce_results,
    "scan": _reduce_results,
    "assume": _assume,
}
MMA_ELEMENT_RULE = _mma_elements
PRINT_RULE = _print
DIVI_RULE = _divi
