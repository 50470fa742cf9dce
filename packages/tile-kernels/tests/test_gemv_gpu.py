"""The decode GEMV forms on the GPU at Qwen3's projection shapes: numerics against float64 (bounds as in
test_kernels_gpu), weights in a Linear layer's (N, K) layout passed as ``w.T``, outputs poisoned with NaN; every
form and load hint compiles and runs (gemv_wx at several tile shapes); the tuned choice for a decode shape is one of
its candidates.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_gemv_gpu.py -m gpu``.
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
from helpers_kernels import U32, act_ref, array, assert_within, cast_error, f64, gemm_bound, tensor
from tile.kernels import _gemm_configs, autotune

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

# (N, K) of Qwen3-4B's fused q/k/v, o, gate/up and down projections, and of Qwen3-32B's q/k/v and down.
SHAPES = [(6144, 2560), (2560, 4096), (19456, 2560), (2560, 9728), (10240, 5120), (5120, 25600)]


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _check(m: int, n: int, k: int, *, config: tk.Config | None, out: str = "bf16", **epilogue: Any) -> None:
    rng = np.random.default_rng(m + n + k)
    x, w = array(rng, "bf16", (m, k)), array(rng, "bf16", (n, k), scale=k**-0.5)
    res = array(rng, "bf16", (m, n)) if epilogue.get("residual") else None
    act = epilogue.get("activation")
    z = tk.matmul(
        tensor(x),
        tensor(w).T,
        activation=act,
        residual=None if res is None else tensor(res),
        out=tile.full(getattr(tile, out), [m, n], np.nan),
        config=config,
    )
    pre = f64(x) @ f64(w).T
    err = gemm_bound(x, w.T, k, "bf16", gpu=True) + U32 * np.abs(pre)
    ref = act_ref(pre, act)
    err = 1.2 * err + 8 * U32 * np.abs(ref)
    if res is not None:
        ref = ref + f64(res)
    assert_within(z.to_numpy(), ref, err + U32 * np.abs(ref) + cast_error(out, ref))


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize(("n", "k"), SHAPES)
def test_default_decode_config_at_qwen3_shapes(m: int, n: int, k: int) -> None:
    assert _gemm_configs.default(m, n, k)["FORM"] == 1  # every Qwen3 projection is wide enough for the GEMV form
    _check(m, n, k, config=None, residual=True)


def test_lm_head_with_f32_logits() -> None:
    _check(1, 151936, 2560, config=None, out="f32")


@pytest.mark.parametrize("form", [1, 2])
@pytest.mark.parametrize(("tma", "lat", "occ"), [(1, 3, 0), (0, 4, 0), (0, 4, 4)])
@pytest.mark.parametrize("m", [1, 3])
def test_every_form_and_hint_runs(form: int, tma: int, lat: int, occ: int, m: int) -> None:
    bm, bk = (16, 512) if form == 1 else (4, 256)
    config = tk.Config.of(FORM=form, BM=bm, BN=8, BK=bk, GROUP=1, SPLIT=1, LAT=lat, TMA=tma, OCC=occ)
    _check(m, 2560, 9728, config=config, activation="silu")


@pytest.mark.parametrize("tile_shape", [(8, 16, 256), (8, 64, 128), (16, 128, 128)])
@pytest.mark.parametrize(("tma", "lat"), [(1, 3), (0, 4)])
@pytest.mark.parametrize("m", [1, 3, 16])
def test_gemv_wx_tiles_and_hints_run(tile_shape: tuple[int, int, int], tma: int, lat: int, m: int) -> None:
    # gemv_wx: the weight's rows on the matrix unit's M side (16 to 128 of them), the activation padded to BM rows
    # (M = 16 with BM = 8 spans two row tiles); K = 9728 is no multiple of 256: a zero-padded last K tile.
    bm, bn, bk = tile_shape
    config = tk.Config.of(FORM=3, BM=bm, BN=bn, BK=bk, GROUP=1, SPLIT=1, LAT=lat, TMA=tma, OCC=0)
    _check(m, 2560, 9728, config=config, activation="silu", residual=True)


@pytest.mark.parametrize(("bn", "bk", "split"), [(64, 128, 4), (64, 256, 8), (128, 128, 8)])
@pytest.mark.parametrize("m", [1, 16])
def test_gemv_wx_split_k_runs(bn: int, bk: int, split: int, m: int) -> None:
    # The split pair at Qwen3-4B's o and down shapes (40 or 20 tiles of 64 or 128 without the split).
    config = tk.Config.of(FORM=3, BM=8 if m == 1 else 16, BN=bn, BK=bk, GROUP=1, SPLIT=split, LAT=3, TMA=1, OCC=0)
    _check(m, 2560, 4096, config=config, residual=True)
    _check(m, 2560, 9728, config=config, activation="silu")


def test_tuned_decode_config_is_a_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AUTOTUNE", "1")
    tuner = autotune.Autotuner("matmul", source="gpu-test", timer=autotune.wall_timer, cache_dir=tmp_path)
    old = autotune.set_tuner("matmul", tuner)
    try:
        _check(1, 6144, 2560, config=None)
        (chosen,) = tuner.remembered().values()
        assert chosen in _gemm_configs.decode_candidates(1, 6144)
        assert tuner.tuned == 1
    finally:
        autotune.set_tuner("matmul", old)
