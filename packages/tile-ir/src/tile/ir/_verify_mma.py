"""Typing rules of the verifier for matrix multiply-accumulate: ``mmaf``, ``mmai`` and ``mmaf_scaled``.

Shapes chain as (M x K) x (K x N) -> M x N, optionally batched (3-D, one batch extent for all); the result
has the accumulator's type; ``lhs`` and ``rhs`` share one element type. Element types are data:
`MMA_ACCUMULATORS` (mmaf inputs -> accumulators) and `SCALED_BLOCKS` (mmaf_scaled (operand, scale) element
types -> allowed block sizes, the K elements each scale covers). For ``mmaf_scaled`` the scales are
``lhs_scale`` (M x K/V) and ``rhs_scale`` (K/V x N), of one element type, with the operands' rank. The
tables follow tileiras 13.5 (each rejected combination was checked against it).
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType
from tile.ir._verify_misc import all_tiles

__all__ = ["MMA_ACCUMULATORS", "MMA_RULES", "SCALED_BLOCKS"]

MMA_ACCUMULATORS: dict[str, frozenset[str]] = {
    "f8E4M3FN": frozenset({"f16", "f32"}),
    "f8E5M2": frozenset({"f16", "f32"}),
    "f16": frozenset({"f16", "f32"}),
    "bf16": frozenset({"f32"}),
    "tf32": frozenset({"f32"}),
    "f32": frozenset({"f32"}),
    "f64": frozenset({"f64"}),
}
_ACCUMULATORS = {"mmaf": MMA_ACCUMULATORS, "mmai": {"i8": frozenset({"i32"})}}
SCALED_BLOCKS: dict[tuple[str, str], frozenset[int]] = {
    ("f8E4M3FN", "f8E8M0FNU"): frozenset({32}),
    ("f8E5M2", "f8E8M0FNU"): frozenset({32}),
    ("f4E2M1FN", "f8E8M0FNU"): frozenset({16, 32}),
    ("f4E2M1FN", "f8E4M3FN"): frozenset({16}),
}
_SCALED_OPERANDS = sorted({a for a, _ in SCALED_BLOCKS})
_SCALES = sorted({s for _, s in SCALED_BLOCKS})


def _name(t: TileType) -> str:
    return t.element.name if isinstance(t.element, ScalarType) else str(t.element)


def _shapes(op: Operation) -> list[str]:
    tiles = all_tiles(*(v.type for v in op.operands[:3]))
    if tiles is None or op.results[0].type != tiles[2]:
        return [f"{op.name} result must have the accumulator's type, got {op.results[0].type}"]
    a, b, acc = tiles
    if a.rank not in (2, 3) or a.rank != b.rank or a.rank != acc.rank:
        return [f"{op.name} operands must all be 2-D (MxK, KxN, MxN) or all 3-D (batched)"]
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2 or acc.shape[-2:] != (m, n) or a.shape[:-2] != b.shape[:-2] or acc.shape[:-2] != a.shape[:-2]:
        return [f"{op.name} shapes do not chain: {a} x {b} -> {acc}"]
    if a.element != b.element:
        return [f"{op.name} lhs and rhs must share one element type, got {_name(a)} and {_name(b)}"]
    return []


def _mma_elements(op: Operation) -> list[str]:
    a, _, acc = all_tiles(*(v.type for v in op.operands[:3])) or []
    names = (_name(a), _name(acc))
    ok = names[1] in _ACCUMULATORS[op.name].get(names[0], frozenset())
    return [] if ok else [f"unsupported element types {names[0]} x {names[0]} -> {names[1]}"]


def _mmaf_scaled(op: Operation) -> list[str]:
    tiles = all_tiles(*(v.type for v in op.operands))
    if tiles is None:
        return ["mmaf_scaled takes five tiles"]
    a, b, acc, sa, sb = tiles
    if _name(acc) != "f32":
        return [f"mmaf_scaled accumulates in f32 and yields the accumulator type, got {op.results[0].type}"]
    if len({t.rank for t in tiles}) != 1:
        return [f"mmaf_scaled operands and scales must share one rank, got {a}, {b}, {acc}, {sa}, {sb}"]
    if _name(sa) != _name(sb):
        return [f"lhs_scale and rhs_scale must share one element type, got {_name(sa)} and {_name(sb)}"]
    blocks = SCALED_BLOCKS.get((_name(a), _name(sa)))
    if blocks is None:
        return [
            f"unsupported mmaf_scaled element types {_name(a)} scaled by {_name(sa)}; operands take "
            f"{', '.join(_SCALED_OPERANDS)} and scales {', '.join(_SCALES)} (f8E4M3FN scales only f4E2M1FN)"
        ]
    return _scale_shapes(a, b, sa, sb, blocks)


def _scale_shapes(a: TileType, b: TileType, sa: TileType, sb: TileType, blocks: frozenset[int]) -> list[str]:
    """lhs_scale is (batch) x M x K/V and rhs_scale (batch) x K/V x N for a block size V in `blocks`."""
    batch = a.shape[:-2]
    if sa.shape[:-2] != batch or sb.shape[:-2] != batch:
        return [f"scales must have the operands' batch extent {list(batch)}, got {sa} and {sb}"]
    (m, k), (scale_m, scale_k), (scale_k2, scale_n) = a.shape[-2:], sa.shape[-2:], sb.shape[-2:]
    if scale_m != m or scale_n != b.shape[-1] or scale_k != scale_k2:
        want = f"{m} x K/V and K/V x {b.shape[-1]}"
        return [f"scale shapes must be {want} (one K/V for both), got {sa} and {sb}"]
    if k % scale_k or k // scale_k not in blocks:
        sizes = " or ".join(map(str, sorted(blocks)))
        fits = " or ".join(str(k // v) for v in sorted(blocks) if k % v == 0) or f"a multiple of {min(blocks)} as K"
        return [
            f"each {_name(sa)} scale must cover {sizes} {_name(a)} elements along K, but K = {k} over "
            f"{scale_k} scales gives {k / scale_k:g}; use {fits} scales along K"
        ]
    return []


MMA_RULES: dict[str, Callable[[Operation], list[str]]] = {
    "mmaf": lambda op: _shapes(op) or _mma_elements(op),
    "mmai": lambda op: _shapes(op) or _mma_elements(op),
    "mmaf_scaled": lambda op: _shapes(op) or _mmaf_scaled(op),
}
