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
