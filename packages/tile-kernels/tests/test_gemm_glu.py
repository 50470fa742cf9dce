"""The big-M GEMM's SwiGLU epilogue (``matmul(h, wgu_t, swiglu=True)`` above M = 16, kernel ``gemm_glu``) on the CPU
interpreter: against float64 at M, I, K off the tiles (edge tiles of both halves padded, never read across), with
the norm chained before it, in one launch writing no (M, 2I) product; its candidates (two accumulators within one
wide tile's budget) and tuning key; the misuse errors; and the wave-aware candidates of the plain big-M GEMM."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import U32, UNIT, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.frontend import ArgumentError
from tile.kernels import _fused, _gemm_configs, autotune

EPS = 1e-5


def big(bm: int, bn: int, bk: int, group: int = 2, split: int = 1) -> tk.Config:
    return tk.Config.of(BM=bm, BN=bn, BK=bk, GROUP=group, SPLIT=split)


def _reference(x: Any, wgu: Any, dtype: str, norm: Any = None) -> tuple[Any, Any]:
    """silu(h @ gate) * (h @ up) in float64 (``h`` = rmsnorm(x, norm) when given) and a bound on the kernel's error:
    the operands' products summed in f32 over K (the normed activation rounded to ``dtype`` first)."""
    inner, k = wgu.shape[0] // 2, x.shape[1]
    h, h_err = f64(x), np.zeros(x.shape)
    if norm is not None:
        xd = f64(x)
        h = xd / np.sqrt(np.mean(xd * xd, axis=1, keepdims=True) + EPS) * f64(norm)
        h_err = (UNIT[dtype] + (k + 8) * U32) * np.abs(h)
    wg, wu = wgu[:inner].T, wgu[inner:].T
    gate, up = h @ f64(wg), h @ f64(wu)
    eg = gemm_bound(h, wg, k, dtype) + h_err @ np.abs(f64(wg)) + U32 * np.abs(gate)
    eu = gemm_bound(h, wu, k, dtype) + h_err @ np.abs(f64(wu)) + U32 * np.abs(up)
    silu = gate / (1.0 + np.exp(-gate))
    ref = silu * up
    return ref, 1.2 * eg * np.abs(up) + np.abs(silu) * eu + 8 * U32 * np.abs(ref) + cast_error(dtype, ref)


@pytest.mark.parametrize(
    ("m", "inner", "k", "config"),
    [
        (37, 19, 45, big(16, 8, 16)),  # nothing a multiple of the tiles: the last column tile of each half padded
        (20, 5, 33, big(32, 16, 16)),  # I narrower than one tile
        (33, 40, 64, big(32, 32, 32, group=1)),  # K a multiple of BK, M one row past a tile
        (64, 24, 17, None),  # the default config (the tuner's, off on the interpreter)
    ],
)
@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_swiglu_gemm_matches_float64(m: int, inner: int, k: int, config: tk.Config | None, dtype: str) -> None:
    rng = np.random.default_rng(m * inner + k)
    x, wgu = array(rng, dtype, (m, k)), array(rng, dtype, (2 * inner, k))
    out = tile.full(tile.bf16 if dtype == "bf16" else tile.f32, [m, inner], np.nan)  # every element written
    z = tk.matmul(tensor(x), tensor(wgu).T, swiglu=True, config=config, out=out).to_numpy()
    ref, err = _reference(x, wgu, dtype)
    assert z.shape == (m, inner)
    assert_within(z, ref, err)


def test_the_halves_are_not_swapped_or_shared() -> None:
    # A gate half of zeros makes silu(0) * up = up / 2 exactly zero only if the kernel reads the gate columns as the
    # gate; an up half of ones makes the result silu(gate): each half read from its own columns, none across.
    rng = np.random.default_rng(3)
    m, inner, k = 21, 11, 19
    x = array(rng, "f32", (m, k))
    gate_w = array(rng, "f32", (inner, k))
    wgu = np.concatenate([gate_w, np.zeros((inner, k), np.float32)])
    z = tk.matmul(tensor(x), tensor(wgu).T, swiglu=True, config=big(16, 8, 8)).to_numpy()
    np.testing.assert_array_equal(z, np.zeros((m, inner), np.float32))
    x1 = np.zeros((m, k), np.float32)
    x1[:, 0] = 1.0
    wgu = np.concatenate([gate_w, np.zeros((inner, k), np.float32)])
    wgu[inner:, 0] = 1.0  # up = 1 everywhere
    z = tk.matmul(tensor(x1), tensor(wgu).T, swiglu=True, config=big(16, 8, 8)).to_numpy()
    g = f64(gate_w[:, 0])[None, :].repeat(m, 0)
    assert_within(z, g / (1 + np.exp(-g)), 8 * U32 * (1 + np.abs(g)))


