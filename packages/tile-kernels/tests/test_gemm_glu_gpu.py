"""The big-M GEMM on the GPU at Qwen3-4B's prefill shapes: the SwiGLU epilogue (``swiglu=True``, M > 16) with the
default config and every SwiGLU candidate against float64 (outputs poisoned with NaN, M off the tiles); the tuned
SwiGLU config is one of its candidates, tuned apart; the wave-aware tiles added for o_proj / down_proj (N = 2560,
residual epilogue) are exact too.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_gemm_glu_gpu.py -m gpu``.
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
from helpers_kernels import U32, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.kernels import _fused, _gemm_configs, autotune

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

HIDDEN, Q, INNER = 2560, 4096, 9728  # Qwen3-4B
M = 333  # a prompt length off every tile


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _operands() -> tuple[Any, Any]:
    rng = np.random.default_rng(7)
    return array(rng, "bf16", (M, HIDDEN), scale=2.0), array(rng, "bf16", (2 * INNER, HIDDEN), scale=HIDDEN**-0.5)


def _check_glu(x: Any, wgu: Any, config: tk.Config | None) -> None:
    z = tk.matmul(tensor(x), tensor(wgu).T, swiglu=True, config=config, out=tile.full(tile.bf16, [M, INNER], np.nan))
    h = f64(x)
    wg, wu = wgu[:INNER].T, wgu[INNER:].T
    gate, up = h @ f64(wg), h @ f64(wu)
    eg = gemm_bound(h, wg, HIDDEN, "bf16", gpu=True) + U32 * np.abs(gate)
    eu = gemm_bound(h, wu, HIDDEN, "bf16", gpu=True) + U32 * np.abs(up)
    silu = gate / (1.0 + np.exp(-gate))
    ref = silu * up
    err = 1.2 * eg * np.abs(up) + np.abs(silu) * eu + 8 * U32 * np.abs(ref)
    assert_within(z.to_numpy(), ref, err + cast_error("bf16", ref))


def test_swiglu_gemm_default_and_every_candidate() -> None:
    x, wgu = _operands()
    _check_glu(x, wgu, None)
    for config in _fused.big_candidates(_gemm_configs.big_candidates(M, INNER)):
        _check_glu(x, wgu, config)


def test_tuned_swiglu_config_is_a_swiglu_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AUTOTUNE", "1")
    tuner = autotune.Autotuner("matmul", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
    old = autotune.set_tuner("matmul", tuner)
    try:
        x, wgu = _operands()
        _check_glu(x, wgu, None)
        (chosen,) = tuner.remembered().values()
        assert chosen in _fused.big_candidates(_gemm_configs.big_candidates(M, INNER))
        assert tuner.tuned == 1
    finally:
        autotune.set_tuner("matmul", old)


@pytest.mark.parametrize("k", [Q, INNER])  # o_proj, down_proj
def test_wave_tiles_with_the_residual_epilogue(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(k)
    m = 2048
    x, w = array(rng, "bf16", (m, k)), array(rng, "bf16", (HIDDEN, k), scale=k**-0.5)
    r = array(rng, "bf16", (m, HIDDEN))
    ref = f64(x) @ f64(w).T + f64(r)
    bound = gemm_bound(f64(x), w.T, k, "bf16", gpu=True) + 2 * U32 * np.abs(ref) + cast_error("bf16", ref)
    monkeypatch.setattr(_gemm_configs, "RAGGED", 0.9)  # the wave tiles are off by default; they must still be right
    added = [c for c in _gemm_configs.big_candidates(m, HIDDEN) if c not in _gemm_configs.WIDE]
    assert added  # 2048 x 2560 leaves the 128x256 tiles' second wave ragged on any GPU of more than 80 SMs
    for config in added:
        out = tile.full(tile.bf16, [m, HIDDEN], np.nan)
        z = tk.matmul(tensor(x), tensor(w).T, residual=tensor(r), config=config, out=out)
        assert_within(z.to_numpy(), ref, bound)
