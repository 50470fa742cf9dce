"""Whole kernels built with tile.ir's builder, run by the interpreter and compared with numpy.

Kernels follow cuTile Python's calling convention: every array is (base pointer, shape..., strides...) with
i32 extents, wrapped in a dynamic tensor_view, and tiled by partition views.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tile.ir import Module, f32, i32, interp, tile

# Test helpers live beside the tests; --import-mode=importlib does not put this folder on sys.path.
sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_interp_kernels import (
    I32,
    args_for,
    const_i32,
    entry,
    gemm_kernel,
    partition,
    softmax_kernel,
    vadd_kernel,
)


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
