"""Whole kernels built with tile.ir's builder for the interpreter tests and benchmarks/bench_interp.py.

Kernels follow cuTile Python's calling convention: every array is (base pointer, shape..., strides...) with
i32 extents, wrapped in a dynamic tensor_view, and tiled by partition views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from tile.ir import (
    Builder,
    FloatAttr,
    Function,
    FunctionType,
    Module,
    Padding,
    PartitionViewType,
    ScalarType,
    TensorViewType,
    Value,
    f16,
    f32,
    i32,
    ptr,
    scalar,
    tile,
)

__all__ = ["I32", "args_for", "const_i32", "entry", "gemm_kernel", "partition", "softmax_kernel", "vadd_kernel"]

I32 = scalar(i32)
Arr = npt.NDArray[Any]


def entry(
    name: str, arrays: Sequence[tuple[ScalarType, int]], scalars: Sequence[ScalarType] = ()
) -> tuple[Function, Builder, list[Value], list[Value]]:
    """A kernel taking arrays in cuTile's ABI (plus scalars); returns (fn, builder, tensor views, scalars)."""
    types: list[Any] = []
    for elem, rank in arrays:
        types += [scalar(ptr(elem))] + [I32] * (2 * rank)
    types += [scalar(s) for s in scalars]
    fn = Function(name, FunctionType(tuple(types)))
    b = Builder(fn.body)
    views, k = [], 0
    for elem, rank in arrays:
        p = fn.params[k : k + 1 + 2 * rank]
        k += 1 + 2 * rank
        tv = TensorViewType(elem, (None,) * rank, (None,) * rank)
        views.append(b.call("make_tensor_view", p[0], p[1 : 1 + rank], p[1 + rank :], result_type=tv).results[0])
    return fn, b, views, fn.params[k:]


def partition(
    b: Builder,
    tv: Value,
    shape: tuple[int, ...],
    padding: Padding | None = None,
    dim_map: tuple[int, ...] | None = None,
) -> Value:
    t = tv.type
    assert isinstance(t, TensorViewType)
    pv = PartitionViewType(shape, t, dim_map or tuple(range(len(shape))), padding)
    return b.make_partition_view(tv, result_type=pv)


def args_for(*arrays: Arr, scalars: Sequence[Any] = ()) -> list[Any]:
    out: list[Any] = []
    for a in arrays:
        out += [a, *a.shape, *(s // a.itemsize for s in a.strides)]
    return out + list(scalars)


def const_i32(b: Builder, v: int) -> Value:
    return b.constant(v, I32)


def vadd_kernel(t: int) -> Module:
    fn, b, (x, y, z), _ = entry("vadd", [(f32, 1)] * 3)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    tx, _ = b.load_view_tko(partition(b, x, (t,)), [bx], tok)
    ty, _ = b.load_view_tko(partition(b, y, (t,)), [bx], tok)
    b.call("store_view_tko", b.addf(tx, ty), partition(b, z, (t,)), [bx], tok)
    b.return_()
    return Module([fn])


def gemm_kernel(tm: int, tn: int, tk: int) -> Module:
    fn, b, (av, bv, cv), _ = entry("gemm", [(f16, 2), (f16, 2), (f32, 2)])
    tok = b.make_token()
    bx, by, _ = b.get_tile_block_id()
    pa = partition(b, av, (tm, tk), Padding.ZERO)
    pb = partition(b, bv, (tk, tn), Padding.ZERO)
    _, nk = b.get_index_space_shape(pa, [I32, I32])
    acc0 = b.constant(0.0, tile((tm, tn), f32))
    with b.for_(const_i32(b, 0), nk, const_i32(b, 1), [acc0]) as loop:
        ta, _ = b.load_view_tko(pa, [bx, loop.iv], tok)
        tb, _ = b.load_view_tko(pb, [loop.iv, by], tok)
        b.continue_([b.mmaf(ta, tb, loop.args[0])])
    b.call("store_view_tko", loop.results[0], partition(b, cv, (tm, tn)), [bx, by], tok)
    b.return_()
    return Module([fn])


def softmax_kernel(tn: int) -> Module:
    fn, b, (xv, yv), _ = entry("softmax", [(f32, 2), (f32, 2)])
    tok = b.make_token()
    row, _, _ = b.get_tile_block_id()
    zero = const_i32(b, 0)
    t, _ = b.load_view_tko(partition(b, xv, (1, tn), Padding.NEG_INF), [row, zero], tok)
    row_max = _reduce(b, t, "maxf", float("-inf"))
    e = b.exp(b.subf(t, b.broadcast(b.reshape(row_max, result_type=tile((1, 1), f32)), result_type=t.type)))
    total = _reduce(b, e, "addf", 0.0)
    out = b.divf(e, b.broadcast(b.reshape(total, result_type=tile((1, 1), f32)), result_type=t.type))
    b.call("store_view_tko", out, partition(b, yv, (1, tn)), [row, zero], tok)
    b.return_()
    return Module([fn])


def _reduce(b: Builder, x: Value, combine: str, identity: float) -> Value:
    with b.reduce([x], 1, [FloatAttr.of(f32, identity)]) as red:
        elem, acc = red.args
        b.yield_([getattr(b, combine)(elem, acc)])
    return red.results[0]
