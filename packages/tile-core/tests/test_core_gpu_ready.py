"""GPU: ready allocations never wait for queued frees or the kernels those frees follow.

The "long kernel" is a gate: a stream held by ``cuStreamWaitValue32`` on a device word until the test writes it, so
the launch behind it (and the free behind the launch) stays pending for as long as the test needs, with no timing
guess. Before ready allocations, the allocation's synchronize waited for that free, hence for the gate: a timer
opens the gate after ``_SAFETY_S`` so a regression shows as a slow allocation instead of a hang.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

SIGNATURE = ("ptr", "i32", "i32") * 3
_SAFETY_S = 5.0  # the gate opens by itself after this long (a regression then shows as allocations this slow)
_FAST_S = 0.05  # far above an allocation's own cost (tens of microseconds), far below the safety timer


class Gate:
    """A stream position that holds everything queued after it until :meth:`open`."""

    def __init__(self, device: tc.Device) -> None:
        self.flag = tc.DeviceBuffer.allocate(4, device=device, ready=True)
        self.flag.fill(0)
        self._opener = device.create_stream()
        self._lock = threading.Lock()
        self._open = False

    def close_on(self, stream: tc.Stream) -> None:
        d = tb.driver()
        geq = int(d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ.value)
        tb.check(d.cuStreamWaitValue32(stream._raw, d.CUdeviceptr(self.flag.ptr), 1, geq), "cuStreamWaitValue32")
        self.flag.record_use(stream)

    def open(self) -> None:
        with self._lock:
            if self._open:
                return
            self._open = True
            d = tb.driver()
            tb.check(d.cuStreamWriteValue32(self._opener._raw, d.CUdeviceptr(self.flag.ptr), 1, 0), "write")
            self._opener.synchronize()


def _timed(make: Callable[[], object]) -> float:
    start = time.perf_counter()
    make()
    return time.perf_counter() - start


def test_ready_allocations_do_not_wait_for_a_pending_kernel_or_the_free_behind_it(
    device: tc.Device, vec_add: tc.Function, gpu_summary: list[str]
) -> None:
    n = 1 << 12
    x = tc.DeviceBuffer.from_host(np.arange(n, dtype=np.float32), device=device, ready=True)
    w = tc.DeviceBuffer.from_host(np.full(n, 0.5, np.float32), device=device, ready=True)
    z = tc.DeviceBuffer.allocate(4 * n, device=device, ready=True)
    work = device.create_stream()
    gate = Gate(device)
    gate.close_on(work)
    tc.launch(vec_add, math.ceil(n / 128), 1, [x, n, 1, w, n, 1, z, n, 1], signature=SIGNATURE, stream=work)
    w.free()  # queued behind the launch, which waits at the gate
    timer = threading.Timer(_SAFETY_S, gate.open)
    timer.start()
    made: list[tc.DeviceBuffer] = []
    try:
        times = [_timed(lambda: made.append(tc.DeviceBuffer.allocate(1 << 20, device=device, ready=True)))]
        times += [
            _timed(lambda: made.append(tc.DeviceBuffer.allocate(4096, device=device, ready=True))) for _ in range(50)
        ]
        times.append(_timed(lambda: made.append(tc.DeviceBuffer.from_host(np.ones(4096, np.uint8), ready=True))))
        still_pending = not work.query()
    finally:
        gate.open()
        timer.cancel()
    work.synchronize()
    gpu_summary.append(
        f"ready allocation behind a pending kernel: max {max(times) * 1e6:.0f} us, median "
        f"{sorted(times)[len(times) // 2] * 1e6:.0f} us"
    )
    assert still_pending, "the gate opened before the allocations were timed: the test measured nothing"
    assert max(times) < _FAST_S, f"a ready allocation waited {max(times):.3f} s: it waited for the pending kernel"
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(n, dtype=np.float32) + 0.5)
    np.testing.assert_array_equal(made[-1].to_numpy(np.uint8), np.ones(4096, np.uint8))
    for buffer in (*made, x, z, gate.flag):
        buffer.free()


def test_memory_stays_flat_over_many_ready_alloc_launch_free_cycles(
    device: tc.Device, vec_add: tc.Function, gpu_summary: list[str]
) -> None:
    pool = device.memory_pool
    gc.collect()
    device.synchronize()
    used, reserved = pool.used_bytes, pool.reserved_bytes
    n = 1024
    x = tc.DeviceBuffer.from_host(np.ones(n, np.float32), device=device, ready=True)
    work = device.create_stream()
    for i in range(100_000):
        z = tc.DeviceBuffer.allocate(4 * n, device=device, ready=True)
        tc.launch(vec_add, n // 128, 1, [x, n, 1, x, n, 1, z, n, 1], signature=SIGNATURE, stream=work)
        if i % 10_000 == 0:
            np.testing.assert_array_equal(z.view(np.float32).to_numpy(stream=work), np.full(n, 2, np.float32))
        z.free()
    x.free()
    device.synchronize()
    grown = pool.reserved_bytes - reserved
    gpu_summary.append(f"100k ready alloc/launch/free cycles: pool reserve grew {grown >> 20} MiB")
    assert pool.used_bytes == used
    assert grown < 256 << 20, f"the pool grew {grown >> 20} MiB over 4 KiB cycles: frees are not being reused"
