"""Sub-tiles of a block's own output tile on the GPU (lead's GPU batch): the CPU suite's kernels against numpy
float64, edge tiles included, and a sub-tile index outside the own tile failing the launch (in a subprocess: a GPU
fault ends the process's CUDA context).

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend/tests/test_frontend_subtiles_gpu.py -m gpu``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f16, f32

sys.path.insert(0, str(Path(__file__).parent))
from helpers_frontend_python import run_python

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _rms(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out: np.ndarray = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w64
    return out


@pytest.mark.parametrize(
    ("dtype", "shape", "tiles", "tol"),
    [
        (f32, (4096, 4096), (4, 4096, 1024), 1e-5),
        (f32, (1000, 3000), (8, 4096, 512), 1e-5),  # neither extent a multiple of its tile or chunk
        (f16, (4096, 4096), (1, 4096, 1024), 2e-3),  # the benchmark's shape
        (f16, (77, 5000), (2, 8192, 1024), 2e-3),
    ],
)
def test_chunked_rmsnorm(
    sk: ModuleType, dtype: object, shape: tuple[int, int], tiles: tuple[int, int, int], tol: float
) -> None:
    bm, nt, bn = tiles
    rng = np.random.default_rng(1)
    xn = rng.standard_normal(shape).astype(np.float32 if dtype is f32 else np.float16)
    wn = rng.random(shape[1]).astype(xn.dtype)
    out = tile.full(dtype, list(shape), np.nan).partition([bm, nt])
    z, *_ = sk.rmsnorm_chunked(out, tile.from_numpy(xn), tile.from_numpy(wn), 1e-5, BN=bn).sync()
    got = z.unpartition().to_numpy().astype(np.float64)
    np.testing.assert_allclose(got, _rms(xn, wn, 1e-5), rtol=tol, atol=tol)


@pytest.mark.parametrize("sub", [(4, 8), (16, 8), (4, 32), (16, 32)])
def test_two_dimensional_subtiles_store_and_read_back(sk: ModuleType, sub: tuple[int, int]) -> None:
    xn = np.random.default_rng(5).standard_normal((500, 410)).astype(np.float32)
    out = tile.full(f32, [500, 410], np.nan).partition([16, 32])
    z, _ = sk.store_then_read_back(out, tile.from_numpy(xn), SM=sub[0], SN=sub[1]).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 2 * xn)


def test_subtiles_of_walked_tiles(sk: ModuleType) -> None:
    xn = np.random.default_rng(6).standard_normal((400, 700)).astype(np.float32)
    out = tile.full(f32, [400, 700], np.nan).partition([16, 32])
    z, _ = sk.walked_subtiles.grid((132,))(out, tile.from_numpy(xn), SN=8).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), xn + 1.0)


def test_a_run_time_index_inside_the_own_tile(sk: ModuleType) -> None:
    z, *_ = sk.at_runtime_index(tile.full(f32, [8, 64], np.nan).partition([8, 32]), 2, SN=8).sync()
    row = np.zeros(64, np.float32)
    row[16:24] = row[48:56] = 5.0
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(row, (8, 1)))


SCRIPT = """
import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32


@tile.entry
def neighbour(z: Mut[Tensor[f32, ("BM", "BN")]], SM: Const[int]):
    zs = z.subtiles((SM, BN))
    zs.store(tile.full((SM, BN), 1.0, f32), ((1 - tile.block_id()[0]) * (BM // SM), 0))


try:
    neighbour(tile.zeros(f32, [32, 16]).partition([16, 16]), SM=8).sync()
except tile.TileError as exc:
    print(type(exc).__name__)
    print(exc)
else:
    print("no error")
"""


@pytest.mark.parametrize("debug", [False, True])
def test_an_index_into_the_neighbours_tile_fails_the_launch(tmp_path: Path, debug: bool) -> None:
    script = tmp_path / "neighbour.py"
    script.write_text(SCRIPT)
    env = {"TILE_BACKEND": "gpu"} | ({"TILE_DEBUG_GUARDS": "1"} if debug else {})
    out = run_python([str(script)], env, timeout=300)
    assert "CudaError" in out
    if debug:  # a device-side assert naming the access
        assert "sub-tile index out of range for z.subtiles((8, 16)) at " in out
    else:  # the silent fault of GPU guards
        assert "CUDA_ERROR_ILLEGAL_ADDRESS" in out
