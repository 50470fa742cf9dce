"""GPU: making a device tensor never waits for queued frees or the kernels they follow (tile.core ready allocations).

The pending work is ~0.3 s of 1 GiB fills queued on a stream, with frees behind them; the test checks the stream is
still busy after the tensors were made (or it measured nothing), and a regression (an allocation that waits for a
free queued behind the fills) shows as an allocation that slow. Run with the GPU batch
(``TILE_REQUIRE_GPU=1 pytest packages/tile-frontend -m gpu``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np
import pytest

import tile.core as tc
import tile.frontend as tile
from tile.frontend import f32

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]
_FAST_S = 0.05  # far above a tensor's own allocation and copy, far below the busy time


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def _busy(stream: tc.Stream, seconds: float = 0.3) -> tc.DeviceBuffer:
    """Queue about ``seconds`` of 1 GiB fills on ``stream`` (an H100/H200 writes ~3 TB/s); free the buffer after."""
    block = tc.DeviceBuffer.allocate(1 << 30, device=stream.device, ready=True)
    for i in range(int(seconds * 3000)):
        block.fill(i & 0xFF, stream=stream, sync=False)
    return block


def test_new_tensors_do_not_wait_for_a_pending_kernel_or_the_frees_behind_it() -> None:
    device = tc.Device(0)
    work = device.create_stream()
    filler = _busy(work)
    # Frees queued behind the fills: one of an unready buffer on the default stream, one of a ready buffer.
    for ready in (False, True):
        behind = tc.DeviceBuffer.allocate(1 << 20, device=device, ready=ready)
        behind.fill(1, stream=work, sync=False)
        behind.free()
    source = tile.arange(f32, 1024, device=device)
    times: dict[str, float] = {}
    made: list[tile.Tensor] = []
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
    work.synchronize()
    filler.free()
    print("behind a pending kernel: " + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in times.items()))  # shown with -s
    assert still_pending, "the fills ended before the tensors were made: the test measured nothing"
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
    settled = None
    for i in range(10_000):
        z, x, y = k.add(tile.empty(f32, [n], device=device).partition([1024]), x, y).sync()
        out = z.unpartition()
        if i % 1000 == 0:
            np.testing.assert_array_equal(out.to_numpy(), np.full(n, 2.5, np.float32))
        out.free()
        if i == 1000:  # earlier tests' garbage in this process (handles reaped late) is released by now
            settled = pool.used_bytes
    x.free()
    y.free()
    gc.collect()
    device.synchronize()
    grown = pool.reserved_bytes - reserved
    print(f"10k tile.empty/launch/free cycles: pool reserve grew {grown >> 20} MiB")  # shown with -s
    # Flat: nothing the cycles allocated is still held. The baseline may fall (not rise) while other tests' late
    # releases run, so the end is compared with the start and with the count after the first 1000 cycles (which
    # still held x and y, freed since).
    assert pool.used_bytes <= used, (pool.used_bytes, used)
    assert settled is not None
    assert pool.used_bytes < settled, (pool.used_bytes, settled)  # x and y are freed
    assert grown < 64 << 20, f"the pool grew {grown >> 20} MiB over 16 KiB cycles: freed memory is not reused"
