"""Checked gathers (``x.gather``) on the GPU (lead's GPU batch): the CPU suite's kernels against numpy, an im2col
convolution at a realistic size included, and out-of-range ids (negative, past the end, 64-bit) reading the padding.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend/tests/test_frontend_gather_gpu.py -m gpu``; under
compute-sanitizer (memcheck) no access may fall outside the tensors.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f16, f32, i32

sys.path.insert(0, str(Path(__file__).parent))
from test_frontend_gather import conv_reference, expect_lookup

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.parametrize(("dt", "npdt"), [(f16, np.float16), (f32, np.float32), (i32, np.int32)])
def test_lookup_pads_every_id_outside_the_table(gather_k: ModuleType, dt: object, npdt: type[np.generic]) -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(-1000, 1000, 5000).astype(npdt)
    ids = rng.integers(-3000, 8000, 4096).astype(np.int64)
    ids[:6] = [2**32 + 3, -(2**32) + 1, 2**31, -(2**31), 2**63 - 1, 4999]
    z = tile.zeros(dt, [4096]).partition([256])
    out = gather_k.lookup(z, tile.from_numpy(x), tile.from_numpy(ids), PAD=-7).sync()[0].unpartition().to_numpy()
    np.testing.assert_array_equal(out, expect_lookup(x, ids, -7))


def test_stencil_matches_numpy(gather_k: ModuleType) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 1500)).astype(np.float32)
    out = gather_k.stencil(tile.zeros(f32, [1000, 1500]).partition([32, 64]), tile.from_numpy(x))
    p = np.pad(x.astype(np.float64), 1)
    expect = 4 * x - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    np.testing.assert_allclose(out.sync()[0].unpartition().to_numpy(), expect, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("dt", "npdt", "tol"), [(f32, np.float32, 2e-2), (f16, np.float16, 5e-2)])
def test_im2col_convolution_matches_numpy(gather_k: ModuleType, dt: object, npdt: type[np.generic], tol: float) -> None:
    """64 -> 128 channels, 3x3, 56x56 (a ResNet stage): f32 inputs may run as tf32 in the mma, hence the tolerance."""
    rng = np.random.default_rng(5)
    c, h, wd, oc, k, pad = 64, 56, 56, 128, 3, 1
    x = rng.standard_normal((c, h, wd)).astype(npdt)
    w = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(npdt)
    w2 = np.ascontiguousarray(w.reshape(oc, c * k * k).T)
    z = tile.zeros(f32, [h * wd, oc]).partition([64, 64])
    out = gather_k.conv_im2col(z, tile.from_numpy(x), tile.from_numpy(w2), W=wd, K=k, P=pad, BK=32)
    got = out.sync()[0].unpartition().to_numpy()
    np.testing.assert_allclose(got, conv_reference(x, w, k, pad), rtol=tol, atol=tol)
