"""Checked gathers of inputs (``x.gather(i0, ..., padding=)``) on the CPU interpreter, against numpy: in-bounds
reads, padding for every index outside the tensor (negative, past the end, 64-bit indices that a 32-bit compare would
wrap into range), broadcast index tiles, 1-D/2-D/3-D, f16/f32/i32, strided inputs, a stencil and an im2col
convolution. The interpreter checks every address a kernel touches, so a read outside the tensor would fail here."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f16, f32, i32
from tile.ir.interp import MemoryAccessError

DTYPES = [(f16, np.float16), (f32, np.float32), (i32, np.int32)]


def expect_lookup(x: np.ndarray, ids: np.ndarray, pad: int) -> np.ndarray:
    inside = (ids >= 0) & (ids < len(x))
    return np.where(inside, x[np.where(inside, ids, 0)], np.asarray(pad, x.dtype)).astype(x.dtype)


@pytest.mark.parametrize(("dt", "npdt"), DTYPES)
def test_lookup_reads_in_bounds_ids_and_pads_the_rest(gather_k: ModuleType, dt: object, npdt: type[np.generic]) -> None:
    x = (np.arange(37) * 3 - 20).astype(npdt)
    ids = np.array([0, 36, 5, -1, 37, 1000, -1000, 17, 2, 2, 36, -37, 18, 0, 40, 9], np.int32)
    z = tile.zeros(dt, [16]).partition([8])
    out = gather_k.lookup(z, tile.from_numpy(x), tile.from_numpy(ids), PAD=-7).sync()[0].unpartition().to_numpy()
    np.testing.assert_array_equal(out, expect_lookup(x, ids, -7))
    assert (out == -7).sum() == 6  # the six ids outside 0..36 (x itself holds no -7)


def test_the_interpreter_catches_the_unmasked_read_that_gather_masks(gather_k: ModuleType) -> None:
    """The same lookup through an unmasked raw pointer fails: an id far past the end leaves every mapped buffer, so
    the gather's padding there comes from its mask, not from memory that happened to be readable."""
    x, ids = np.arange(8, dtype=np.float32), np.array([1, 2, 3, 4, 5, 6, 7, 10**7], np.int32)
    with pytest.raises(MemoryAccessError, match="outside every mapped buffer"):
        gather_k.raw_lookup(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x), tile.from_numpy(ids)).sync()
    z = tile.zeros(f32, [8]).partition([8])
    got = gather_k.lookup(z, tile.from_numpy(x), tile.from_numpy(ids), PAD=0).sync()[0].unpartition().to_numpy()
    np.testing.assert_array_equal(got, [1, 2, 3, 4, 5, 6, 7, 0])


def test_64_bit_ids_are_compared_in_64_bits(gather_k: ModuleType) -> None:
    """Each of these ids truncates to an in-bounds 32-bit index (2**32 + 3 -> 3): all must read the padding."""
    x = np.arange(10, dtype=np.float32) + 100
    wraps = [2**32 + 3, 2**32, -(2**32) + 1, 2**33 + 9, 2**63 - 1, -(2**63), 2**31, -(2**31)]
    ids = np.array([*wraps, 0, 9, 3, 10, -1, 2**31 - 1, 1 - 2**31, 4], np.int64)
    out = gather_k.lookup(tile.zeros(f32, [16]).partition([16]), tile.from_numpy(x), tile.from_numpy(ids), PAD=-1)
    got = out.sync()[0].unpartition().to_numpy()
    np.testing.assert_array_equal(got, expect_lookup(x, ids, -1))
    assert (got[:8] == -1).all()


@pytest.mark.parametrize(("dt", "npdt"), DTYPES)
@pytest.mark.parametrize(("dy", "dx"), [(0, 0), (3, -2), (-5, 7), (40, 0), (0, -90)])
def test_shifted_window_broadcasts_row_and_column_indices(
    gather_k: ModuleType, dt: object, npdt: type[np.generic], dy: int, dx: int
) -> None:
    rows, cols = 19, 27
    x = (np.arange(rows * cols).reshape(rows, cols) % 1000).astype(npdt)
    z = tile.zeros(dt, [rows, cols]).partition([8, 16])
    out = gather_k.window(z, tile.from_numpy(x), DY=dy, DX=dx).sync()[0].unpartition().to_numpy()
    padded = np.zeros((rows + 200, cols + 200), npdt)
    padded[100 : 100 + rows, 100 : 100 + cols] = x
    np.testing.assert_array_equal(out, padded[100 + dy : 100 + dy + rows, 100 + dx : 100 + dx + cols])


