"""Row kernels on the GPU at the benchmark's row lengths (1024..32768, plus odd ones), in every form the tuner can
pick (whole rows, 1..8 per block; chunks of 1024, 2048 and 4096; the hints), against float64 with the CPU tests' bounds;
outputs poisoned with NaN first. Also add_rmsnorm, Qwen3's per-head q/k norm on a slice of a q/k/v projection, and
one tuned call.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_rows_gpu.py -m gpu``; skipped without a GPU.
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
from helpers_kernels import NP_DTYPES, U32, array, assert_within, cast_error, f64, tensor
from tile.kernels import _rowforms, autotune

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

LENGTHS = [1024, 3000, 4096, 8192, 12345, 32768]
ROWS = 300  # not a multiple of any rows-per-block: the last block's rows are masked
HINTS = tk.Config.of(BM=1, BN=2048, OCC=2, WARPS=8, LAT=1)


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _poison(dtype: str, shape: tuple[int, ...]) -> tile.Tensor:
    return tile.full(getattr(tile, dtype), list(shape), np.nan)


def _refs(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], b: np.ndarray[Any, Any], dtype: str) -> dict[str, Any]:
    xd, n = f64(x), x.shape[-1]
    shifted = xd - xd.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    soft = e / e.sum(axis=-1, keepdims=True)
    logsoft = shifted - np.log(e.sum(axis=-1, keepdims=True))
    rms = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    r = 1.0 / np.sqrt(xd.var(axis=-1, keepdims=True) + 1e-5)
    normed = (xd - xd.mean(axis=-1, keepdims=True)) * r * f64(w)
    mean_err = (n + 2) * U32 * np.abs(xd).mean(axis=-1, keepdims=True)
    ln_bound = 2 * (n + 8) * U32 * np.abs(normed) + 2 * mean_err * r * np.abs(f64(w)) + U32 * np.abs(f64(b))
    return {
        "softmax": (soft, 2 * (n + 8 + np.abs(shifted)) * U32 * soft + cast_error(dtype, soft)),
        "log_softmax": (logsoft, 2 * (n + 8 + np.abs(shifted) + np.abs(logsoft)) * U32 + cast_error(dtype, logsoft)),
        "rmsnorm": (rms, 2 * (n + 8) * U32 * np.abs(rms) + cast_error(dtype, rms)),
        "layernorm": (normed + f64(b), ln_bound + cast_error(dtype, normed + f64(b))),
    }


def _check_rows(dtype: str, n: int, configs: list[tk.Config | None]) -> None:
    rng = np.random.default_rng(n)
    x, w, b = array(rng, dtype, (ROWS, n), scale=2.0), array(rng, "bf16", (n,)), array(rng, "bf16", (n,))
    xt, wt, bt = tensor(x), tensor(w), tensor(b)
    refs = _refs(x, w, b, dtype)
    for config in configs:
        got = {
            "softmax": tk.softmax(xt, out=_poison(dtype, x.shape), config=config),
            "log_softmax": tk.log_softmax(xt, out=_poison(dtype, x.shape), config=config),
            "rmsnorm": tk.rmsnorm(xt, wt, out=_poison(dtype, x.shape), config=config),
            "layernorm": tk.layernorm(xt, wt, bt, out=_poison(dtype, x.shape), config=config),
        }
        for name, z in got.items():
            try:
                assert_within(z.to_numpy(), *refs[name])
            except AssertionError as exc:
                raise AssertionError(f"{name} with config {config}: {exc}") from None


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_default_and_hinted_forms(dtype: str, n: int) -> None:
    _check_rows(dtype, n, [None, HINTS])


@pytest.mark.parametrize(("dtype", "n"), [("f16", 4096), ("bf16", 12345), ("f16", 32768)])
def test_every_candidate_the_tuner_times(dtype: str, n: int) -> None:
    _check_rows(dtype, n, list(_rowforms.configs(1 << (n - 1).bit_length())))


@pytest.mark.parametrize("n", [1024, 4096, 5000, 32768])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_add_rmsnorm(dtype: str, n: int) -> None:
    rng = np.random.default_rng(n + 1)
    x, r, w = array(rng, dtype, (ROWS, n), 2.0), array(rng, dtype, (ROWS, n), 2.0), array(rng, dtype, (n,))
    s = (f64(x) + f64(r)).astype(np.float32).astype(NP_DTYPES[dtype])
    sd = f64(s)
    ref = sd / np.sqrt((sd * sd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    for config in (None, tk.Config.of(BM=1, BN=1024), tk.Config.of(BM=2, BN=0) if n <= 8192 else HINTS):
        normed, summed = tk.add_rmsnorm(
            tensor(x), tensor(r), tensor(w), out=_poison(dtype, x.shape), sum_out=_poison(dtype, x.shape), config=config
        )
        np.testing.assert_array_equal(summed.to_numpy(), s)
        assert_within(normed.to_numpy(), ref, 2 * (n + 8) * U32 * np.abs(ref) + cast_error(dtype, ref))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_qwen3_q_norm_on_the_fused_projection(dtype: str) -> None:
    rng = np.random.default_rng(7)
    heads, kv, d = 32, 8, 128  # Qwen3-4B
    qkv, w = array(rng, dtype, (ROWS, (heads + 2 * kv) * d), 2.0), array(rng, dtype, (d,))
    q = qkv[:, : heads * d]
    hd = f64(q).reshape(ROWS, heads, d)
    ref = (hd / np.sqrt((hd * hd).mean(-1, keepdims=True) + 1e-6) * f64(w)).reshape(ROWS, heads * d)
    bound = 2 * (d + 8) * U32 * np.abs(ref) + cast_error(dtype, ref)
    for config in (None, *_rowforms.heads_configs(4096, d)):
        got = tk.rmsnorm_heads(tensor(qkv)[:, : heads * d], tensor(w), out=_poison(dtype, q.shape), config=config)
        assert_within(got.to_numpy(), ref, bound)


def test_a_tuned_call_picks_a_candidate_and_is_right(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AUTOTUNE", "1")
    tuner = autotune.Autotuner("softmax", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
    old = autotune.set_tuner("softmax", tuner)
    try:
        x = array(np.random.default_rng(8), "f16", (4096, 8192))
        got = tk.softmax(tensor(x))
    finally:
        autotune.set_tuner("softmax", old)
    (chosen,) = tuner.remembered().values()
    assert chosen in _rowforms.configs(8192)
    xd = f64(x)
    e = np.exp(xd - xd.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    assert_within(got.to_numpy(), ref, 2 * (8192 + 8 + 8) * U32 * ref + cast_error("f16", ref))
