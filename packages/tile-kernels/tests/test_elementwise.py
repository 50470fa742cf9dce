"""rope, swiglu, swiglu_fused, embedding, argmax, top_k, sample on the CPU interpreter: float64 references, odd sizes,
rows longer than one chunk, ties, the sampler's distribution, and the refusals."""

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
from tile.kernels._source import kernels

Array = np.ndarray[Any, Any]


def rope_ref(x: Array, pos: Array, theta: float, d: int) -> Array:
    xd = f64(x).reshape(x.shape[0], -1, d)
    half = d // 2
    ang = f64(pos)[:, None] * theta ** (-np.arange(half) * 2.0 / d)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = xd[..., :half], xd[..., half:]
    out: Array = np.concatenate([a * c - b * s, b * c + a * s], -1).reshape(x.shape)
    return out


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize(("shape", "d"), [((5, 3, 64), 64), ((7, 2 * 128), 128), ((3, 8), 8)])
def test_rope(dtype: str, shape: tuple[int, ...], d: int) -> None:
    rng = np.random.default_rng(d)
    x = array(rng, dtype, shape)
    pos = rng.integers(0, 300, shape[0])
    z = tk.rope(tensor(x), pos, theta=1e6, head_dim=d)
    assert z.shape == shape
    ref = rope_ref(x, pos, 1e6, d)
    # The angle p * inv_freq in f32 (relative error a few U32, times p radians), sin/cos, two products and a sum.
    mag = np.abs(f64(x)).reshape(shape[0], -1).max(axis=1).reshape(-1, *([1] * (len(shape) - 1)))
    err = (8 * U32 * (1 + pos.reshape(mag.shape)) + 8 * U32) * 2 * mag
    assert_within(z.to_numpy(), ref, err + cast_error(dtype, ref))


def test_rope_op_tensor_positions() -> None:
    x = array(np.random.default_rng(1), "f32", (4, 64))
    pos = tile.from_numpy(np.array([3, 1, 4, 1], np.int64))
    got = tk.rope_op(tensor(x), pos, theta=10000.0, head_dim=32).sync()[0].unpartition().to_numpy()
    np.testing.assert_allclose(got, rope_ref(x, np.array([3, 1, 4, 1]), 10000.0, 32), atol=1e-5)


def test_rope_refusals() -> None:
    x = tile.zeros(tile.f32, [4, 48])
    with pytest.raises(ArgumentError, match="head_dim 6 must be a power of two"):
        tk.rope(x, [0, 1, 2, 3], theta=1e4, head_dim=6)
    with pytest.raises(ArgumentError, match=r"expected \[4\]"):
        tk.rope(x, [0, 1], theta=1e4, head_dim=16)
    with pytest.raises(ArgumentError, match=r"theta 1\.0 must be a finite number > 1"):
        tk.rope(x, [0, 1, 2, 3], theta=1.0, head_dim=16)
    with pytest.raises(ArgumentError, match="must be integers"):
        tk.rope(x, [0.5, 1, 2, 3], theta=1e4, head_dim=16)


