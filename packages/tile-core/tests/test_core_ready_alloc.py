"""Ready allocations (``DeviceBuffer.allocate(..., ready=True)``) over the asynchronous driver simulator.

A ready allocation is complete when ``allocate`` returns, so any stream may use its plain address; the wait for it
must never wait for queued frees or the kernels those frees follow (what made every ``tile.empty`` drain the GPU).
Work stays queued until something synchronizes it (``eagerness`` 0), so the log shows exactly what each wait
drained. The mutant each test was seen to catch is noted in it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from cuda.bindings import driver as real

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated(asynchronous=True) as driver:
        driver.eagerness = 0.0  # the GPU is slow: nothing runs before a synchronization needs it
        yield driver
        driver.drain_all()
    assert driver.bugs == [], driver.bugs


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def _private(role: str) -> int:
    return tc.Device(0)._private_stream(role).handle


def _queued_launches(sim: SimDriver, stream: tc.Stream) -> int:
    return len(sim.queues.get(stream.handle, ()))


def test_a_ready_allocation_never_waits_for_queued_frees_or_their_kernels(sim: SimDriver, vec_add: tc.Function) -> None:
    """Mutant killed: the private free stream being the allocation stream (``_private_stream("free")`` returning
    the ``"alloc"`` one): the next allocation's synchronize then runs the free, hence the kernel it waits for."""
    x = tc.DeviceBuffer.from_host(np.ones(128, np.float32), ready=True)
    z = tc.DeviceBuffer.allocate(512, ready=True)
    work = tc.Stream()
    tc.launch(vec_add, 1, 1, [x, 128, 1, x, 128, 1, z, 128, 1], signature=VEC_ADD_SIGNATURE, stream=work)
    z.free()  # queued after the kernel that writes it
    assert _queued_launches(sim, work) > 0
    assert sim.kinds("launch") == []
    mark = len(sim.log)
    y = tc.DeviceBuffer.allocate(256, ready=True)
    assert sim.kinds("launch") == [], "the allocation waited for a queued kernel"
    assert sim.kinds("free") == [], "the allocation waited for a queued free"
    assert [e[0] for e in sim.log[mark:]] == ["alloc", "sync"]
    assert sim.log[mark:] == [("alloc", y.ptr, _private("alloc")), ("sync", _private("alloc"))]
    work.synchronize()
    sim.drain(_private("free"))
    assert [e[1] for e in sim.kinds("free")] == [z._ptr]
    np.testing.assert_array_equal(y.to_numpy(np.uint8), np.zeros(256, np.uint8))
    x.free()
    y.free()


_STREAM_AT = {"wait": 1, "launch": 1, "record": 2, "free": 2, "alloc": 2, "copy": 5, "memset": 4, "sync": 1}
"""Where each logged driver action names its stream."""


def _on(sim: SimDriver, stream: int) -> set[str]:
    return {e[0] for e in sim.log if e[0] in _STREAM_AT and e[_STREAM_AT[e[0]]] == stream}


