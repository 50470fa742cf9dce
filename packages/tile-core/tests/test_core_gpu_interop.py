"""GPU: zero-copy interop with torch and cupy in both directions (verified by writing through one side)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tile.core as tc

pytestmark = pytest.mark.gpu


def test_torch_tensor_borrowed_without_copy(device: tc.Device) -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(64, dtype=torch.float32, device=f"cuda:{device.ordinal}")
    view = tc.borrow(tensor)
    assert view.ptr == tensor.data_ptr()
    assert view.shape == (64,)
    assert view.owner is not None
    view.fill(2.5)
    torch.cuda.synchronize()
    assert float(tensor.sum()) == 160.0
    tensor.add_(1.0)
    torch.cuda.synchronize()  # torch's stream is not ordered with Tile's; the test orders them by hand
    np.testing.assert_array_equal(view.to_numpy(), np.full(64, 3.5, np.float32))
    strided = tc.borrow(tensor.view(8, 8)[:, ::2])
    assert strided.strides == (32, 8)
    assert not strided.is_contiguous


def test_tile_buffer_viewed_by_torch(device: tc.Device) -> None:
    torch = pytest.importorskip("torch")
    buffer = tc.DeviceBuffer.from_host(np.arange(32, dtype=np.float32), device=device)
    tensor = torch.from_dlpack(buffer.view(np.float32, (4, 8)))
    assert tensor.data_ptr() == buffer.ptr
    assert tensor.shape == (4, 8)
    tensor.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(buffer.to_numpy(np.float32), np.arange(32, dtype=np.float32) * 2)
    with pytest.raises(tc.StateError, match="DLPack"):
        buffer.free()
    del tensor
    gc.collect()
    buffer.free()
    ones = tc.DeviceBuffer.from_host(np.ones(4, np.float32), device=device)
    assert not hasattr(ones.view(np.float32), "__cuda_array_interface__")  # untracked: exports go through DLPack
    assert float(torch.from_dlpack(ones.view(np.float32)).sum()) == 4.0


def test_cupy_both_directions(device: tc.Device) -> None:
    cp = pytest.importorskip("cupy")
    array = cp.arange(16, dtype=cp.int32)
    view = tc.borrow(array)
    assert view.ptr == array.data.ptr
    view.fill(9)
    cp.cuda.runtime.deviceSynchronize()
    assert int(array.sum()) == 144
    buffer = tc.DeviceBuffer.from_host(np.zeros(16, np.int32), device=device)
    assert not hasattr(buffer.view(np.int32), "__cuda_array_interface__")  # cp.asarray's untracked route: refused
    first = cp.from_dlpack(buffer.view(np.int32))
    assert first.data.ptr == buffer.ptr
    first += 5
    through_dlpack = cp.from_dlpack(buffer.view(np.int32))
    through_dlpack += 1
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(buffer.to_numpy(np.int32), np.full(16, 6, np.int32))
    cupy_stream = cp.cuda.Stream(non_blocking=True)
    assert tc.Stream.borrow(cupy_stream).handle == cupy_stream.ptr