def _swiglu_ref(g: Array, u: Array) -> Array:
    gd = f64(g)
    out: Array = gd / (1 + np.exp(-gd)) * f64(u)
    return out


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", [(7, 24), (1, 13), (33, 40)])
def test_swiglu_and_fused(dtype: str, shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(shape[1])
    g, u = array(rng, dtype, shape, scale=3.0), array(rng, dtype, shape)
    ref = _swiglu_ref(g, u)
    err = 8 * U32 * np.abs(ref) + cast_error(dtype, ref)
    assert_within(tk.swiglu(tensor(g), tensor(u)).to_numpy(), ref, err)
    fused = tk.swiglu_fused(tensor(np.concatenate([g, u], axis=1)))
    assert fused.shape == shape
    assert_within(fused.to_numpy(), ref, err)


def test_swiglu_refusals() -> None:
    with pytest.raises(ArgumentError, match="one shape and dtype"):
        tk.swiglu(tile.zeros(tile.f16, [2, 4]), tile.zeros(tile.f16, [2, 5]))
    with pytest.raises(ArgumentError, match="has 5 columns"):
        tk.swiglu_fused(tile.zeros(tile.f16, [2, 5]))


@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_embedding(id_dtype: type) -> None:
    table = array(np.random.default_rng(2), "bf16", (11, 1500))
    ids: Array = np.array([3, 0, 10, 3], id_dtype)
    z = tk.embedding(tensor(table), tile.from_numpy(ids))
    np.testing.assert_array_equal(f64(z.to_numpy()), f64(table[ids]))


def test_embedding_checks_ids() -> None:
    table = tile.zeros(tile.f16, [11, 8])
    with pytest.raises(ArgumentError, match="id 11 is outside the table's 11 rows"):
        tk.embedding(table, [1, 11])
    with pytest.raises(ArgumentError, match="id -1 is outside"):
        tk.embedding(table, tile.from_numpy(np.array([-1], np.int32)))
    # The kernel checks every id it reads too: a bad one that reaches it faults instead of reading other memory.
    z = tile.empty(tile.f16, [1, 8]).partition([1, 8])
    with pytest.raises(tile.KernelFaultError, match=r"embedding: an id is outside the table"):
        kernels("_elementwise_kernels").embed(z, table, tile.from_numpy(np.array([12], np.int32))).sync()


def test_argmax_ties_long_rows_and_infinities() -> None:
    x = array(np.random.default_rng(3), "f32", (4, 1000))
    x[1, [7, 900]] = 50.0  # a tie: the first wins
    x[2, :] = -np.inf
    x[2, 600] = -1.0
    x[3, 999] = np.inf
    np.testing.assert_array_equal(tk.argmax(tensor(x)).to_numpy(), np.argmax(x, axis=1))
    np.testing.assert_array_equal(tk.argmax(tensor(x[0].astype(np.float16))).to_numpy(), [np.argmax(x[0])])


@pytest.mark.parametrize("n", [7, 256, 256 * 9 + 5, 256 * 40])
def test_argmax_skips_nan_and_takes_the_first_maximum_across_chunks_and_partial_loads(n: int) -> None:
    # On the interpreter chunks are 256 columns and the pick reads 8 partials a load: n = 256 * 9 + 5 leaves a ragged
    # last chunk and a ragged last load of partials, 256 * 40 five whole loads.
    x = array(np.random.default_rng(n), "f32", (6, n))
    x[0, [1, n - 1]] = 50.0  # a tie in the first and last chunks: the first wins
    x[1, :] = np.nan  # nothing but NaN: 0, as numpy (padding past the row's end never wins)
    x[2, ::2] = np.nan  # NaN is skipped, never the maximum
    x[2, n // 2 | 1] = 40.0
    x[3, :] = -np.inf  # all -inf: the first column
    x[4, :] = np.nan
    x[4, n - 1] = -np.inf  # the only non-NaN value, in the last (partial) chunk
    x[5, n - 1] = np.inf
    want = np.argmax(np.where(np.isnan(x), -np.inf, x), axis=1)
    want[1], want[4] = 0, n - 1  # (NaN read as -inf would tie row 4 at column 0)
    got = tk.argmax(tensor(x)).to_numpy()
    np.testing.assert_array_equal(got, want)
    assert got[0] == 1
    assert got[2] == n // 2 | 1


def test_argmax_op_hands_the_logits_back_and_picks_per_row_in_one_chain() -> None:
    x = array(np.random.default_rng(9), "bf16", (3, 1000))
    x[1, [3, 700]] = 30.0
    out = tk.argmax_op(tensor(x)).sync()
    np.testing.assert_array_equal(out[0].unpartition().to_numpy(), np.argmax(f64(x), axis=1))
    np.testing.assert_array_equal(f64(out[1].to_numpy()), f64(x))  # the input comes back (a chain keeps its logits)


@pytest.mark.parametrize("k", [1, 5, 17])
def test_top_k(k: int) -> None:
    x = array(np.random.default_rng(k), "bf16", (3, 700))
    x[0, [10, 20, 30]] = 9.0  # ties keep index order
    values, indices = tk.top_k(tensor(x), k)
    want = np.argsort(-f64(x), axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(indices.to_numpy(), want)
    np.testing.assert_array_equal(f64(values.to_numpy()), np.take_along_axis(f64(x), want, axis=1))


def test_top_k_refusals() -> None:
    with pytest.raises(ArgumentError, match=r"k=9 must be in \[1, 8\]"):
        tk.top_k(tile.zeros(tile.f32, [2, 8]), 9)
    with pytest.raises(ArgumentError, match=r"x of shape \[2, 0\] is empty"):
        tk.argmax(tile.zeros(tile.f32, [2, 0]))
    with pytest.raises(ArgumentError, match=r"x of shape \[0, 5\] is empty"):
        tk.argmax_op(tile.zeros(tile.f32, [0, 5]))


def test_sample_follows_the_softmax() -> None:
    # 4000 rows of the same logits: each row draws its own noise, so the picks estimate softmax(x / T).
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4, 1e-12]))
    rows = np.tile(logits, (4000, 1)).astype(np.float32)
    got = tk.sample(tensor(rows), 0.5, seed=11).to_numpy()
    p = np.exp(logits / 0.5)
    p /= p.sum()
    freq = np.bincount(got, minlength=5) / len(got)
    sigma = np.sqrt(p * (1 - p) / len(got))
    assert np.all(np.abs(freq - p) <= 5 * sigma + 1e-9), (freq, p)


def test_sample_top_k_seed_and_greedy() -> None:
    x = array(np.random.default_rng(4), "f32", (64, 300), scale=0.1)
    allowed = np.argsort(-x, axis=1, kind="stable")[:, :3]
    picks = tk.sample(tensor(x), 2.0, top_k=3, seed=5).to_numpy()
    assert all(p in row for p, row in zip(picks, allowed, strict=True))
    assert len(set(picks.tolist())) > 3  # rows differ, so picks spread over many columns
    again = tk.sample(tensor(x), 2.0, top_k=3, seed=5).to_numpy()
    other = tk.sample(tensor(x), 2.0, top_k=3, seed=6).to_numpy()
    np.testing.assert_array_equal(picks, again)
    assert (picks != other).any()
    np.testing.assert_array_equal(tk.sample(tensor(x), 0.0, seed=1).to_numpy(), np.argmax(x, axis=1))
    with pytest.raises(ArgumentError, match="temperature"):
        tk.sample(tensor(x), -1.0)
