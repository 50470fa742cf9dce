"""The driver calls a launch makes, counted on the simulated driver, and the orderings the fewer calls keep.

Each real driver call costs the host one to three microseconds, so the counts are part of a launch's price: a test
here fails when a change adds a call to a launch (docs/development.md, "Driver calls per launch", has the table).
Launches whose buffers live on another stream record the launching stream's one use mark (`Stream._record_mark`)
instead of a new event each; the asynchronous tests check that frees still wait for every launch that used the
memory, and that the result is right, under several seeds.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, counting_calls, simulated, sm90_cubin

N = 128


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated() as driver:
        yield driver


def _vec_add() -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def _args(x: tc.DeviceBuffer, y: tc.DeviceBuffer, z: tc.DeviceBuffer) -> list[object]:
    return [x, N, 1, y, N, 1, z, N, 1]


def test_a_launch_on_its_buffers_stream_is_one_driver_call(sim: SimDriver) -> None:
    """Checked and prepared launches on the buffers' own stream make one ``cuLaunchKernel`` and nothing else.
    Bug caught: a context make-current, capture query or event record on every launch."""
    vec_add = _vec_add()
    x, y, z = (tc.DeviceBuffer.from_host(np.ones(N, np.float32)) for _ in range(3))
    with counting_calls(sim) as calls:
        tc.launch(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE)
        prepared = tc.prepare(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE)
        calls.clear()
        for _ in range(5):
            tc.launch(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE)
            prepared()
    assert dict(calls) == {"cuLaunchKernel": 10}


def test_a_cross_stream_launch_records_the_streams_one_mark(sim: SimDriver) -> None:
    """A launch on another stream than its buffers' adds one capture query and one ``cuEventRecord`` of the
    stream's use mark: no event made or destroyed per launch, no completion queries, however many launches.
    Bug caught: an event created (and later destroyed) per launch, and the pruning queries of every held event
    once eight were pending (7.5 ``cuEventQuery`` a launch over ten launches before)."""
    vec_add = _vec_add()
    other = tc.Stream()
    x, y, z = (tc.DeviceBuffer.from_host(np.ones(N, np.float32)) for _ in range(3))
    with counting_calls(sim) as calls:
        tc.launch(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE, stream=other)
        prepared = tc.prepare(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE, stream=other)
        calls.clear()
        for _ in range(20):
            tc.launch(vec_add, 1, 1, _args(x, y, z), signature=VEC_ADD_SIGNATURE, stream=other)
            prepared()
    assert dict(calls) == {"cuLaunchKernel": 40, "cuStreamIsCapturing": 40, "cuEventRecord": 40}
    assert [len(b._uses.events) for b in (x, y, z)] == [1, 1, 1]
    assert x._uses.events[0] is other._mark


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("eagerness", [0.0, 0.3])
def test_frees_wait_for_every_cross_stream_launch_through_the_mark(seed: int, eagerness: float) -> None:
    """Buffers used on another stream, then freed without a host wait while the launches are still queued: each free
    waits for the last launch that used the buffer, including a buffer whose only use was the first launch (the
    mark it holds was re-recorded by the launches after it, which covers that use). Bugs caught: the mark not
    recorded (``_track`` skipped), and a second stream's mark taken for the first's (``add_event``'s identity test
    as ``True``): frees then run under the queued launches (``sim.bugs``)."""
    with simulated(asynchronous=True, seed=seed) as sim:
        sim.eagerness = eagerness
        vec_add = _vec_add()
        other = tc.Stream()
        first = tc.DeviceBuffer.from_host(np.full(N, 5, np.float32))
        y = tc.DeviceBuffer.from_host(np.ones(N, np.float32))
        z = tc.DeviceBuffer.from_host(np.zeros(N, np.float32))
        tc.launch(vec_add, 1, 1, _args(first, y, z), signature=VEC_ADD_SIGNATURE, stream=other)  # z = 5 + 1
        first.free()
        step = tc.prepare(vec_add, 1, 1, _args(z, y, z), signature=VEC_ADD_SIGNATURE, stream=other)
        for _ in range(30):
            step()  # z += 1
        lone = tc.DeviceBuffer.from_host(np.full(N, 2, np.float32))
        tc.launch(vec_add, 1, 1, _args(lone, lone, z), signature=VEC_ADD_SIGNATURE, stream=other)  # z = 4
        tc.launch(vec_add, 1, 1, _args(z, y, z), signature=VEC_ADD_SIGNATURE, stream=other)  # z = 5
        third = tc.Stream()
        tc.launch(vec_add, 1, 1, _args(y, y, lone), signature=VEC_ADD_SIGNATURE, stream=third)  # a second mark
        lone.free()
        y.free()
        del step
        tc.Device(0).default_stream.synchronize()  # the frees run now, each after the waits it enqueued
        other.synchronize()
        third.synchronize()
        np.testing.assert_array_equal(z.to_numpy(np.float32), np.full(N, 5, np.float32))
        z.free()
    assert sim.bugs == [], sim.bugs
