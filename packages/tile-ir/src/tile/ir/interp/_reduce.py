"""Reductions and scans with a region body, and matrix multiply-accumulate.

The body of ``reduce``/``scan`` is written for rank-0 tiles; the interpreter runs it on whole arrays at once
(every op allowed in the body is elementwise), so a reduction over a dim of size n costs log2(n) body runs:
a pairwise tree for ``reduce`` (accumulator = left half, element = right half) and a Hillis-Steele prefix for
``scan`` (the accumulator of position j is the combination of the d positions before it, or the identity).
A body that is one f32/f64/signed-integer add, mul, max, min, and, or, xor of its two arguments runs as the
numpy reduction itself. ``mmaf`` multiplies in float32 (float64 for f64) and rounds once to the accumulator
type; ``mmai`` multiplies i8 exactly and wraps to i32; ``mmaf_scaled`` first multiplies each K-block of its
operands by that block's scale factor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import ScalarType

from ._arith import element_of
from ._compile import BlockProgram, Compiler, Env, Signal, Step, StepFactory, attr
from ._dtypes import Array, storage, unsigned_view
from ._i1 import narrow

__all__ = ["HANDLERS"]

_UFUNCS: dict[str, Any] = {
    "addf": np.add, "mulf": np.multiply, "addi": np.add, "muli": np.multiply, "maxi": np.maximum,
    "mini": np.minimum, "andi": np.bitwise_and, "ori": np.bitwise_or, "xori": np.bitwise_xor,
}  # fmt: skip
_FAST_TYPES = ("f32", "f64", "i8", "i16", "i32", "i64")


def _fast_ufunc(op: Operation) -> Any | None:
    """The numpy ufunc equivalent to a one-op body combining its two arguments, if there is one."""
    block = op.regions[0].blocks[0]
    if len(op.operands) != 1 or len(block.ops) != 2 or element_of(op).name not in _FAST_TYPES:
        return None
    body, end = block.ops
    if end.name != "yield" or end.operands != [body.results[0]]:
        return None
    if set(map(id, body.operands)) != set(map(id, block.args)):
        return None
    return _ufunc_of(body)


def _ufunc_of(body: Operation) -> Any | None:
    if body.name in ("maxf", "minf"):
        propagate = bool(attr(body, "propagate_nan", False))
        return {("maxf", True): np.maximum, ("maxf", False): np.fmax,
                ("minf", True): np.minimum, ("minf", False): np.fmin}[(body.name, propagate)]  # fmt: skip
    exact = attr(body, "rounding_mode", "nearest_even") == "nearest_even" and not attr(body, "flush_to_zero", False)
    if not exact or attr(body, "signedness", "signed") != "signed":
        return None
    return _UFUNCS.get(body.name)


def _identities(op: Operation) -> list[Array]:
    attrs = attr(op, "identities").elements
    return [_identity(a.value, element_of(op, i)) for i, a in enumerate(attrs)]


def _identity(value: Any, t: ScalarType) -> Array:
    # an identity is written masked to the width: an i1 keeps its low bit (not its truth value)
    return narrow(np.asarray(value)) if t.name == "i1" else np.asarray(value).astype(storage(t))


def _combine(
    body: BlockProgram, env: Env, elems: list[Array], accs: list[Array], shape: tuple[int, ...]
) -> list[Array]:
    args = [x for pair in zip(elems, accs, strict=True) for x in pair]
    signal = body.run(env, args)
    assert signal is not None
    assert signal[0] == "yield"
    return [np.broadcast_to(v, shape) for v in signal[1]]


def _tree(body: BlockProgram, env: Env, values: list[Array], dim: int, ids: list[Array]) -> list[Array]:
    size = values[0].shape[dim]
    if size == 0:
        shape = values[0].shape[:dim] + values[0].shape[dim + 1 :]
        return [np.broadcast_to(i, shape) for i in ids]
    while size > 1:
        if size % 2:
            pad = [
                np.expand_dims(np.broadcast_to(i, v.shape[:dim] + v.shape[dim + 1 :]), dim)
                for i, v in zip(ids, values, strict=True)
            ]
            values = [np.concatenate([v, p], axis=dim) for v, p in zip(values, pad, strict=True)]
            size += 1
        half = size // 2
        left = [np.take(v, np.arange(half), axis=dim) for v in values]
        right = [np.take(v, np.arange(half, size), axis=dim) for v in values]
        values = _combine(body, env, right, left, left[0].shape)
        size = half
    return [np.take(v, 0, axis=dim) for v in values]


def _reduce(op: Operation, c: Compiler) -> Step:
    ins, outs, dim = c.slots(op.operands), c.slots(op.results), int(attr(op, "dim"))
    ufunc, ids = _fast_ufunc(op), _identities(op)
    body = c.block(op.regions[0].blocks[0])
    dtypes = [storage(element_of(op, i)) for i in range(len(outs))]

    def step(env: Env) -> Signal | None:
        values = [np.asarray(env[s]) for s in ins]
        if ufunc is not None:
            results = [ufunc.reduce(values[0], axis=dim).astype(dtypes[0])]
        else:
            results = _tree(body, env, values, dim, ids)
        for slot, value, dtype in zip(outs, results, dtypes, strict=True):
            env[slot] = np.asarray(value).astype(dtype, copy=False)
        return None

    return step


def _prefix(body: BlockProgram, env: Env, values: list[Array], dim: int, ids: list[Array]) -> list[Array]:
    size, shift = values[0].shape[dim], 1
    while shift < size:
        fill = [
            np.broadcast_to(i, (*v.shape[:dim], shift, *v.shape[dim + 1 :])) for i, v in zip(ids, values, strict=True)
        ]
        before = [
            np.concatenate([f, np.take(v, np.arange(size - shift), axis=dim)], axis=dim)
            for f, v in zip(fill, values, strict=True)
        ]
        values = _combine(body, env, values, before, values[0].shape)
        shift *= 2
    return values


def _scan(op: Operation, c: Compiler) -> Step:
    ins, outs, dim = c.slots(op.operands), c.slots(op.results), int(attr(op, "dim"))
    reverse, ufunc, ids = bool(attr(op, "reverse", False)), _fast_ufunc(op), _identities(op)
    body = c.block(op.regions[0].blocks[0])
    dtypes = [storage(element_of(op, i)) for i in range(len(outs))]

    def step(env: Env) -> Signal | None:
        values = [np.asarray(env[s]) for s in ins]
        if reverse:
            values = [np.flip(v, axis=dim) for v in values]
        if ufunc is not None:
            results = [ufunc.accumulate(values[0], axis=dim).astype(dtypes[0])]
        else:
            results = _prefix(body, env, values, dim, ids)
        if reverse:
            results = [np.flip(v, axis=dim) for v in results]
        for slot, value, dtype in zip(outs, results, dtypes, strict=True):
            env[slot] = np.asarray(value).astype(dtype, copy=False)
        return None

    return step


def _mma(op: Operation, c: Compiler, product: Callable[[Array, Array], Array]) -> Step:
    a, b, acc = c.slots(op.operands[:3])
    out, dtype = c.slot(op.results[0]), storage(element_of(op))

    def step(env: Env) -> Signal | None:
        env[out] = np.asarray(product(env[a], env[b]) + env[acc]).astype(dtype)
        return None

    return step


def _mmaf(op: Operation, c: Compiler) -> Step:
    wide = np.float64 if element_of(op).name == "f64" else np.float32
    return _mma(op, c, lambda a, b: np.matmul(np.asarray(a, dtype=wide), np.asarray(b, dtype=wide)))


def _mmai(op: Operation, c: Compiler) -> Step:
    lhs, rhs = (v.type.element for v in op.operands[:2])  # type: ignore[union-attr]  # verified int tiles
    assert isinstance(lhs, ScalarType)
    assert isinstance(rhs, ScalarType)
    sa, sb = attr(op, "signedness_lhs", "signed"), attr(op, "signedness_rhs", "signed")

    def widen(x: Array, t: ScalarType, sign: str) -> Array:
        return (unsigned_view(x, t) if sign == "unsigned" else np.asarray(x)).astype(np.float64)

    def product(a: Array, b: Array) -> Array:
        # i8 x i8 products summed over K < 2**37 stay exact in float64, and BLAS makes this fast.
        exact = np.matmul(widen(a, lhs, sa), widen(b, rhs, sb)).astype(np.int64)
        return np.asarray(exact).astype(np.int32)

    return _mma(op, c, product)


def _mmaf_scaled(op: Operation, c: Compiler) -> Step:
    a, b, acc, sa, sb = c.slots(op.operands[:5])
    out, dtype = c.slot(op.results[0]), storage(element_of(op))

    def step(env: Env) -> Signal | None:
        lhs, rhs = np.asarray(env[a], dtype=np.float32), np.asarray(env[b], dtype=np.float32)
        lhs_scale, rhs_scale = np.asarray(env[sa], dtype=np.float32), np.asarray(env[sb], dtype=np.float32)
        lhs = lhs * np.repeat(lhs_scale, lhs.shape[-1] // lhs_scale.shape[-1], axis=-1)
        rhs = rhs * np.repeat(rhs_scale, rhs.shape[-2] // rhs_scale.shape[-2], axis=-2)
        env[out] = (np.matmul(lhs, rhs) + env[acc]).astype(dtype)
        return None

    return step


HANDLERS: dict[str, StepFactory] = {
    "reduce": _reduce,
    "scan": _scan,
    "mmaf": _mmaf,
    "mmai": _mmai,
    "mmaf_scaled": _mmaf_scaled,
}
