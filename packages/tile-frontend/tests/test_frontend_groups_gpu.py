"""Tuple parameters on the GPU (lead's GPU batch): the grouped GEMM of the CPU suite against numpy float64, groups of
different shapes, on a persistent grid and on one block per tile; and its compile for sm_90 through tileiras.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend/tests/test_frontend_groups_gpu.py -m gpu``.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.compiler import Target, compile_kernel, specialize
from tile.frontend import f32

SHAPES = [(1000, 512, 768), (64, 64, 64), (333, 200, 129), (2048, 1024, 256)]  # (M, N, K) per group


@pytest.fixture
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.requires_tileiras
def test_grouped_gemm_compiles_for_sm90(gk: ModuleType) -> None:
    shapes = {f"As[{i}]": (m, k) for i, (m, _, k) in enumerate(SHAPES)} | {
        f"Bs[{i}]": (k, n) for i, (_, n, k) in enumerate(SHAPES)
    }
    consts = {"Cs": len(SHAPES), "As": len(SHAPES), "Bs": len(SHAPES), "BM": 128, "BN": 128, "BK": 64}
    spec = specialize(gk.grouped_gemm.fn, shapes, consts=consts, own_grid=False)
    kernel = compile_kernel(gk.grouped_gemm.fn, spec, Target("sm_90"))
    assert kernel.cubin is not None
    assert len(kernel.cubin) > 0
    assert sum(s.role == "base" for s in kernel.abi.slots) == 3 * len(SHAPES)


@pytest.mark.gpu
@pytest.mark.usefixtures("_gpu_backend")
@pytest.mark.parametrize("grid", [132, 4096])  # persistent (one H100's SMs), and more blocks than tiles
def test_grouped_gemm_on_gpu(gk: ModuleType, grid: int) -> None:
    rng = np.random.default_rng(grid)
    a = [rng.standard_normal((m, k)).astype(np.float16) for m, _, k in SHAPES]
    b = [rng.standard_normal((k, n)).astype(np.float16) for _, n, k in SHAPES]
    cs = tuple(tile.full(f32, [m, n], np.nan).partition([128, 128]) for m, n, _ in SHAPES)
    got, *_ = gk.grouped_gemm.grid((grid,))(
        cs, tuple(map(tile.from_numpy, a)), tuple(map(tile.from_numpy, b)), BK=64
    ).sync()
    for c, x, y in zip(got, a, b, strict=True):
        want = x.astype(np.float64) @ y.astype(np.float64)
        np.testing.assert_allclose(c.unpartition().to_numpy(), want, rtol=2e-3, atol=2e-2)
