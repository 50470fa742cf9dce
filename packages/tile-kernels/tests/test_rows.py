"""softmax, log_softmax, rmsnorm, layernorm on the CPU interpreter: float64 references with bounds from the dtype and
the row length, odd row lengths, ranks 1-3, strided rows, rows per block, bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, array, assert_within, cast_error, f64, tensor
from tile.frontend import ArgumentError

SHAPES = [(5, 20), (1, 33), (3, 2, 7), (16,), (3, 1)]


def _softmax_ref(x: np.ndarray[Any, Any], out: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd = f64(x)
    shifted = xd - xd.max(axis=-1, keepdims=True)
    ref = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    n = x.shape[-1]
    # Sum of N terms, exp of an argument rounded to |shifted| * u32, a divide; then the output cast.
    return ref, 2 * (n + 8 + np.abs(shifted)) * U32 * ref + cast_error(out, ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax(dtype: str, shape: tuple[int, ...]) -> None:
    x = array(np.random.default_rng(len(shape)), dtype, shape, scale=3.0)
    z = tk.softmax(tensor(x))
    assert z.shape == shape
    assert z.dtype.name == dtype
    assert_within(z.to_numpy(), *_softmax_ref(x, dtype))


@pytest.mark.parametrize("dtype", ["f16", "f32"])
def test_log_softmax(dtype: str) -> None:
    x = array(np.random.default_rng(9), dtype, (6, 45), scale=3.0)
    xd = f64(x)
    shifted = xd - xd.max(axis=-1, keepdims=True)
    ref = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    bound = 2 * (45 + 8) * U32 + 2 * U32 * np.abs(shifted) + 2 * U32 * np.abs(ref) + cast_error(dtype, ref)
    assert_within(tk.log_softmax(tensor(x)).to_numpy(), ref, bound)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_rmsnorm(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(11)
    n = shape[-1]
    x, w = array(rng, dtype, shape, scale=2.0), array(rng, "bf16", (n,))
    z = tk.rmsnorm(tensor(x), tensor(w), eps=1e-6)
    assert z.shape == shape
    xd = f64(x)
    ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    assert_within(z.to_numpy(), ref, 2 * (n + 8) * U32 * np.abs(ref) + cast_error(dtype, ref))


def _layernorm_ref(
    x: np.ndarray[Any, Any], w: np.ndarray[Any, Any] | None, b: np.ndarray[Any, Any] | None, eps: float, out: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd, n = f64(x), x.shape[-1]
    wd = np.ones(n) if w is None else f64(w)
    bd = np.zeros(n) if b is None else f64(b)
    r = 1.0 / np.sqrt(xd.var(axis=-1, keepdims=True) + eps)
    normed = (xd - xd.mean(axis=-1, keepdims=True)) * r * wd
    ref = normed + bd
    # The mean's error (N terms) shifts every d and is scaled by r * |w|; the variance and rsqrt add relative error.
    mean_err = (n + 2) * U32 * np.abs(xd).mean(axis=-1, keepdims=True)
    bound = 2 * (n + 8) * U32 * np.abs(normed) + 2 * mean_err * r * np.abs(wd) + U32 * np.abs(bd)
    return ref, bound + cast_error(out, ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_layernorm(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(13)
    n = shape[-1]
    x = (array(rng, "f32", shape, scale=2.0) + 1.0).astype(array(rng, dtype, (1,)).dtype)
    w, b = array(rng, "f32", (n,)), array(rng, "f16", (n,))
    z = tk.layernorm(tensor(x), tensor(w), tensor(b), eps=1e-5)
    assert z.shape == shape
    assert_within(z.to_numpy(), *_layernorm_ref(x, w, b, 1e-5, dtype))


def test_layernorm_without_weight_or_bias() -> None:
    x = array(np.random.default_rng(14), "f32", (4, 13), scale=2.0)
    assert_within(tk.layernorm(tensor(x)).to_numpy(), *_layernorm_ref(x, None, None, 1e-5, "f32"))
    w = array(np.random.default_rng(15), "f32", (13,))
    assert_within(tk.layernorm(tensor(x), w).to_numpy(), *_layernorm_ref(x, w, None, 1e-5, "f32"))


@pytest.mark.parametrize("bm", [1, 4, 16])
def test_rows_per_block_and_strided_rows(bm: int) -> None:
    x = array(np.random.default_rng(bm), "f32", (9, 22), scale=3.0)
    xt = tensor(x)
    z = tk.softmax(xt[:, ::2], out_dtype=tile.f32, config=tk.Config.of(BM=bm))  # every other column
    assert not xt.moved
    assert_within(z.to_numpy(), *_softmax_ref(x[:, ::2], "f32"))


def test_out_and_out_dtype() -> None:
    x = array(np.random.default_rng(16), "bf16", (3, 10))
    out = tile.full(tile.f32, [3, 10], np.nan)
    z = tk.softmax(tensor(x), out=out)
    assert out.moved
    assert z.dtype == tile.f32
    assert_within(z.to_numpy(), *_softmax_ref(x, "f32"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tk.softmax(np.ones((2, 3), np.int32)), "x has dtype i32"),
        (lambda: tk.softmax(np.ones((), np.float32)), "x is a scalar"),
        (lambda: tk.softmax(np.ones((2, 3, 4), np.float32)[:, :, ::2]), "strided view"),
        (lambda: tk.softmax(np.zeros((1, tk.MAX_ROW + 1), np.float16)), "longer than 32768"),
        (lambda: tk.softmax(np.ones((2, 3), np.float32), out_dtype=tile.i8), "out_dtype i8"),
        (lambda: tk.softmax(np.ones((1, 2, 3), np.float32), out=tile.zeros(tile.f32, [1, 2, 3])), "out= needs a 2-D"),
        (lambda: tk.softmax(np.ones((2, 3), np.float32), config=tk.Config.of(BM=3)), "power of two"),
        (lambda: tk.rmsnorm(np.ones((2, 3), np.float32), np.ones(4, np.float32)), "weight has shape [4], expected [3]"),
        (lambda: tk.layernorm(np.ones((2, 3), np.float32), None, np.ones(2, np.float32)), "bias has shape [2]"),
        (lambda: tk.rmsnorm(np.ones((2, 3), np.float32), np.ones(3, np.int8)), "weight has dtype i8"),
    ],
)
def test_bad_input_gets_a_typed_error(call: Any, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        call()
    assert message in str(info.value)
