"""matmul's fused decode forms on the GPU at Qwen3-4B's shapes: the RMSNorm prologue on the q/k/v projection and
norm + SwiGLU on the gate/up projection against float64 (outputs poisoned with NaN), with the default config,
every GEMV form and the split-K forms (gemv_wx's and the skinny GEMM's, both norm forms); the tuned fused config is
one of the fused candidates, tuned apart from the plain one.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_gemv_fused_gpu.py -m gpu``.
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
from helpers_kernels import U32, UNIT, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.kernels import _fused, _gemm_configs, autotune

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

EPS = 1e-6
HIDDEN, QKV, INNER = 2560, 6144, 9728  # Qwen3-4B


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _check(m: int, n: int, *, swiglu: bool, config: tk.Config | None) -> None:
    rng = np.random.default_rng(m + n)
    k = HIDDEN
    x, g = array(rng, "bf16", (m, k), scale=4.0), array(rng, "bf16", (k,))
    w = array(rng, "bf16", (2 * n if swiglu else n, k), scale=k**-0.5)
    z = tk.matmul(
        tensor(x),
        tensor(w).T,
        norm=tensor(g),
        eps=EPS,
        swiglu=swiglu,
        out=tile.full(tile.bf16, [m, n], np.nan),
        config=config,
    )
    xd = f64(x)
    h = xd / np.sqrt(np.mean(xd * xd, axis=1, keepdims=True) + EPS) * f64(g)
    h_err = (UNIT["bf16"] + (k + 8) * 2 * U32) * np.abs(h)  # the normed operand, rounded to bf16

    def product(wt: Any) -> tuple[Any, Any]:
        out = h @ f64(wt)
        return out, gemm_bound(h, wt, k, "bf16", gpu=True) + h_err @ np.abs(f64(wt)) + U32 * np.abs(out)

    if swiglu:
        (gate, eg), (up, eu) = product(w[:n].T), product(w[n:].T)
        silu = gate / (1.0 + np.exp(-gate))
        ref = silu * up
        err = 1.2 * eg * np.abs(up) + np.abs(silu) * eu + 8 * U32 * np.abs(ref)
    else:
        ref, err = product(w.T)
    assert_within(z.to_numpy(), ref, err + cast_error("bf16", ref))


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize(("n", "swiglu"), [(QKV, False), (INNER, True)])
def test_fused_default_config_at_qwen3_shapes(m: int, n: int, swiglu: bool) -> None:
    _check(m, n, swiglu=swiglu, config=None)


@pytest.mark.parametrize(
    "shape",  # (FORM, BM, BN, BK, TMA)
    [(1, 16, 8, 128, 1), (1, 16, 64, 128, 0), (2, 1, 8, 256, 0), (3, 8, 64, 256, 1), (3, 8, 128, 128, 0)],
)
@pytest.mark.parametrize("swiglu", [False, True])
def test_every_fused_form_runs(shape: tuple[int, int, int, int, int], swiglu: bool) -> None:
    form, bm, bn, bk, tma = shape
    config = tk.Config.of(FORM=form, BM=bm, BN=bn, BK=bk, GROUP=1, SPLIT=1, LAT=3 if tma else 4, TMA=tma, OCC=0)
    _check(1, INNER if swiglu else QKV, swiglu=swiglu, config=config)


@pytest.mark.parametrize(
    "shape",  # (FORM, BM, BN, BK, SPLIT): gemv_wx's split tiles and the skinny GEMM's, as the plain tuner has them
    [(3, 8, 64, 256, 2), (3, 8, 128, 128, 4), (3, 16, 64, 128, 8), (0, 16, 128, 128, 4), (0, 16, 64, 256, 2)],
)
@pytest.mark.parametrize("norm_form", [1, 2], ids=["scale-first", "one-pass"])
@pytest.mark.parametrize("swiglu", [False, True])
@pytest.mark.parametrize("m", [1, 16])
def test_every_fused_split_form_runs(shape: tuple[int, ...], norm_form: int, swiglu: bool, m: int) -> None:
    form, bm, bn, bk, split = shape
    hints = {"FORM": form, "LAT": 3, "TMA": 1, "OCC": 0} if form else {}
    config = tk.Config.of(BM=bm, BN=bn, BK=bk, GROUP=1, SPLIT=split, NORM=norm_form, **hints)
    _check(m, INNER if swiglu else QKV, swiglu=swiglu, config=config)


def test_tuned_fused_config_is_a_fused_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AUTOTUNE", "1")
    tuner = autotune.Autotuner("matmul", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
    old = autotune.set_tuner("matmul", tuner)
    try:
        _check(1, INNER, swiglu=True, config=None)
        (chosen,) = tuner.remembered().values()
        fusion = _fused.Fusion(tensor(np.ones(HIDDEN, np.float32)), EPS, swiglu=True)
        assert chosen in _fused.candidates(_gemm_configs.decode_candidates(1, INNER), fusion)
        assert tuner.tuned == 1
    finally:
        autotune.set_tuner("matmul", old)
