"""GPU: devices, owned buffers, views, copies, fills, pinned memory and misuse on real memory."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import tile.core as tc

pytestmark = pytest.mark.gpu


def test_device_properties(device: tc.Device, gpu_summary: list[str]) -> None:
    assert tc.Device(0) is device
    assert device.compute_capability >= (8, 0)
    assert device.arch == "sm_{}{}".format(*device.compute_capability)
    assert device.sm_count > 0
    assert device.l2_cache_size > 0
    free, total = device.mem_info()
    assert 0 < free <= total
    assert abs(total - device.total_memory) <= 1 << 30
    gpu_summary.append(f"device: {device.name} ({device.arch}, {device.sm_count} SMs)")


def test_round_trip_with_offsets(device: tc.Device) -> None:
    rng = np.random.default_rng()
    data = rng.standard_normal(1000).astype(np.float32)
    with tc.DeviceBuffer.from_host(data, device=device) as buffer:
        np.testing.assert_array_equal(buffer.to_numpy(np.float32, 1000), data)
        buffer.copy_from(np.full(10, 7, np.float32), offset=40)
        got = buffer.view(np.float32).to_numpy()
        np.testing.assert_array_equal(got[10:20], 7)
        np.testing.assert_array_equal(got[:10], data[:10])
        tail = np.empty(5, np.float32)
        buffer.copy_to(tail, offset=4 * 995)
        np.testing.assert_array_equal(tail, data[995:])


def test_device_to_device_and_typed_fills(device: tc.Device) -> None:
    a = tc.DeviceBuffer.allocate(4096, device=device)
    b = tc.DeviceBuffer.allocate(4096, device=device)
    for dtype, value in ((np.uint8, 0xAB), (np.float16, -1.5), (np.float32, 3.25), (np.int64, -7), (np.float64, 0.1)):
        a.view(dtype).fill(value)
        tc.copy(b, a)
        np.testing.assert_array_equal(b.view(dtype).to_numpy(), np.full(4096 // np.dtype(dtype).itemsize, value, dtype))
    b.view(np.float32, 16, offset=64).copy_from(a.view(np.float32, 16))
    a.free()
    b.free()


def test_async_copies_through_pinned_memory_and_events(device: tc.Device) -> None:
    stream = device.create_stream()
    host = tc.PinnedBuffer.empty(1 << 20, np.float32)
    host.array[:] = np.arange(1 << 20, dtype=np.float32)
    back = tc.PinnedBuffer.empty(1 << 20, np.float32)
    back.array[:] = -1
    buffer = tc.DeviceBuffer.allocate(4 << 20, device=device, stream=stream)
    buffer.copy_from(host, sync=False)
    buffer.copy_to(back, sync=False)
    done = stream.record()
    done.synchronize()
    assert done.query()
    np.testing.assert_array_equal(back.array, host.array)
    buffer.free()
    stream.close()


def test_misuse_changes_nothing(device: tc.Device) -> None:
    buffer = tc.DeviceBuffer.from_host(np.arange(16, dtype=np.int32), device=device)
    with pytest.raises(
        tc.OutOfBoundsError, match=r"bytes \[40, 72\) fall outside the 64-byte buffer; check the offset"
    ):
        buffer.copy_from(np.zeros(8, np.int32), offset=40)
    with pytest.raises(tc.LayoutMismatchError, match="copy dtype mismatch: destination is int32, source float32"):
        buffer.view(np.int32).copy_from(np.zeros(16, np.float32))
    np.testing.assert_array_equal(buffer.to_numpy(np.int32), np.arange(16))
    buffer.free()
    with pytest.raises(tc.DoubleFreeError, match="was already freed: free each buffer once"):
        buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed: allocate a new buffer"):
        buffer.to_numpy()


def test_buffers_work_from_other_threads(device: tc.Device) -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            data = np.full(256, seed, np.int32)
            with tc.DeviceBuffer.from_host(data, device=device) as buffer:
                np.testing.assert_array_equal(buffer.to_numpy(np.int32), data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_free_waits_for_uses_on_other_streams(device: tc.Device) -> None:
    """Bug caught: a free that does not wait for the copy still running on `other` returns its memory to the pool,
    the next allocation reuses it and is filled, and the late copy then overwrites the new buffer with ones."""
    other = device.create_stream()
    buffer = tc.DeviceBuffer.allocate(64 << 20, device=device)
    source = tc.DeviceBuffer.allocate(64 << 20, device=device)
    source.fill(1)
    device.synchronize()
    buffer.copy_from(source, stream=other, sync=False)
    buffer.free()  # ordered after the copy on `other`
    reused = tc.DeviceBuffer.allocate(64 << 20, device=device)  # stream-ordered after the free: may be the same bytes
    reused.fill(2)
    other.synchronize()
    device.synchronize()
    values = reused.to_numpy(np.uint8)
    assert (values == 2).all(), f"{int((values != 2).sum())} bytes were written after their buffer was freed"
    reused.free()
    source.free()
    other.close()


def test_pool_returns_to_baseline(device: tc.Device) -> None:
    pool = device.memory_pool
    gc.collect()  # buffers dropped by earlier tests are freed now, not in the middle of the measurement
    device.synchronize()
    before = pool.used_bytes
    buffers = [tc.DeviceBuffer.allocate(1 << 20, device=device) for _ in range(32)]
    device.synchronize()
    assert pool.used_bytes >= before + 32 * (1 << 20)
    for buffer in buffers:
        buffer.free()
    device.synchronize()
    assert pool.used_bytes == before


def test_pool_trim_keeps_live_memory_and_refuses_a_bad_size(device: tc.Device) -> None:
    """``trim`` returns unused reserved memory (never a live allocation's) and checks its size before the driver."""
    pool = device.memory_pool
    data = np.arange(1 << 18, dtype=np.float32)
    with tc.DeviceBuffer.from_host(data, device=device) as live:
        spare = tc.DeviceBuffer.allocate(1 << 24, device=device)
        spare.free()
        device.synchronize()
        pool.trim(0)
        assert pool.reserved_bytes >= live.nbytes
        np.testing.assert_array_equal(live.to_numpy(np.float32, data.size), data)
    with pytest.raises(tc.WrongTypeError, match=r"keep_bytes=-1"):
        pool.trim(-1)
