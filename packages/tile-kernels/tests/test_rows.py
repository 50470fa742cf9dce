"""softmax, log_softmax, rmsnorm, layernorm on the CPU interpreter, in both forms (whole rows in registers, several
per block; chunked): float64 references with bounds from the dtype and the row length, odd row lengths, row counts
that do not divide into blocks, ranks 1-3, strided rows, softmax stability, bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import NP_DTYPES, U32, array, assert_within, cast_error, f64, tensor
from tile.frontend import ArgumentError

SHAPES = [(5, 20), (1, 33), (3, 2, 7), (16,), (3, 1)]
LENGTHS = [1, 7, 1000, 1537, 5000]
# The interpreter's default form for each length, and chunked forms forced (several rows per block, odd chunk counts).
FORMS = {
    "default": None,
    "chunk256": tk.Config.of(BM=1, BN=256),
    "chunk128x4": tk.Config.of(BM=4, BN=128, LAT=2),
    "whole8": tk.Config.of(BM=8, BN=0, WARPS=8, OCC=2),
}
ROWS = 5  # not a multiple of 2 or 4 rows per block: the last block's extra rows are masked


def _softmax_ref(x: np.ndarray[Any, Any], out: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd = f64(x)
    shifted = xd - xd.max(axis=-1, keepdims=True)
    ref = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    n = x.shape[-1]
    # Sum of N terms (rescaled once per chunk), exp of an argument rounded to |shifted| * u32, a divide; the cast.
    return ref, 2 * (n + 8 + np.abs(shifted)) * U32 * ref + cast_error(out, ref)


def _log_softmax_ref(x: np.ndarray[Any, Any], out: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd, n = f64(x), x.shape[-1]
    shifted = xd - xd.max(axis=-1, keepdims=True)
    ref = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return ref, 2 * (n + 8) * U32 + 2 * U32 * np.abs(shifted) + 2 * U32 * np.abs(ref) + cast_error(out, ref)


def _rmsnorm_ref(
    x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], out: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd, n = f64(x), x.shape[-1]
    ref = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    return ref, 2 * (n + 8) * U32 * np.abs(ref) + cast_error(out, ref)


def _layernorm_ref(
    x: np.ndarray[Any, Any], w: np.ndarray[Any, Any] | None, b: np.ndarray[Any, Any] | None, eps: float, out: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xd, n = f64(x), x.shape[-1]
    wd = np.ones(n) if w is None else f64(w)
    bd = np.zeros(n) if b is None else f64(b)
    r = 1.0 / np.sqrt(xd.var(axis=-1, keepdims=True) + eps)
    normed = (xd - xd.mean(axis=-1, keepdims=True)) * r * wd
    ref = normed + bd
    # The mean's error (N terms of |x|) shifts every d and is scaled by r * |w|; the variance and rsqrt add relative
    # error. The chunked form's shift k makes it N terms of |x - k| instead, which is smaller.
    mean_err = (n + 2) * U32 * np.abs(xd).mean(axis=-1, keepdims=True)
    bound = 2 * (n + 8) * U32 * np.abs(normed) + 2 * mean_err * r * np.abs(wd) + U32 * np.abs(bd)
    return ref, bound + cast_error(out, ref)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_every_row_kernel_at_odd_lengths(dtype: str, n: int, form: str) -> None:
    config = FORMS[form]
    rng = np.random.default_rng(n)
    x, w, b = array(rng, dtype, (ROWS, n), scale=3.0), array(rng, "bf16", (n,)), array(rng, "f32", (n,))
    xt = tensor(x)
    if form == "whole8" and n > 4096:  # 8 whole rows of 8192 padded columns: past the whole-row form's tile
        with pytest.raises(ArgumentError, match="set a smaller BN"):
            tk.softmax(xt, config=config)
        return
    assert_within(tk.softmax(xt, config=config).to_numpy(), *_softmax_ref(x, dtype))
    assert_within(tk.log_softmax(xt, config=config).to_numpy(), *_log_softmax_ref(x, dtype))
    assert_within(tk.rmsnorm(xt, tensor(w), config=config).to_numpy(), *_rmsnorm_ref(x, w, dtype))
    got = tk.layernorm(xt, tensor(w), tensor(b), config=config).to_numpy()
    assert_within(got, *_layernorm_ref(x, w, b, 1e-5, dtype))
    assert not xt.moved


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", SHAPES)
def test_ranks_and_dtypes(dtype: str, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    x, w = array(rng, dtype, shape, scale=3.0), array(rng, "f16", (shape[-1],))
    z = tk.softmax(tensor(x))
    assert (z.shape, z.dtype.name) == (shape, dtype)
    assert_within(z.to_numpy(), *_softmax_ref(x, dtype))
    z = tk.rmsnorm(tensor(x), tensor(w), config=tk.Config.of(BM=2, BN=16))
    assert z.shape == shape
    assert_within(z.to_numpy(), *_rmsnorm_ref(x, w, dtype))


@pytest.mark.parametrize("config", [None, tk.Config.of(BM=2, BN=64)], ids=["whole", "chunked"])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_softmax_is_stable_on_equal_rows_and_large_magnitudes(dtype: str, config: tk.Config | None) -> None:
    big = {"f16": 3.0e4, "bf16": 1.0e38, "f32": 1.0e38}[dtype]  # 2 * big is finite in f32
    n = 300
    x = np.zeros((4, n), np.float64)
    x[0] = 7.0  # all equal: exactly 1/n each
    x[1] = big  # all equal and huge: exp(x) overflows, exp(x - max) does not
    x[2, ::2], x[2, 1::2] = big, -big  # alternating extremes: exp(-2 big) underflows to 0
    x[3] = np.linspace(-big, big, n)  # the maximum in the last chunk, after every smaller value
    xs = x.astype(NP_DTYPES[dtype])
    got = tk.softmax(tensor(xs), config=config).to_numpy()
    assert np.isfinite(f64(got)).all()
    assert_within(got, *_softmax_ref(xs, dtype))
    # log_softmax of -2 * big is past f16's range: written in f32.
    got = tk.log_softmax(tensor(xs), out_dtype=tile.f32, config=config).to_numpy()
    assert np.isfinite(got).all()
    assert_within(got, *_log_softmax_ref(xs, "f32"))
    exact = np.full((2, n), np.float32(1 / n)).astype(NP_DTYPES[dtype])  # exp(0) / n, rounded as the kernel does
    np.testing.assert_array_equal(tk.softmax(tensor(xs[:2]), config=config).to_numpy(), exact)


def test_online_softmax_survives_a_first_chunk_of_minus_infinity() -> None:
    # The running max is -inf until chunk 2; exp(-inf - -inf) would make the whole row NaN.
    x = np.full((3, 200), -np.inf, np.float32)
    x[0, 150:] = np.linspace(-2, 2, 50)
    x[1, 64:] = 1.0
    x[2, 10] = 0.0
    ref = np.zeros_like(x, dtype=np.float64)
    ref[0, 150:] = np.exp(f64(x[0, 150:])) / np.exp(f64(x[0, 150:])).sum()
    ref[1, 64:] = 1 / 136
    ref[2, 10] = 1.0
    got = tk.softmax(tensor(x), config=tk.Config.of(BM=1, BN=64)).to_numpy()
    assert_within(got, ref, 4 * 200 * U32 * ref + 1e-30)


def test_chunked_layernorm_keeps_the_variance_of_a_row_far_from_zero() -> None:
    # mean 1e4, std 1: in f32 the naive sum(x^2)/n - mean^2 cancels all but ~8 of its 1e8; the shifted sums do not.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 3000)) + 1.0e4).astype(np.float32)
    ref = (f64(x) - f64(x).mean(-1, keepdims=True)) / np.sqrt(f64(x).var(-1, keepdims=True) + 1e-5)
    for config in (None, tk.Config.of(BM=2, BN=512)):
        got = tk.layernorm(tensor(x), config=config).to_numpy()
        assert_within(got, ref, 1e-3 + 1e-3 * np.abs(ref))


def test_layernorm_without_weight_or_bias() -> None:
    x = array(np.random.default_rng(14), "f32", (4, 13), scale=2.0)
    for config in (None, tk.Config.of(BM=1, BN=8)):
        assert_within(tk.layernorm(tensor(x), config=config).to_numpy(), *_layernorm_ref(x, None, None, 1e-5, "f32"))
    w = array(np.random.default_rng(15), "f32", (13,))
    assert_within(tk.layernorm(tensor(x), w).to_numpy(), *_layernorm_ref(x, w, None, 1e-5, "f32"))


@pytest.mark.parametrize("config", [tk.Config.of(BM=1), tk.Config.of(BM=16), tk.Config.of(BM=4, BN=4)])
def test_strided_rows(config: tk.Config) -> None:
    x = array(np.random.default_rng(config["BM"]), "f32", (9, 22), scale=3.0)
    xt = tensor(x)
    z = tk.softmax(xt[:, ::2], out_dtype=tile.f32, config=config)  # every other column
    assert not xt.moved
    assert_within(z.to_numpy(), *_softmax_ref(x[:, ::2], "f32"))


def test_out_and_out_dtype_and_empty_inputs() -> None:
    x = array(np.random.default_rng(16), "bf16", (3, 10))
    out = tile.full(tile.f32, [3, 10], np.nan)
    z = tk.softmax(tensor(x), out=out)
    assert out.moved
    assert z.dtype == tile.f32
    assert_within(z.to_numpy(), *_softmax_ref(x, "f32"))
    assert tk.rmsnorm(tile.zeros(tile.f16, [0, 5]), tile.ones(tile.f16, [5])).shape == (0, 5)
    assert tk.softmax(tile.zeros(tile.f32, [2, 0, 3])).shape == (2, 0, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tk.softmax(np.ones((2, 3), np.int32)), "softmax: x has dtype i32; supported: bf16, f16, f32"),
        (lambda: tk.softmax(np.ones((), np.float32)), "softmax: x is a scalar"),
        (lambda: tk.softmax(np.ones((2, 3, 4), np.float32)[:, :, ::2]), "strided view; pass a 2-D view"),
        (lambda: tk.softmax(np.ones((2, 3), np.float32), out_dtype=tile.i8), "out_dtype i8 is not one of"),
        (lambda: tk.softmax(np.ones((1, 2, 3), np.float32), out=tile.zeros(tile.f32, [1, 2, 3])), "out= needs a 2-D"),
        (lambda: tk.softmax(np.ones((2, 3), np.float32), out=tile.zeros(tile.f32, [3, 2])), "expected [2, 3]"),
        (lambda: tk.rmsnorm(np.ones((2, 3), np.float32), np.ones(4, np.float32)), "weight has shape [4], expected [3]"),
        (lambda: tk.layernorm(np.ones((2, 3), np.float32), None, np.ones(2, np.float32)), "bias has shape [2]"),
        (lambda: tk.rmsnorm(np.ones((2, 3), np.float32), np.ones(3, np.int8)), "weight has dtype i8"),
    ],
)
def test_bad_input_gets_a_typed_error(call: Any, message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        call()
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (tk.Config.of(BM=3), "BM (rows per block) must be a power of two"),
        (tk.Config.of(BM=0), "BM (rows per block) must be a power of two"),
        (tk.Config.of(BM=1, BN=96), "BN (chunk width) must be 0 or a power of two"),
        (tk.Config.of(BM=4, BN=0), "(4, 16384) tile is more than 32768 elements; set a smaller BN"),
        (tk.Config.of(BM=64, BN=1024), "(64, 1024) tile is more than 32768"),
        (tk.Config.of(BM=1, WARPS=2), "WARPS 0, 4 or 8"),
        (tk.Config.of(BM=1, OCC=33), "OCC is 0..32"),
        (tk.Config.of(BM=1, LAT=11), "LAT 0..10"),
        (tk.Config.of(BM=1, BK=16), "unknown parameter(s) BK"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(config: tk.Config, message: str) -> None:
    out = tile.full(tile.f32, [2, 10000], 5.0)
    with pytest.raises(ArgumentError) as info:
        tk.softmax(np.ones((2, 10000), np.float32), out=out, config=config)
    assert f"softmax: config {config}" in str(info.value)
    assert message in str(info.value)
    assert not out.moved  # the caller's out= is untouched
    np.testing.assert_array_equal(out.to_numpy(), 5.0)
