"""GPU: ready allocations never wait for queued frees or the kernels those frees follow.

The "long kernel" is ~0.3 s of 1 GiB fills queued on a stream before the launch, so the launch (and the free behind
it) stays pending while the allocations are timed; the test checks the stream is still busy afterwards, or it
measured nothing. Before ready allocations, the allocation's synchronize waited for that free, hence for the fills.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable

import numpy as np
import pytest

import tile.core as tc

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

SIGNATURE = ("ptr", "i32", "i32") * 3
_FAST_S = 0.05  # far above an allocation's own cost (tens of microseconds), far below the busy time


def busy(stream: tc.Stream, seconds: float = 0.3) -> tc.DeviceBuffer:
    """Queue about ``seconds`` of 4 GiB fills on ``stream`` (an H100/H200 writes 3-4 TB/s: ~1 ms each); free the
    buffer after. Each fill's enqueue costs the host ~0.2 ms on an H200 machine, so 1 GiB fills (~0.25 ms of GPU
    time) never built a backlog there: the GPU kept up with the host."""
    block = tc.DeviceBuffer.allocate(4 << 30, device=stream.device, ready=True)
    for i in range(int(seconds * 800)):
        block.fill(i & 0xFF, stream=stream, sync=False)
    return block


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
    filler = busy(work, 1.0)  # long enough on an H200, whose fills outran 0.3 s of this estimate
    tc.launch(vec_add, math.ceil(n / 128), 1, [x, n, 1, w, n, 1, z, n, 1], signature=SIGNATURE, stream=work)
    w.free()  # queued behind the launch, which waits for the fills
    made: list[tc.DeviceBuffer] = []
    times = [_timed(lambda: made.append(tc.DeviceBuffer.allocate(1 << 20, device=device, ready=True)))]
    times += [_timed(lambda: made.append(tc.DeviceBuffer.allocate(4096, device=device, ready=True))) for _ in range(50)]
    times.append(_timed(lambda: made.append(tc.DeviceBuffer.from_host(np.ones(4096, np.uint8), ready=True))))
    still_pending = not work.query()
    work.synchronize()
    gpu_summary.append(
        f"ready allocation behind a pending kernel: max {max(times) * 1e6:.0f} us, median "
        f"{sorted(times)[len(times) // 2] * 1e6:.0f} us"
    )
    assert still_pending, "the fills ended before the allocations were timed: the test measured nothing"
    assert max(times) < _FAST_S, f"a ready allocation waited {max(times):.3f} s: it waited for the pending kernel"
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(n, dtype=np.float32) + 0.5)
    np.testing.assert_array_equal(made[-1].to_numpy(np.uint8), np.ones(4096, np.uint8))
    for buffer in (*made, x, z, filler):
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
