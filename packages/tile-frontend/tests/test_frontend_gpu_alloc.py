"""GPU: making a device tensor never waits for queued frees or the kernels they follow (tile.core ready allocations).

The pending work is a gate (``cuStreamWaitValue32`` on a device word the test writes), so it stays pending exactly as
long as the test needs; a timer opens it after ``_SAFETY_S`` so a regression (an allocation that waits for the free
queued behind the gate) shows as a slow allocation instead of a hang. Run with the GPU batch
(``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend -m gpu``).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc
import tile.frontend as tile
from tile.frontend import f32

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
_SAFETY_S = 5.0
_FAST_S = 0.05  # far above a tensor's own allocation and copy, far below the safety timer


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _gate_closed_on(stream: tc.Stream) -> Callable[[], None]:
    """Hold ``stream`` at a device word until the returned opener writes it (idempotent)."""
    device = stream.device
    flag = tc.DeviceBuffer.allocate(4, device=device, ready=True)
    flag.fill(0)
    d = tb.driver()
    geq = int(d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ.value)
    tb.check(d.cuStreamWaitValue32(stream._raw, d.CUdeviceptr(flag.ptr), 1, geq), "cuStreamWaitValue32")
    flag.record_use(stream)
    opener, lock, done = device.create_stream(), threading.Lock(), [False]

    def open_gate() -> None:
        with lock:
            if not done[0]:
                done[0] = True
                tb.check(d.cuStreamWriteValue32(opener._raw, d.CUdeviceptr(flag.ptr), 1, 0), "cuStreamWriteValue32")
                opener.synchronize()

    return open_gate


def test_new_tensors_do_not_wait_for_a_pending_kernel_or_the_frees_behind_it() -> None:
    device = tc.Device(0)
    work = device.create_stream()
    open_gate = _gate_closed_on(work)
    # Frees queued behind the gate: one of an unready buffer on the default stream, one of a ready buffer.
    for ready in (False, True):
        behind = tc.DeviceBuffer.allocate(1 << 20, device=device, ready=ready)
        behind.fill(1, stream=work, sync=False)
        behind.free()
    source = tile.arange(f32, 1024, device=device)
    timer = threading.Timer(_SAFETY_S, open_gate)
    timer.start()
    times: dict[str, float] = {}
    made: list[tile.Tensor] = []
    try:
        makers: list[tuple[str, Callable[[], tile.Tensor]]] = [
            ("tile.empty", lambda: tile.empty(f32, [1 << 16], device=device)),
            ("tile.zeros", lambda: tile.zeros(f32, [1 << 16], device=device)),
            ("tile.from_numpy", lambda: tile.from_numpy(np.arange(256, dtype=np.float32), device=device)),
            ("Tensor.to", lambda: source.to(device)),
        ]
        for name, make in makers:
            start = time.perf_counter()
            made.append(make())
            times[name] = time.perf_counter() - start
        start = time.perf_counter()
        read = source.to_numpy()
        times["Tensor.to_numpy"] = time.perf_counter() - start
        still_pending = not work.query()
    finally:
        open_gate()
        timer.cancel()
    work.synchronize()
    print("behind a pending kernel: " + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in times.items()))  # shown with -s
    assert still_pending, "the gate opened before the tensors were made: the test measured nothing"
    slow = {name: t for name, t in times.items() if t > _FAST_S}
    assert slow == {}, f"these waited for the pending kernel: {slow}"
    np.testing.assert_array_equal(read, np.arange(1024, dtype=np.float32))
    np.testing.assert_array_equal(made[1].to_numpy(), np.zeros(1 << 16, np.float32))
    np.testing.assert_array_equal(made[2].to_numpy(), np.arange(256, dtype=np.float32))
    np.testing.assert_array_equal(made[3].to_numpy(), np.arange(1024, dtype=np.float32))


def test_empty_launch_free_cycles_stay_flat_and_correct(k: ModuleType) -> None:
    device = tc.Device(0)
    pool = device.memory_pool
    gc.collect()
    device.synchronize()
    used, reserved = pool.used_bytes, pool.reserved_bytes
    n = 1 << 12
    x, y = tile.full(f32, [n], 1.5, device=device), tile.ones(f32, [n], device=device)
    for i in range(10_000):
        z, x, y = k.add(tile.empty(f32, [n], device=device).partition([1024]), x, y).sync()
        out = z.unpartition()
        if i % 1000 == 0:
            np.testing.assert_array_equal(out.to_numpy(), np.full(n, 2.5, np.float32))
        out.free()
    x.free()
    y.free()
    gc.collect()
    device.synchronize()
    grown = pool.reserved_bytes - reserved
    print(f"10k tile.empty/launch/free cycles: pool reserve grew {grown >> 20} MiB")  # shown with -s
    assert pool.used_bytes == used
    assert grown < 64 << 20, f"the pool grew {grown >> 20} MiB over 16 KiB cycles: freed memory is not reused"