def test_norm_runs_before_the_swiglu_gemm_and_x_comes_back() -> None:
    rng = np.random.default_rng(5)
    m, inner, k = 29, 13, 40
    x, wgu, g = array(rng, "bf16", (m, k)), array(rng, "bf16", (2 * inner, k)), array(rng, "bf16", (k,))
    done = tk.matmul_op(tensor(x), tensor(wgu).T, norm=tensor(g), eps=EPS, swiglu=True, config=big(16, 16, 16)).sync()
    ref, err = _reference(x, wgu, "bf16", norm=g)
    assert_within(done[0].unpartition().to_numpy(), ref, err)
    np.testing.assert_array_equal(done[1].to_numpy().view(np.uint16), x.view(np.uint16))


def test_one_launch_and_no_gate_up_product(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[list[int]] = []
    real_empty = tile.empty

    def spy(dtype: Any, shape: Any) -> Any:
        made.append(list(shape))
        return real_empty(dtype, shape)

    monkeypatch.setattr(tile, "empty", spy)
    m, inner, k = 24, 10, 16
    x, w = tensor(np.ones((m, k), np.float32)), tensor(np.ones((2 * inner, k), np.float32))
    op = tk.matmul_op(x, w.T, swiglu=True, config=big(16, 8, 8))
    assert [m, 2 * inner] not in made  # no scratch for the (M, 2I) product
    out = op.sync()
    z = out[0].unpartition().to_numpy()
    assert out[1].shape == (m, k)  # a handed back
    np.testing.assert_allclose(z, np.full((m, inner), k * k / (1 + np.exp(-k))), rtol=1e-6)


def test_swiglu_candidates_fit_two_accumulators_and_are_tuned_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _gemm_configs.big_candidates(2048, 9728)
    kept = _fused.big_candidates(found)
    assert kept
    assert all(c["BM"] * c["BN"] <= _fused.GLU_TILE and c["SPLIT"] == 1 for c in kept)
    assert any(c["BM"] * c["BN"] > _fused.GLU_TILE for c in found)  # the 128x256 tiles are dropped
    assert big(128, 128, 64) in [big(c["BM"], c["BN"], c["BK"]) for c in kept]
    keys: list[dict[str, object]] = []
    real = autotune.Autotuner.choose

    def spy(self: autotune.Autotuner, key: dict[str, object], *args: Any, **kwargs: Any) -> tk.Config:
        if self.family == "matmul":  # not the norm's
            keys.append(dict(key))
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(autotune.Autotuner, "choose", spy)
    x, w = tensor(np.ones((24, 8), np.float32)), tensor(np.ones((16, 8), np.float32))
    tk.matmul(x, w.T)
    tk.matmul(x, w.T, swiglu=True)
    tk.matmul(x, w.T, swiglu=True, norm=tensor(np.ones(8, np.float32)))  # the norm runs apart: the same GEMM key
    tk.matmul(x, w.T, norm=tensor(np.ones(8, np.float32)))  # the norm alone: the plain GEMM's key
    assert [k.get("fused") for k in keys] == [None, "swiglu", "swiglu", None]
    assert [k["n"] for k in keys] == [autotune.bucket(16), autotune.bucket(8), autotune.bucket(8), autotune.bucket(16)]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (big(16, 8, 8, split=2), "SPLIT=1 and BM \\* BN <= 16384"),
        (big(256, 128, 64), "SPLIT=1 and BM \\* BN <= 16384"),
        (tk.Config.of(FORM=1, BM=16, BN=8, BK=16, LAT=3, TMA=1, OCC=0, GROUP=1, SPLIT=1), "is a GEMV form"),
        (tk.Config.of(BM=16, BN=8, BK=16, GROUP=1, SPLIT=1, NORM=1), "is a GEMV form"),
    ],
)
def test_swiglu_gemm_misuse_gets_a_typed_error(config: tk.Config, message: str) -> None:
    x, w = np.ones((24, 16), np.float32), np.ones((20, 16), np.float32)
    out = tile.zeros(tile.f32, [24, 10])
    with pytest.raises(ArgumentError, match=message):
        tk.matmul(x, w.T, swiglu=True, config=config, out=out)
    np.testing.assert_array_equal(out.to_numpy(), np.zeros((24, 10), np.float32))  # refused before anything moved
    with pytest.raises(ArgumentError, match=message):
        tk.matmul_op(x, w.T, swiglu=True, config=config)
    with pytest.raises(ArgumentError, match="pass no bias, activation or residual"):
        tk.matmul(x, w.T, swiglu=True, residual=np.zeros((24, 10), np.float32))
    with pytest.raises(ArgumentError, match="2 \\* I"):
        tk.matmul(x, np.ones((16, 7), np.float32), swiglu=True)