def test_the_allocation_stream_carries_only_allocations_and_the_free_stream_only_frees(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Whatever runs (launches, copies, fills, DLPack exports to a consumer stream, frees), nothing but allocations
    reaches the allocation stream: a wait or a free there would make every later allocation wait for it."""
    consumer = tc.Stream()
    for _ in range(20):
        x = tc.DeviceBuffer.from_host(np.arange(128, dtype=np.float32), ready=True)
        z = tc.DeviceBuffer.allocate(512, ready=True)
        z.fill(0, sync=False)
        tc.launch(vec_add, 1, 1, [x, 128, 1, x, 128, 1, z, 128, 1], signature=VEC_ADD_SIGNATURE, stream=consumer)
        capsule = z.view(np.float32).__dlpack__(stream=consumer.handle)
        del capsule
        x.free()
        z.free()
    sim.drain_all()
    assert _on(sim, _private("alloc")) == {"alloc", "sync"}
    assert _on(sim, _private("free")) == {"wait", "free"}
    assert {e[2] for e in sim.kinds("alloc")} == {_private("alloc")}
    assert {e[2] for e in sim.kinds("free")} == {_private("free")}
    assert sim.device_mem == {}


def test_a_ready_free_waits_for_home_stream_work_it_never_recorded(sim: SimDriver) -> None:
    """Work on the buffer's home stream is not recorded as a use (stream order covered it when frees went there).
    Mutant killed: the free stream not waiting for the home stream (``target.wait(home)`` removed): the free runs
    while the fill is still queued (a simulator bug entry)."""
    buffer = tc.DeviceBuffer.allocate(1 << 12, ready=True)
    buffer.fill(7, sync=False)  # on buffer.stream, the device's default stream
    assert buffer._uses.events == []
    buffer.free()
    sim.drain(_private("free"))  # the GPU happens to reach the free stream first
    assert sim.bugs == []
    log = [e for e in sim.log if e[0] in ("memset", "free")]
    assert [e[0] for e in log] == ["memset", "free"]


def test_a_ready_free_waits_for_uses_recorded_on_other_streams(sim: SimDriver, vec_add: tc.Function) -> None:
    """Mutant killed: the recorded use events not waited for on the free stream. The launch stream waits once per
    buffer, for the home stream's work (see the data-ordering test below), never for the allocation stream."""
    x = tc.DeviceBuffer.from_host(np.ones(128, np.float32), ready=True)
    z = tc.DeviceBuffer.allocate(512, ready=True)
    work = tc.Stream()
    tc.launch(vec_add, 1, 1, [x, 128, 1, x, 128, 1, z, 128, 1], signature=VEC_ADD_SIGNATURE, stream=work)
    queued = sim.queues[work.handle]
    assert len([w for w in queued if w.waits_for is not None]) == 2, "one wait for each buffer's home stream"
    assert "wait" not in _on(sim, _private("alloc"))
    assert "record" not in _on(sim, _private("alloc"))
    z.free()
    x.free()
    sim.drain(_private("free"))
    assert sim.bugs == []
    kinds = [e[0] for e in sim.log if e[0] in ("launch", "free")]
    assert kinds == ["launch", "free", "free"]


def test_a_ready_free_is_deferred_while_its_home_or_a_consumer_stream_captures(sim: SimDriver) -> None:
    """Nothing is enqueued for a free while a stream it must follow captures (an event recorded in a capture would
    pull the free stream, and the free, into the user's graph). Mutant killed: ``_capturing`` always False."""
    home, consumer = tc.Stream(), tc.Stream()
    for capturing in (home, consumer):
        buffer = tc.DeviceBuffer.allocate(64, stream=home, ready=True)
        capsule = buffer.view().__dlpack__(stream=consumer.handle)
        del capsule
        sim.capturing.add(capturing.handle)
        queued = {stream: len(queue) for stream, queue in sim.queues.items()}
        buffer.free()
        assert {stream: len(queue) for stream, queue in sim.queues.items() if queue} == {
            stream: n for stream, n in queued.items() if n
        }, "something was enqueued for a free while a stream it follows captures"
        sim.capturing.clear()
        tc.DeviceBuffer.allocate(16, ready=True).free()  # the next allocation drains deferred frees
        sim.drain_all()
        assert ("free", buffer._ptr, _private("free")) in sim.log


def test_a_consumer_on_the_legacy_stream_during_another_capture_defers_the_free(
    sim: SimDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legacy NULL stream answers CAPTURE_IMPLICIT while another stream captures (global mode): no event can be
    recorded there, so the free waits until the capture is over instead of skipping the consumer."""
    buffer = tc.DeviceBuffer.allocate(64, ready=True)
    capsule = buffer.view().__dlpack__(stream=1)  # the legacy default stream
    del capsule
    is_capturing = sim.cuStreamIsCapturing

    def implicit(stream: object) -> tuple[object, object]:
        if int(stream) == 1:  # type: ignore[call-overload]  # a CUstream
            return real.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, None
        return is_capturing(stream)

    monkeypatch.setattr(sim, "cuStreamIsCapturing", implicit)
    buffer.free()
    assert not sim.queues.get(_private("free")), "the free went ahead without waiting for the consumer"
    monkeypatch.setattr(sim, "cuStreamIsCapturing", is_capturing)
    tc.DeviceBuffer.allocate(16, ready=True).free()
    sim.drain_all()
    assert ("free", buffer._ptr, _private("free")) in sim.log


def test_a_ready_allocation_while_this_thread_captures(sim: SimDriver) -> None:
    """A captured step's temporaries: the allocation and its wait run relaxed (thread-local mode refuses them)."""
    other = tc.Stream()
    sim.capturing.add(other.handle)
    tc.begin_thread_capture()
    try:
        z = tc.DeviceBuffer.allocate(256, ready=True)
        assert sim.mode() == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        z.free()
    finally:
        tc.end_thread_capture()
        sim.capturing.clear()
    assert ("sync", _private("alloc")) in sim.log
    sim.drain_all()
    assert ("free", z._ptr, _private("free")) in sim.log


def test_ready_alloc_launch_free_cycles_stay_flat(sim: SimDriver, vec_add: tc.Function) -> None:
    x = tc.DeviceBuffer.from_host(np.ones(128, np.float32), ready=True)
    work = tc.Stream()
    for i in range(300):
        z = tc.DeviceBuffer.allocate(512, ready=True)
        tc.launch(vec_add, 1, 1, [x, 128, 1, x, 128, 1, z, 128, 1], signature=VEC_ADD_SIGNATURE, stream=work)
        z.free()
        if i % 50 == 49:
            work.synchronize()
            sim.drain(_private("free"))
            assert list(sim.device_mem) == [x._ptr]
    assert sim.bugs == []
    x.free()


def test_a_ready_free_after_an_idle_home_stream_queues_the_free_alone(sim: SimDriver) -> None:
    """The common frontend free (its copies synchronized long ago) costs one query and the free: no event recorded
    on the home stream and waited for. Mutant killed: the home-stream wait made unconditionally."""
    buffer = tc.DeviceBuffer.from_host(np.arange(64, dtype=np.float32), ready=True)  # synchronized: home is idle
    records = len([e for e in sim.pending() if e.record is not None]) + len(sim.kinds("record"))
    buffer.free()
    queued = list(sim.queues.get(_private("free"), ()))
    assert len(queued) == 1
    assert queued[0].waits_for is None
    assert len([e for e in sim.pending() if e.record is not None]) + len(sim.kinds("record")) == records


def test_another_stream_is_ordered_after_what_the_home_stream_queued_for_a_ready_buffer(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Review 13 (left open there, closed here): a ready buffer skipped the once-per-stream ordering after its home
    stream, so a copy queued there (``copy_from(pinned, sync=False)``, ``from_host(..., sync=False)``) and a launch
    on another stream right after could run in either order: the kernel could read the buffer before the copy
    landed (a data race in safe tile.core code). The first use on each other stream now waits for an event recorded
    on the home stream, as for any buffer. Mutant killed: ``_before_use`` returning early for ready buffers."""
    staged = tc.PinnedBuffer.allocate(512)
    staged.array.view(np.float32)[:] = np.arange(128, dtype=np.float32)
    x = tc.DeviceBuffer.allocate(512, ready=True)
    x.copy_from(staged, sync=False)  # queued on x's home stream
    y = tc.DeviceBuffer.from_host(np.ones(128, np.float32), ready=True)
    z = tc.DeviceBuffer.allocate(512, ready=True)
    work = tc.Stream()
    mark = len(sim.log)
    tc.launch(vec_add, 1, 1, [x, 128, 1, y, 128, 1, z, 128, 1], signature=VEC_ADD_SIGNATURE, stream=work)
    work.synchronize()
    log = sim.log[mark:]
    launch = log.index(("launch", work.handle, (1, 1, 1)))
    homes = {e[1] for e in log[:launch] if e[0] == "record" and e[2] == x.stream.handle}
    assert any(e[0] == "wait" and e[1] == work.handle and e[2] in homes for e in log[:launch]), log
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(128, dtype=np.float32) + 1)
    for buffer in (x, y, z):
        buffer.free()
    del staged  # pinned memory is released by its finalizer, after its recorded uses