def test_a_strided_input_is_read_through_its_strides(gather_k: ModuleType) -> None:
    base = np.arange(40 * 90, dtype=np.float32).reshape(40, 90)
    view = base[::2, ::3].T  # (30, 20), neither dim of unit stride
    out = gather_k.window(tile.zeros(f32, [30, 20]).partition([8, 8]), tile.from_dlpack(view), DY=1, DX=-1)
    expect = np.zeros_like(view)
    expect[:-1, 1:] = view[1:, :-1]
    np.testing.assert_array_equal(out.sync()[0].unpartition().to_numpy(), expect)


@pytest.mark.parametrize(("dt", "npdt"), DTYPES)
def test_three_index_tiles_address_a_3d_tensor(gather_k: ModuleType, dt: object, npdt: type[np.generic]) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(0, 100, (4, 5, 6)).astype(npdt)
    idx = np.stack([rng.integers(-2, 7, 32) for _ in range(3)]).astype(np.int64)
    z = tile.zeros(dt, [32]).partition([16])
    out = gather_k.pick3(z, tile.from_numpy(x), tile.from_numpy(idx)).sync()[0].unpartition().to_numpy()
    inside = np.all((idx >= 0) & (idx < np.array(x.shape)[:, None]), axis=0)
    safe = np.where(inside, idx, 0)
    np.testing.assert_array_equal(out, np.where(inside, x[safe[0], safe[1], safe[2]], -1).astype(npdt))
    assert 0 < inside.sum() < 32  # some indices inside, some outside


def test_stencil_matches_numpy_and_the_race_detector_stays_silent(gather_k: ModuleType) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((21, 35)).astype(np.float32)
    z = tile.zeros(f32, [21, 35]).partition([8, 16])
    out = gather_k.stencil(z, tile.from_numpy(x)).sync()[0].unpartition().to_numpy()
    p = np.pad(x.astype(np.float64), 1)
    expect = 4 * x - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-5)


def conv_reference(x: np.ndarray, w: np.ndarray, k: int, pad: int) -> np.ndarray:
    """(C, H, W) image, (OC, C, K, K) filter -> (H*W, OC), stride 1, zero padding ``pad``, in float64."""
    _, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((h, wd, w.shape[0]))
    for ky in range(k):
        for kx in range(k):
            out += np.einsum("chw,oc->hwo", xp[:, ky : ky + h, kx : kx + wd], w[:, :, ky, kx].astype(np.float64))
    return out.reshape(h * wd, w.shape[0])


def test_im2col_convolution_matches_numpy(gather_k: ModuleType) -> None:
    rng = np.random.default_rng(5)
    c, h, wd, oc, k, pad = 3, 9, 11, 12, 3, 1
    x = rng.standard_normal((c, h, wd)).astype(np.float32)
    w = rng.standard_normal((oc, c, k, k)).astype(np.float32)
    w2 = np.ascontiguousarray(w.reshape(oc, c * k * k).T)  # row c*K*K + ky*K + kx
    z = tile.zeros(f32, [h * wd, oc]).partition([16, 16])
    out = gather_k.conv_im2col(z, tile.from_numpy(x), tile.from_numpy(w2), W=wd, K=k, P=pad, BK=16)
    np.testing.assert_allclose(
        out.sync()[0].unpartition().to_numpy(), conv_reference(x, w, k, pad), rtol=1e-4, atol=1e-4
    )


def test_a_rank_0_tensor_gathers_its_one_element(gather_k: ModuleType) -> None:
    x = np.array(3.5, np.float32)
    out = gather_k.scalar_of(tile.zeros(f32, [8]).partition([4]), tile.from_numpy(x)).sync()
    np.testing.assert_array_equal(out[0].unpartition().to_numpy(), np.full(8, 3.5, np.float32))