def test_wave_aware_candidates_where_the_wide_tiles_leave_a_ragged_wave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gemm_configs, "persistent_blocks", lambda: 132)  # an H100 / H200
    assert _gemm_configs.big_candidates(2048, 2560) == _gemm_configs.WIDE  # off by default (RAGGED = 0: slower)
    monkeypatch.setattr(_gemm_configs, "RAGGED", 0.9)
    # Qwen3-4B's o_proj / down_proj at 2048 tokens: 160 tiles of 128x256 on 132 SMs fill 61% of two waves.
    assert _gemm_configs.wave_fill(2048, 2560, 128, 256, 132) == pytest.approx(160 / 264)
    assert _gemm_configs.wave_fill(2048, 2560, 64, 128, 132) == pytest.approx(640 / 660)
    ragged = _gemm_configs.big_candidates(2048, 2560)
    assert set(_gemm_configs.WIDE) < set(ragged)  # nothing dropped, tiles added
    assert set(_gemm_configs.WAVE) <= set(ragged)
    assert max(_gemm_configs.wave_fill(2048, 2560, c["BM"], c["BN"], 132) for c in ragged) > 0.95
    assert all(c["SPLIT"] == 1 for c in ragged)  # 320 tiles of 128x128: enough for every SM, no split-K
    # qkv (N = 6144: 384 tiles, 97%) and gate/up (N = 19456: 92%) keep the wide tiles alone
    assert _gemm_configs.big_candidates(2048, 6144) == _gemm_configs.WIDE
    assert _gemm_configs.big_candidates(2048, 19456) == _gemm_configs.WIDE
    # ragged shapes are tuned apart from the others of their n bucket (2560 and 4096 share one)
    keys: list[dict[str, object]] = []
    real = autotune.Autotuner.choose

    def spy(self: autotune.Autotuner, key: dict[str, object], *args: Any, **kwargs: Any) -> tk.Config:
        keys.append(dict(key))
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(autotune.Autotuner, "choose", spy)
    monkeypatch.setattr(
        _gemm_configs, "persistent_blocks", lambda: 3
    )  # 384 rows: 3 tiles of 128x256 fill 3 blocks; 512: 4 of 6
    w = tensor(np.ones((8, 64), np.float32))
    tk.matmul(tensor(np.ones((384, 8), np.float32)), w)
    tk.matmul(tensor(np.ones((512, 8), np.float32)), w)
    assert keys[0]["m"] == keys[1]["m"]
    assert [k.get("waves") for k in keys] == [None, "ragged"]
    monkeypatch.setattr(_gemm_configs, "persistent_blocks", lambda: 132)
    # a short prompt: 20 tiles of 128x128 for 132 SMs; split-K joins
    short = _gemm_configs.big_candidates(256, 2560)
    assert any(c["SPLIT"] > 1 for c in short)


def test_split_candidates_of_big_m_are_exact() -> None:
    rng = np.random.default_rng(11)
    x, w, r = array(rng, "f32", (40, 70)), array(rng, "f32", (70, 30)), array(rng, "f32", (40, 30))
    z = tk.matmul(tensor(x), tensor(w), residual=tensor(r), config=big(16, 16, 16, split=2)).to_numpy()
    ref = f64(x) @ f64(w) + f64(r)
    assert_within(z, ref, gemm_bound(f64(x), w, 70, "f32") + 4 * U32 * np.abs(ref))
