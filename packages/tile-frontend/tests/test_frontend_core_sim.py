"""tile.frontend's device storage over the real tile.core and an asynchronous driver simulator (no GPU needed).

test_frontend_gpu_path.py runs the launch path against stand-ins for tile.core whose work is done at once; here the
storage, DLPack exports, loans and frees use tile.core's own ``Device``/``DeviceBuffer``/``DeviceView`` over
``tile.core.testing``, whose streams keep work queued until something synchronizes them. "Another library" is
played by work queued straight on the simulated driver, on a stream of its own, through the exported pointer, as
torch or cupy would. The mutant each test was seen to catch is noted in it. The same promises are checked on the
H100 by test_frontend_gpu.py.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
import tile.frontend as tile
from tile.core.testing import SimDriver, simulated
from tile.frontend import f32


@pytest.fixture(params=[1, 2], ids=lambda seed: f"seed{seed}")
def sim(request: pytest.FixtureRequest) -> Iterator[SimDriver]:
    with simulated(asynchronous=True, seed=request.param) as driver:
        driver.eagerness = 0.0  # the other library's work is slow: nothing runs before a synchronization needs it
        yield driver
        _STREAMS.clear()
        gc.collect()
    assert driver.bugs == [], driver.bugs


def device_tensor(values: np.ndarray[Any, Any]) -> tile.Tensor:
    return tile.from_numpy(values, device=tc.Device(0))


_STREAMS: list[tc.Stream] = []


def foreign_fill(sim: SimDriver, ptr: int, count: int, value: float) -> int:
    """Another library fills ``count`` float32 at ``ptr`` on its own stream (queued, not run); returns the stream."""
    stream = tc.Stream(tc.Device(0))
    _STREAMS.append(stream)  # the library keeps its stream; the simulator drains it before it goes
    bits = int(np.array(value, np.float32).view(np.uint32))
    sim.cuMemsetD32Async(ptr, bits, count, stream.handle)
    assert sim.queues[stream.handle], "the fill ran at once: the simulator is not asynchronous"
    return stream.handle


def test_a_partition_after_an_export_waits_for_the_consumers_queued_work(sim: SimDriver) -> None:
    """Mutant killed: ``Storage.settle`` not synchronizing the device: the partition (and the read after it) sees
    the memory before the other library's queued fill."""
    t = device_tensor(np.arange(16, dtype=np.float32))
    consumer = t.__dlpack__(max_version=(1, 0))
    stream = foreign_fill(sim, t.data_ptr(), 16, 7.0)
    del consumer
    t = t.partition([16]).unpartition()
    assert not sim.queues[stream], "Tile wrote the memory while the consumer's work was still queued"
    np.testing.assert_array_equal(t.to_numpy(), np.full(16, 7, np.float32))


def test_a_reclaimed_loan_sees_the_borrowers_queued_writes(sim: SimDriver) -> None:
    """``lend()`` hands the memory out writable; ``reclaim()`` takes it back only after the borrower's queued work.
    Mutant killed: ``Storage.settle`` not synchronizing (the reclaimed tensor reads zeros)."""
    t = tile.zeros(f32, [32], device=tc.Device(0))
    ptr = t.data_ptr()
    lent = t.lend()
    writer = lent.__dlpack__(max_version=(1, 0))
    foreign_fill(sim, ptr, 32, 3.0)
    del writer
    back = lent.reclaim()
    np.testing.assert_array_equal(back.to_numpy(), np.full(32, 3, np.float32))


def test_a_free_after_an_export_waits_for_the_consumers_queued_work(sim: SimDriver) -> None:
    """Mutant killed: ``Storage._drop`` freeing without ``settle()``: the stream-ordered free then runs while the
    consumer's fill is still queued (``sim.bugs`` notes it)."""
    u = device_tensor(np.zeros(64, np.float32))
    buffer = u._storage.buffer
    reader = u.__dlpack__(max_version=(1, 0))
    stream = foreign_fill(sim, u.data_ptr(), 64, 1.0)
    u.free()
    assert buffer is not None
    assert not buffer.closed  # the consumer still holds it
    del reader
    assert buffer.closed
    sim.drain_all()
    assert sim.bugs == [], sim.bugs
    assert not sim.queues[stream]


def _queued_free(sim: SimDriver, *, ready: bool) -> tuple[tc.DeviceBuffer, int]:
    """A tile.core buffer freed after another library's fill that is still queued (its free waits for the fill)."""
    buffer = tc.DeviceBuffer.allocate(4096, ready=ready)  # not ready: home and free on the device's default stream
    stream = foreign_fill(sim, buffer.ptr, 1024, 2.0)
    buffer.record_use(tc.Stream.borrow(stream, unchecked=True))
    buffer.free()
    return buffer, stream


def test_new_tensors_never_wait_for_queued_frees_or_the_work_they_follow(sim: SimDriver) -> None:
    """``tile.empty`` / ``zeros`` / ``from_numpy`` / ``.to`` make memory usable by any stream before the tensor exists,
    waiting only for their own allocation and copy: the other library's fill, and the free queued after it, stay
    queued. Mutant killed: ``_device.allocate`` allocating on the default stream and synchronizing it (the old way):
    the synchronize runs the free queued there, hence the fill it waits for."""
    device = tc.Device(0)
    _, stream = _queued_free(sim, ready=False)
    _, other = _queued_free(sim, ready=True)
    made = [
        tile.empty(f32, [64], device=device),
        tile.zeros(f32, [64], device=device),
        device_tensor(np.arange(8, dtype=np.float32)),
    ]
    made.append(made[2].to(device))
    assert sim.queues[stream], "making a tensor waited for a free queued on the default stream (and its fill)"
    assert sim.queues[other], "making a tensor waited for a ready buffer's queued free (and its fill)"
    assert sim.kinds("free") == []
    np.testing.assert_array_equal(made[3].to_numpy(), np.arange(8, dtype=np.float32))
    for t in made:
        t.free()
    sim.drain_all()
    default, private = device.default_stream.handle, device._private_stream
    # tile.core's unready buffer on the default stream; every other (the frontend's all ready) on the private ones
    assert {e[2] for e in sim.kinds("free")} == {default, private("free").handle}
    assert {e[2] for e in sim.kinds("alloc")} == {default, private("alloc").handle}
    copies = {e[5] for e in sim.kinds("copy")}
    assert copies == {private("home").handle}, "the frontend's copies went to a stream that carries frees"
