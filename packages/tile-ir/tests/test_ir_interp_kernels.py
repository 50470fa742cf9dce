"""Whole kernels built with tile.ir's builder, run by the interpreter and compared with numpy.

Kernels follow cuTile Python's calling convention: every array is (base pointer, shape..., strides...) with
i32 extents, wrapped in a dynamic tensor_view, and tiled by partition views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

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
    interp,
    ptr,
    scalar,
    tile,
)

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


@pytest.mark.parametrize(("n", "t"), [(1024, 128), (1000, 128), (5, 8)])
def test_vadd_matches_numpy_including_partial_last_tile(n: int, t: int) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    z = np.full(n + 3, np.nan, np.float32)
    interp.launch(vadd_kernel(t), -(-n // t), args_for(x, y, z[:n]))
    np.testing.assert_array_equal(z[:n], x + y)
    assert np.isnan(z[n:]).all(), "the masked tail of the last tile must not be written"


@pytest.mark.parametrize(("m", "n", "k"), [(128, 128, 64), (100, 70, 50)])
def test_gemm_matches_numpy(m: int, n: int, k: int) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float16)
    bm = rng.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    interp.launch(gemm_kernel(64, 64, 32), (-(-m // 64), -(-n // 64)), args_for(a, bm, c))
    np.testing.assert_allclose(c, a.astype(np.float64) @ bm.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_gemm_of_transposed_input_views() -> None:
    rng = np.random.default_rng(2)
    a_t = rng.standard_normal((64, 128)).astype(np.float16)  # stored K x M, passed as its M x K transpose
    bm = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.zeros((128, 64), np.float32)
    interp.launch(gemm_kernel(64, 64, 32), (2, 1), args_for(a_t.T, bm, c))
    np.testing.assert_allclose(c, a_t.T.astype(np.float64) @ bm, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("cols", [256, 200])
def test_softmax_matches_numpy_with_neg_inf_padding(cols: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, cols)).astype(np.float32) * 4
    y = np.zeros_like(x)
    interp.launch(softmax_kernel(256), 33, args_for(x, y))
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_while_loop_and_if_else_follow_cutile_lowering() -> None:
    """cuTile's `while i < n` becomes loop{if cond {} else {break}; ...; continue}; `if` yields a value."""
    fn, b, (xv, yv), (n,) = entry("ctrl", [(f32, 1), (f32, 1)], [i32])
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    t, _ = b.load_view_tko(partition(b, xv, (64,)), [bx], tok)
    zero_i, one_i = const_i32(b, 0), const_i32(b, 1)
    with b.loop([b.constant(0.0, tile((64,), f32)), zero_i], [tile((64,), f32), I32]) as loop:
        acc, i = loop.args
        with b.if_(b.cmpi(i, n, comparison_predicate="less_than", signedness="signed")) as br:
            with br.then_():
                b.yield_()
            with br.else_():
                b.break_([acc, i])
        b.continue_([b.addf(acc, t), b.addi(i, one_i)])
    acc = loop.results[0]
    even = b.cmpi(
        b.remi(bx, const_i32(b, 2), signedness="signed"), zero_i, comparison_predicate="equal", signedness="signed"
    )
    with b.if_(even, [acc.type]) as br:
        with br.then_():
            b.yield_([b.mulf(acc, b.constant(2.0, tile((64,), f32)))])
        with br.else_():
            b.yield_([b.subf(acc, b.constant(1.0, tile((64,), f32)))])
    b.call("store_view_tko", br.results[0], partition(b, yv, (64,)), [bx], tok)
    b.return_()
    x = np.arange(256, dtype=np.float32)
    y = np.zeros_like(x)
    interp.launch(Module([fn]), 4, args_for(x, y, scalars=[3]))
    tripled = (x * 3).reshape(4, 64)
    expect = np.where(np.arange(4)[:, None] % 2 == 0, tripled * 2, tripled - 1).reshape(-1)
    np.testing.assert_array_equal(y, expect)
