"""The attention and elementwise families on the GPU at real sizes: float64 references (bounds as the CPU tests',
widened for the matrix units), torch SDPA where torch is importable, outputs of odd sizes, Qwen3's vocabulary.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_attention_gpu.py -m gpu``; skipped where no GPU
is visible.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, UNIT, array, assert_within, cast_error, f64, tensor
from test_attention import _decode_ref, reference

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")  # default configs: tuning is the benchmark's business
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _bound(dtype: str, ref: Any, mag: Any) -> Any:
    # As the CPU tests, plus approximate exp2 and division (a few ulps of f32) and f32 MMA accumulation order.
    return (4 * UNIT[dtype] + 1e-4) * mag + cast_error(dtype, ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_gpu(dtype: str, d: int, causal: bool) -> None:
    rng = np.random.default_rng(d)
    b, hq, hkv, s = 2, 8, 2, 1000  # GQA 4, a sequence that is no multiple of any tile
    q, k, v = array(rng, dtype, (b, hq, s, d)), array(rng, dtype, (b, hkv, s, d)), array(rng, dtype, (b, hkv, s, d))
    z = tk.attention(tensor(q), tensor(k), tensor(v), causal=causal)
    ref, mag = reference(q, k, v, causal)
    assert_within(z.to_numpy(), ref, _bound(dtype, ref, mag))


@pytest.mark.parametrize("config", [tk.Config.of(BM=128, BN=128), tk.Config.of(BM=64, BN=64)])
def test_attention_gpu_configs(config: tk.Config) -> None:
    rng = np.random.default_rng(1)
    q, k, v = (array(rng, "f16", (1, 4, 777, 128)) for _ in range(3))
    z = tk.attention(tensor(q), tensor(k), tensor(v), causal=True, config=config)
    ref, mag = reference(q, k, v, True)
    assert_within(z.to_numpy(), ref, _bound("f16", ref, mag))


@pytest.mark.parametrize("config", [tk.Config.of(BM=128, BN=64), tk.Config.of(BM=64, BN=128)])
def test_attention_offset_rows_gpu(config: tk.Config) -> None:
    """Qwen3-4B's prefill shape, smaller: q rows (Sq, 32 * 128) at cache positions 400 .. 699 of 1024-position caches
    (GQA 4); key tiles past the causal limit hold NaN, which would reach the output if they were loaded."""
    rng = np.random.default_rng(5)
    hq, hkv, d, sq, sk, off = 32, 8, 128, 300, 1024, 400
    q, k, v = array(rng, "bf16", (hq, sq, d)), array(rng, "bf16", (hkv, sk, d)), array(rng, "bf16", (hkv, sk, d))
    ref, mag = reference(q[None], k[None], v[None], True, offset=off)
    first = -(-(off + sq) // config["BN"]) * config["BN"]
    k[:, first:], v[:, first:] = np.nan, np.nan
    q_rows = np.ascontiguousarray(q.transpose(1, 0, 2).reshape(sq, hq * d))
    z = tk.attention(tensor(q_rows), tensor(k), tensor(v), causal=True, offset=off, config=config).to_numpy()
    got = z.reshape(sq, hq, d).transpose(1, 0, 2)
    assert_within(got, ref[0], _bound("bf16", ref[0], mag[0]))


def test_attention_matches_torch_sdpa() -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(2, 16, 2048, 128, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    for causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).float().cpu().numpy()
        got = tk.attention(q, k, v, causal=causal).to_numpy().astype(np.float64)
        assert float(np.abs(got - want).max()) < 2e-2


@pytest.mark.parametrize(("batch", "splits"), [(1, None), (8, None), (8, 1), (1, 40)])
def test_decode_attention_gpu(batch: int, splits: int | None) -> None:
    """Default splits (the combine's one-chunk path), one split (``decode_one``, no combine) and 40 splits (three
    chunks of 16, 8 empty slots)."""
    rng = np.random.default_rng(batch)
    hq, hkv, s, d = 32, 8, 4096, 128
    q = array(rng, "bf16", (batch, hq, d))
    kc, vc = array(rng, "bf16", (batch, hkv, s, d)), array(rng, "bf16", (batch, hkv, s, d))
    lengths = [4096, 1, 3001, 64, 0, 2048, 4095, 17][:batch]
    z = tk.decode_attention(tensor(q), tensor(kc), tensor(vc), lengths, splits=splits)
    ref, mag = _decode_ref(q, kc, vc, lengths)
    assert_within(z.to_numpy(), ref, _bound("bf16", ref, mag))


@pytest.mark.parametrize(
    ("s", "lengths", "splits"), [(1024, [513], None), (1280, [1279, 1, 0], 20), (1000, [1000], None)]
)
def test_decode_attention_one_key_tile_a_block_gpu(s: int, lengths: list[int], splits: int | None) -> None:
    """One key tile a split block (Qwen3-4B's decode at context 512 with a cache of 1024: 16 splits), whose K/V loads
    go out before the length is read: a tile past the keys stays an empty partial, 20 splits leave 12 slots past the
    cache (they read its last tile, all masked), a cache of 1000 ends in a partial tile."""
    rng = np.random.default_rng(s)
    hq, hkv, d = 32, 8, 128
    q = array(rng, "bf16", (len(lengths), hq, d))
    kc, vc = array(rng, "bf16", (len(lengths), hkv, s, d)), array(rng, "bf16", (len(lengths), hkv, s, d))
    z = tk.decode_attention(tensor(q), tensor(kc), tensor(vc), lengths, splits=splits)
    ref, mag = _decode_ref(q, kc, vc, lengths)
    assert_within(z.to_numpy(), ref, _bound("bf16", ref, mag))


@pytest.mark.parametrize("splits", [1, 4])
def test_decode_lengths_near_i32_limits_gpu(splits: int) -> None:
    """A device length plus ``plus`` past either end of i32 clamps to the cache (or to nothing), as on the CPU: the
    sum is taken in i64 (``decode_one`` and ``decode_split``, lowered through tileiras)."""
    rng = np.random.default_rng(splits)
    hq, hkv, s, d = 8, 2, 512, 128
    q = array(rng, "bf16", (4, hq, d))
    kc, vc = array(rng, "bf16", (4, hkv, s, d)), array(rng, "bf16", (4, hkv, s, d))
    lengths = tile.from_numpy(np.array([2**31 - 1, -(2**31) + 1, 2**31 - 5, 100], np.int32))
    out = tk.decode_attention_op(tensor(q), tensor(kc), tensor(vc), lengths, plus=1, splits=splits).sync()
    got = out[0].unpartition().to_numpy().reshape(4, hq, d)
    ref, mag = _decode_ref(q, kc, vc, [s, 0, s, 101])
    assert_within(got, ref, _bound("bf16", ref, mag))


def test_decode_attention_matches_torch_and_append_writes_in_place() -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cuda").manual_seed(1)
    kc, vc = (torch.randn(4, 8, 32768, 128, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    kn, vn = (torch.randn(4, 8, 1, 128, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2))
    tk.append_kv(kc, vc, kn, vn, [32767] * 4)  # torch caches: written in place through DLPack
    assert torch.equal(kc[:, :, -1], kn[:, :, 0])
    assert torch.equal(vc[:, :, -1], vn[:, :, 0])
    q = torch.randn(4, 32, 128, device="cuda", dtype=torch.bfloat16, generator=g)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], kc, vc, enable_gqa=True)[:, :, 0]
    got = tk.decode_attention(q, kc, vc, [32768] * 4).to_numpy().astype(np.float64)
    assert float(np.abs(got - want.float().cpu().numpy()).max()) < 2e-2


def test_elementwise_gpu() -> None:
    rng = np.random.default_rng(2)
    x, pos = array(rng, "bf16", (300, 32, 128)), rng.integers(0, 40000, 300)
    from test_elementwise import rope_ref

    z = tk.rope(tensor(x), pos, theta=1e6, head_dim=128)
    ref = rope_ref(x, pos, 1e6, 128)
    mag = np.abs(f64(x)).reshape(300, -1).max(axis=1)[:, None, None]
    assert_within(z.to_numpy(), ref, 16 * U32 * (1 + pos[:, None, None]) * mag + cast_error("bf16", ref))
    g, u = array(rng, "bf16", (37, 9728), scale=3.0), array(rng, "bf16", (37, 9728))
    gd = f64(g)
    want = gd / (1 + np.exp(-gd)) * f64(u)
    err = 16 * U32 * np.abs(want) + cast_error("bf16", want)
    assert_within(tk.swiglu_fused(tensor(np.concatenate([g, u], axis=1))).to_numpy(), want, err)
    assert_within(tk.swiglu(tensor(g), tensor(u)).to_numpy(), want, err)
    table = array(rng, "bf16", (151936, 256))
    ids = rng.integers(0, 151936, 64)
    np.testing.assert_array_equal(f64(tk.embedding(tensor(table), ids).to_numpy()), f64(table[ids]))


def test_selection_gpu() -> None:
    rng = np.random.default_rng(3)
    logits = array(rng, "f32", (8, 151936), scale=3.0)
    np.testing.assert_array_equal(tk.argmax(tensor(logits)).to_numpy(), np.argmax(logits, axis=1))
    values, indices = tk.top_k(tensor(logits), 50)
    want = np.argsort(-logits, axis=1, kind="stable")[:, :50]
    np.testing.assert_array_equal(indices.to_numpy(), want)
    np.testing.assert_array_equal(values.to_numpy(), np.take_along_axis(logits, want, axis=1))
    picks = tk.sample(tensor(logits), 0.8, top_k=50, seed=7).to_numpy()
    assert all(p in row for p, row in zip(picks, want, strict=True))
    np.testing.assert_array_equal(picks, tk.sample(tensor(logits), 0.8, top_k=50, seed=7).to_numpy())


@pytest.mark.parametrize("n", [151936, 1024 * 7, 1025, 2])
def test_argmax_two_stage_gpu(n: int) -> None:
    """argmax's chunks (1024 logits a block) then its pick: ties across chunks, NaN skipped, a row of only NaN (0), a
    last chunk in part; the tensor-parallel rows read as one vector."""
    from tile.kernels.qwen3.tp import argmax_rows

    rng = np.random.default_rng(n)
    x = array(rng, "f32", (4, n), scale=3.0)
    x[0, [n // 2, n - 1]] = 99.0  # the first of a tie wins
    x[1, :] = np.nan
    x[2, ::2] = np.nan
    odd = n - 1 if (n - 1) % 2 else n - 2  # the last column NaN left alone
    x[2, odd] = 98.0
    want = np.argmax(np.where(np.isnan(x), -np.inf, x), axis=1)
    want[1] = 0
    np.testing.assert_array_equal(tk.argmax(tensor(x)).to_numpy(), want)
    rows = x[[0, 3]].copy()
    got = argmax_rows(tile.from_numpy(rows)).sync()[0].unpartition().to_numpy()
    assert int(got[0]) == int(np.argmax(rows))
