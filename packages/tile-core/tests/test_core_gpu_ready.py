"""GPU: ready allocations never wait for queued frees or the kernels those frees follow.

The stream is held back by a host function that waits on a gate the test opens only after the allocations were
timed, so the launch (and the free behind it) is pending while they run, whatever the host's and the GPU's speeds
(1 GiB fills, the first form, outran the host on an H200 machine; 4 GiB fills on another H200 host in 2026-11). An
allocation that waited for the free would wait for the gate: its time shows it (the gate gives up after 10 s).
Before ready allocations, the allocation's synchronize waited for that free.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import math
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

SIGNATURE = ("ptr", "i32", "i32") * 3
_FAST_S = 0.05  # far above an allocation's own cost (tens of microseconds), far below the gate's 10 s


_HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@contextlib.contextmanager
def held_back(stream: tc.Stream) -> Iterator[None]:
    """Hold ``stream``'s later work back until the block ends: a host function on it waits on a gate (10 s at most,
    so a test that went wrong does not hang) that the block's end opens; the stream is done after the block."""
    gate = threading.Event()

    def wait(_: object) -> None:  # runs on a driver thread, with no driver call
        gate.wait(10.0)

    fn = _HostFn(wait)  # kept alive until the stream ran it
    d = tb.driver()
    with stream.in_use() as raw:
        tb.check(d.cuLaunchHostFunc(raw, d.CUhostFn(ctypes.cast(fn, ctypes.c_void_p).value), 0), "cuLaunchHostFunc")
    try:
        yield
    finally:
        gate.set()
        stream.synchronize()
        del fn


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
    made: list[tc.DeviceBuffer] = []
    with held_back(work):
        tc.launch(vec_add, math.ceil(n / 128), 1, [x, n, 1, w, n, 1, z, n, 1], signature=SIGNATURE, stream=work)
        w.free()  # queued behind the launch, which waits for the gate
        times = [_timed(lambda: made.append(tc.DeviceBuffer.allocate(1 << 20, device=device, ready=True)))]
        times += [
            _timed(lambda: made.append(tc.DeviceBuffer.allocate(4096, device=device, ready=True))) for _ in range(50)
        ]
        times.append(_timed(lambda: made.append(tc.DeviceBuffer.from_host(np.ones(4096, np.uint8), ready=True))))
        still_pending = not work.query()
    gpu_summary.append(
        f"ready allocation behind a pending kernel: max {max(times) * 1e6:.0f} us, median "
        f"{sorted(times)[len(times) // 2] * 1e6:.0f} us"
    )
    # The wait first: an allocation that waited for the gate (10 s) also let the stream finish.
    assert max(times) < _FAST_S, f"a ready allocation waited {max(times):.3f} s: it waited for the pending kernel"
    assert still_pending, "the held-back stream ran before the allocations were timed: the test measured nothing"
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(n, dtype=np.float32) + 0.5)
    np.testing.assert_array_equal(made[-1].to_numpy(np.uint8), np.ones(4096, np.uint8))
    for buffer in (*made, x, z):
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
