"""tile.core's GPU code paths run end to end against a simulated driver (no GPU needed).

The simulator (``tile.core.testing``) stands in for ``cuda.bindings.driver`` (and for the ``cuda.core`` entry
points tile.core uses: ``ObjectCode`` and ``Stream.from_handle``). Device memory is host memory, so copies, fills
and the vec_add kernel (launched through ``cuLaunchKernel``, its parameters read back from the ``kernelParams``
array) really move bytes; every driver call is logged, so tests can assert what the real driver would see: each
allocation freed exactly once, frees ordered after recorded uses, nothing freed on a capturing stream.
Work executes immediately here (the simulator's default mode), so the log order is the stream order; its
asynchronous mode runs tile.aio's and tile.frontend's ordering tests (test_aio_core_sim.py,
test_frontend_core_sim.py). The same behaviour is checked on the H100 by the ``gpu``-marked tests; this tier
catches logic errors before a GPU is involved.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as real

import tile.bindings as tb
import tile.core as tc
from tile.core import _stream
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin

OK = real.CUresult.CUDA_SUCCESS
SIGNATURE = VEC_ADD_SIGNATURE


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated() as driver:
        yield driver


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def test_device_and_context(sim: SimDriver) -> None:
    device = tc.Device(0)
    assert device is tc.Device(0)
    assert (device.name, device.arch, device.sm_count, device.l2_cache_size) == (
        "Simulated H100",
        "sm_90",
        132,
        50 << 20,
    )
    device.make_current()
    device.make_current()
    assert len(sim.kinds("set_current")) == 1
    threading.Thread(target=device.make_current).start()
    pool_settings = sim.kinds("pool_set")
    assert pool_settings == []
    _ = device.memory_pool
    assert sim.kinds("pool_set") == [
        ("pool_set", "CU_MEMPOOL_ATTR_RELEASE_THRESHOLD", 2**64 - 1),
        ("pool_set", "CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES", 0),  # no hidden cross-stream waits
    ]


def test_round_trip_fills_and_device_copies(sim: SimDriver) -> None:
    data = np.arange(256, dtype=np.float32)
    buffer = tc.DeviceBuffer.from_host(data)
    np.testing.assert_array_equal(buffer.to_numpy(np.float32), data)
    buffer.copy_from(np.full(4, -1, np.float32), offset=16)
    np.testing.assert_array_equal(buffer.view(np.float32, 8).to_numpy(), [0, 1, 2, 3, -1, -1, -1, -1])
    other = tc.DeviceBuffer.allocate(buffer.nbytes)
    for dtype, value in ((np.uint8, 7), (np.float16, 2.5), (np.int32, -3), (np.float64, 0.25)):
        buffer.view(dtype).fill(value)
        tc.copy(other, buffer)
        np.testing.assert_array_equal(other.view(dtype).to_numpy(), np.full(1024 // np.dtype(dtype).itemsize, value))
    buffer.free()
    other.free()
    assert sim.device_mem == {}


def test_each_allocation_is_freed_exactly_once(sim: SimDriver) -> None:
    explicit = tc.DeviceBuffer.allocate(64)
    with tc.DeviceBuffer.allocate(64) as scoped:
        pass
    dropped = tc.DeviceBuffer.allocate(64)
    explicit.free()
    with pytest.raises(tc.DoubleFreeError, match="was already freed: free each buffer once"):
        explicit.free()
    assert scoped.closed
    del dropped, explicit, scoped
    gc.collect()
    allocs, frees = sim.kinds("alloc"), sim.kinds("free")
    assert sorted(a[1] for a in allocs) == sorted(f[1] for f in frees)
    assert len(frees) == 3


def test_free_waits_for_uses_on_other_streams(sim: SimDriver) -> None:
    buffer = tc.DeviceBuffer.allocate(64)
    home = buffer.stream.handle
    other = tc.Stream()
    buffer.fill(1, stream=other, sync=False)
    buffer.free()
    records = {entry[1]: entry[2] for entry in sim.kinds("record")}
    waits = [entry for entry in sim.log if entry[0] in ("wait", "free")]
    used_event = next(
        event for event, stream in records.items() if stream == other.handle and ("wait", home, event) in waits
    )
    assert waits.index(("wait", home, used_event)) < waits.index(("free", buffer._ptr, home))
    assert ("wait", other.handle) == next(w for w in sim.kinds("wait") if w[1] == other.handle)[:2]


def test_a_free_waits_for_every_pending_use_however_many_were_recorded(
    sim: SimDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded uses are pruned as they complete (so a long-lived buffer's list stays short), never while pending.
    Mutant killed (scripts/mutation.py): the pruning in ``Uses.add_event`` keeping the completed events and
    dropping the pending ones (``not e.query()`` into ``e.query()``), after which the free no longer waited."""
    pending: set[int] = set()
    monkeypatch.setattr(
        sim, "cuEventQuery", lambda event: (real.CUresult.CUDA_ERROR_NOT_READY if int(event) in pending else OK,)
    )
    buffer = tc.DeviceBuffer.allocate(64)
    home = buffer.stream.handle
    streams = [tc.Stream() for _ in range(12)]
    for i, stream in enumerate(streams):
        buffer.record_use(stream)
        if i < 3:  # the first three uses are still running when the rest are recorded
            pending.add(sim.kinds("record")[-1][1])
    done = {
        event for event, stream in ((e[1], e[2]) for e in sim.kinds("record")) if stream in {s.handle for s in streams}
    }
    done -= pending
    buffer.free()
    free_at = sim.log.index(("free", buffer._ptr, home))
    waited = {entry[2] for entry in sim.log[:free_at] if entry[0] == "wait" and entry[1] == home}
    assert pending <= waited, "the free did not wait for a use still running"
    assert len(waited & done) < len(done), "completed uses were never pruned"


def test_from_host_returns_after_the_copy_by_default(sim: SimDriver) -> None:
    """``sync=True`` is the default: the host array may change as soon as the call returns. Mutant killed
    (scripts/mutation.py): ``from_host``'s ``sync`` defaulting to False (no stream synchronization)."""
    buffer = tc.DeviceBuffer.from_host(np.arange(4, dtype=np.float32))
    copies = [i for i, entry in enumerate(sim.log) if entry[:2] == ("copy", "HtoD")]
    syncs = [i for i, entry in enumerate(sim.log) if entry == ("sync", buffer.stream.handle)]
    assert copies, sim.log
    assert syncs, "from_host returned before its copy completed"
    assert syncs[-1] > copies[-1], "from_host returned before its copy completed"
    buffer.free()


def test_from_host_reads_read_only_arrays_and_sizes_an_empty_one_to_one_byte(sim: SimDriver) -> None:
    """``from_host`` only reads its array, so a read-only one is fine; an empty one still gets a real allocation
    (the driver refuses 0 bytes) of the smallest size. Mutants killed (scripts/mutation.py): the host region asked
    for writable, and the empty allocation made 2 bytes."""
    data = np.arange(6, dtype=np.int16)
    data.flags.writeable = False
    buffer = tc.DeviceBuffer.from_host(data)
    np.testing.assert_array_equal(buffer.to_numpy(np.int16), data)
    empty = tc.DeviceBuffer.from_host(np.zeros(0, np.float32))
    assert empty.nbytes == 1
    assert not sim.kinds("copy") or all(entry[4] > 0 for entry in sim.kinds("copy"))
    buffer.free()
    empty.free()


def test_frees_are_never_enqueued_on_a_capturing_stream(sim: SimDriver) -> None:
    stream, other = tc.Stream(), tc.Stream()
    buffer = tc.DeviceBuffer.allocate(64, stream=stream)
    buffer.fill(1, stream=other, sync=False)  # a use the free must wait for
    sim.capturing.add(stream.handle)
    mark = len(sim.log)
    buffer.free()
    assert [e for e in sim.log[mark:] if e[0] in ("free", "wait") and e[1] == stream.handle] == []
    assert sim.kinds("free") == []
    sim.capturing.clear()
    tc.DeviceBuffer.allocate(16).free()  # the next allocation drains deferred frees
    after = sim.log[mark:]
    free_at = after.index(("free", buffer._ptr, stream.handle))
    assert any(e[0] == "wait" and e[1] == stream.handle for e in after[:free_at])


def test_closed_home_stream_hands_frees_to_the_default_stream(sim: SimDriver) -> None:
    stream = tc.Stream()
    buffer = tc.DeviceBuffer.allocate(64, stream=stream)
    stream.close()
    final = stream._final
    assert final is not None
    buffer.free()
    default = tc.Device(0).default_stream.handle
    assert sim.log.index(("wait", default, final.handle)) < sim.log.index(("free", buffer._ptr, default))
    with pytest.raises(tc.StreamClosedError, match="was closed: create a new Stream"):
        stream.query()


def test_launch_prepared_and_checked(sim: SimDriver, vec_add: tc.Function) -> None:
    n = 300
    x = tc.DeviceBuffer.from_host(np.arange(n, dtype=np.float32))
    y = tc.DeviceBuffer.from_host(np.ones(n, np.float32))
    z = tc.DeviceBuffer.allocate(4 * n)
    args = [x, n, 1, y, n, 1, z, n, 1]
    tc.launch(vec_add, 3, 1, args, signature=SIGNATURE)
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(n) + 1)
    step = tc.prepare(vec_add, 3, 1, [z, n, 1, y, n, 1, z, n, 1], signature=SIGNATURE)
    step()
    step()
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(n) + 3)
    assert vec_add.attributes["num_regs"] == 24
    y.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        step()
    launches = len(sim.kinds("launch"))
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):  # the checked launch's packer tests liveness too
        tc.launch(vec_add, 3, 1, [z, n, 1, y, n, 1, z, n, 1], signature=SIGNATURE)
    with pytest.raises(tc.LaunchArgumentError, match="takes 9 parameters"):
        tc.launch(vec_add, 3, 1, args[:6], signature=SIGNATURE[:6])
    with pytest.raises(tb.CudaError, match="CUDA_ERROR_NOT_FOUND"):
        vec_add.module.function("missing")
    assert len(sim.kinds("launch")) == launches


def test_cross_stream_launch_is_ordered_and_tracked(sim: SimDriver, vec_add: tc.Function) -> None:
    z = tc.DeviceBuffer.allocate(512)
    other = tc.Stream()
    step = tc.prepare(vec_add, 1, 1, [z, 128, 1, z, 128, 1, z, 128, 1], signature=SIGNATURE, stream=other)
    waits_before = len(sim.kinds("wait"))
    step()
    z.free()
    assert ("wait", z.stream.handle) in [w[:2] for w in sim.kinds("wait")[waits_before:]]
    assert sim.kinds("launch")[-1][1] == other.handle


def test_a_checked_cross_stream_launch_is_ordered_and_tracked(sim: SimDriver, vec_add: tc.Function) -> None:
    # tc.launch does prepare's checks and tracking without making a PreparedLaunch: the same events and waits.
    z = tc.DeviceBuffer.allocate(512)
    other = tc.Stream()
    tc.launch(vec_add, 1, 1, [z, 128, 1, z, 128, 1, z, 128, 1], signature=SIGNATURE, stream=other)
    assert sim.kinds("launch")[-1][1] == other.handle
    assert len(z._uses.events) == 1
    assert sim.kinds("record")[-1][2] == other.handle  # the launch's event, recorded after it on its stream
    sim.capturing.add(other.handle)
    tc.launch(vec_add, 1, 1, [z, 128, 1, z, 128, 1, z, 128, 1], signature=SIGNATURE, stream=other)
    sim.capturing.clear()
    assert len(z._uses.events) == 1  # none recorded inside the capture
    waits_before = len(sim.kinds("wait"))
    z.free()
    assert ("wait", z.stream.handle) in [w[:2] for w in sim.kinds("wait")[waits_before:]]


def test_a_checked_launch_after_a_good_one_still_refuses_bad_arguments(sim: SimDriver, vec_add: tc.Function) -> None:
    # The layout check of the previous launch is reused only for the same kinds and kernel layout.
    z = tc.DeviceBuffer.allocate(512)
    args = [z, 128, 1, z, 128, 1, z, 128, 1]
    tc.launch(vec_add, 1, 1, args, signature=SIGNATURE)
    launches = len(sim.kinds("launch"))
    wide = ("ptr", "i64", "i32", *SIGNATURE[3:])
    with pytest.raises(tc.LaunchArgumentError, match="argument 1 is i64"):
        tc.launch(vec_add, 1, 1, args, signature=wide)
    with pytest.raises(tc.LaunchArgumentError, match="takes 9 parameters"):
        tc.launch(vec_add, 1, 1, args[:6], signature=SIGNATURE[:6])
    with pytest.raises(tc.LaunchArgumentError, match="9 kinds but 8 arguments"):
        tc.launch(vec_add, 1, 1, args[:8], signature=SIGNATURE)
    with pytest.raises(tc.LaunchArgumentError, match="grid"):
        tc.launch(vec_add, 0, 1, args, signature=SIGNATURE)
    tc.launch(vec_add, 1, 1, args, signature=SIGNATURE)
    assert len(sim.kinds("launch")) == launches + 1
    vec_add.module.unload()
    with pytest.raises(tc.UseAfterFreeError, match="unloaded module"):
        tc.launch(vec_add, 1, 1, args, signature=SIGNATURE)
    assert len(sim.kinds("launch")) == launches + 1


def test_cross_stream_launch_during_a_capture_records_no_event(sim: SimDriver, vec_add: tc.Function) -> None:
    z = tc.DeviceBuffer.allocate(512)
    other = tc.Stream()
    step = tc.prepare(vec_add, 1, 1, [z, 128, 1, z, 128, 1, z, 128, 1], signature=SIGNATURE, stream=other)
    records_before = len(sim.kinds("record"))
    sim.capturing.add(other.handle)
    for _ in range(12):  # more than the 8 events after which tracking queries old ones
        step()
    tc.copy(z, np.zeros(128, np.float32), stream=other, sync=False)
    sim.capturing.clear()
    assert len(sim.kinds("record")) == records_before
    assert z._uses.events == []
    step()  # outside the capture the launch is tracked again
    assert len(z._uses.events) == 1
    z.free()


def test_first_use_inside_a_capture_waits_for_the_allocation_on_the_host(sim: SimDriver, vec_add: tc.Function) -> None:
    z = tc.DeviceBuffer.allocate(512)
    other = tc.Stream()
    sim.capturing.add(other.handle)
    waits_before = len(sim.kinds("wait"))
    step = tc.prepare(vec_add, 1, 1, [z, 128, 1, z, 128, 1, z, 128, 1], signature=SIGNATURE, stream=other)
    sim.capturing.clear()
    assert len(sim.kinds("wait")) == waits_before  # a wait would tie the capture to uncaptured work
    home_records = [r[1] for r in sim.kinds("record") if r[2] == z.stream.handle]
    assert ("event_sync", home_records[-1]) in sim.log
    assert sim.mode() == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL  # restored after the wait
    step()
    assert len(sim.kinds("wait")) == waits_before  # ordered once per stream
    z.free()


def test_alloc_launch_free_cycles_stay_flat(sim: SimDriver, vec_add: tc.Function) -> None:
    x = tc.DeviceBuffer.from_host(np.ones(128, np.float32))
    for _ in range(500):
        z = tc.DeviceBuffer.allocate(512)
        tc.launch(vec_add, 1, 1, [x, 128, 1, x, 128, 1, z, 128, 1], signature=SIGNATURE)
        z.free()
    assert list(sim.device_mem) == [x._ptr]
    assert tc.Device(0).memory_pool.used_bytes == 512


def test_streams_events_and_borrowing(sim: SimDriver) -> None:
    assert tc.Device(0).stream_priorities == (0, -5)
    stream = tc.Stream(priority=-1)
    assert stream.priority == -1
    start, end = tc.Event(timing=True), tc.Event(timing=True)
    stream.record(start)
    stream.record(end)
    # the driver is asked for (start, end) in that order: end - start, positive (swapped arguments give -0.5)
    assert end.elapsed_ms(start) == 0.5
    assert start.elapsed_ms(end) == -0.5
    with pytest.raises(tc.StateError, match="never recorded"):
        tc.Event(timing=True).elapsed_ms(start)
    borrowed = tc.Stream.borrow(stream.handle, unchecked=True)
    assert (borrowed.owned, borrowed.handle) == (False, stream.handle)
    borrowed.close()
    assert ("stream_destroy", stream.handle) not in sim.log
    assert tc.Stream.borrow(SimpleNamespace(__cuda_stream__=lambda: (0, stream.handle))).handle == stream.handle
    stream.close()
    assert ("stream_destroy", stream.handle) in sim.log


def test_pinned_memory_outlives_its_views_and_waits_for_uses(sim: SimDriver) -> None:
    pinned = tc.PinnedBuffer.empty((4, 4), np.float32)
    array = pinned.array
    array[:] = 2.0
    buffer = tc.DeviceBuffer.allocate(64)
    buffer.copy_from(pinned, stream=tc.Stream(), sync=False)
    np.testing.assert_array_equal(buffer.to_numpy(np.float32), np.full(16, 2.0))
    address = pinned.ptr
    del pinned
    gc.collect()
    assert ("free_host", address) not in sim.log  # the numpy view keeps it alive
    del array
    gc.collect()
    assert ("free_host", address) not in sim.log  # a finalizer never blocks: released at the next safe point
    tc.Device(0).synchronize()
    assert ("free_host", address) in sim.log


def test_dlpack_export_blocks_explicit_free(sim: SimDriver) -> None:
    buffer = tc.DeviceBuffer.from_host(np.arange(8, dtype=np.int32))
    capsule = buffer.view(np.int32).__dlpack__(stream=1)
    with pytest.raises(tc.StateError, match="DLPack"):
        buffer.free()
    assert sim.kinds("free") == []
    del capsule
    gc.collect()
    buffer.free()
    assert ("record", next(iter(r[1] for r in sim.kinds("record") if r[2] == 1)), 1) in sim.log


def test_invalidation_counter_moves_on_free_and_close(sim: SimDriver) -> None:
    before = _stream.invalidation[0]
    tc.DeviceBuffer.allocate(8).free()
    tc.Stream().close()
    assert _stream.invalidation[0] == before + 2


def test_copy_and_fill_defaults_start_at_byte_0_and_return_after_the_work(sim: SimDriver) -> None:
    """What a call without the optional arguments promises: the whole buffer from byte 0, done when the call
    returns (``sync=True``). Mutants killed (scripts/mutation.py): the defaults of ``copy_from``/``copy_to``/``fill``
    (``offset`` 1, ``sync`` False) and the element count of an offset view (``nbytes - offset`` into ``+``)."""
    buffer = tc.DeviceBuffer.allocate(16)
    home = buffer.stream.handle

    def synced(call: Any) -> bool:
        before = len(sim.log)
        call()
        return sim.log[-1] == ("sync", home) and len(sim.log) > before

    assert synced(lambda: buffer.copy_from(np.arange(16, dtype=np.uint8)))
    out = np.zeros(16, np.uint8)
    assert synced(lambda: buffer.copy_to(out))
    np.testing.assert_array_equal(out, np.arange(16))
    assert buffer.view(np.float32, offset=8).shape == (2,)
    np.testing.assert_array_equal(buffer.view(np.uint8, offset=8).to_numpy(), np.arange(8, 16))
    assert synced(lambda: buffer.fill(7))
    np.testing.assert_array_equal(buffer.to_numpy(), np.full(16, 7))
    buffer.free()


def test_a_buffer_that_was_never_made_frees_nothing(sim: SimDriver) -> None:
    """``DeviceBuffer()`` is refused, and collecting the half-made object frees nothing and invalidates no cached
    launch. Mutant killed (scripts/mutation.py): ``__del__`` reading a missing ``_freed`` as False."""
    before, frees = _stream.invalidation[0], len(sim.kinds("free"))
    with pytest.raises(TypeError, match=r"use DeviceBuffer\.allocate"):
        tc.DeviceBuffer()
    gc.collect()
    assert _stream.invalidation[0] == before
    assert len(sim.kinds("free")) == frees


def test_memory_and_streams_of_another_device_are_refused(sim: SimDriver, vec_add: tc.Function) -> None:
    sim.devices = 2
    first, second = tc.Device(0), tc.Device(1)
    assert first is not second
    remote = tc.DeviceBuffer.allocate(512, device=second)
    local = tc.DeviceBuffer.allocate(512, device=first)
    assert remote.stream.device is second
    launches = len(sim.kinds("launch"))
    with pytest.raises(tc.WrongDeviceError, match="argument 0 lives on device 1 but the launch is on device 0"):
        tc.launch(vec_add, 1, 1, [remote, 128, 1, local, 128, 1, local, 128, 1], signature=SIGNATURE)
    with pytest.raises(tc.WrongDeviceError, match="belongs to device 1"):
        tc.DeviceBuffer.allocate(64, device=first, stream=remote.stream)
    with pytest.raises(tc.WrongDeviceError, match="stream of one of them"):
        local.copy_from(np.zeros(4, np.uint8), stream=tc.Stream(second))
    assert len(sim.kinds("launch")) == launches
    assert sim.kinds("copy") == []
    tc.copy(local, remote)  # device to device across devices: a peer copy, with peer access enabled both ways
    assert sim.kinds("copy")[-1][1:4] == ("Peer", local._ptr, remote._ptr)
    assert len(sim.kinds("peer_access")) == 2
    assert sorted(entry[2] for entry in sim.kinds("pool_access")) == [[0], [1]]
    tc.copy(remote, local)  # enabled once per pair
    assert sim.kinds("copy")[-1][1:4] == ("Peer", remote._ptr, local._ptr)
    assert len(sim.kinds("peer_access")) == 2


def test_peer_copy_without_peer_access_is_staged_by_the_driver(sim: SimDriver) -> None:
    sim.devices, sim.peer_capable = 2, False
    first, second = tc.Device(0), tc.Device(1)
    remote = tc.DeviceBuffer.from_host(np.arange(16, dtype=np.uint8), device=second)
    local = tc.DeviceBuffer.allocate(16, device=first)
    assert not first.can_access_peer(second)
    assert not first.enable_peer_access(second)
    tc.copy(local, remote)
    assert sim.kinds("copy")[-1][1] == "Peer"
    assert sim.kinds("peer_access") == []
    np.testing.assert_array_equal(local.to_numpy(np.dtype(np.uint8), (16,)), np.arange(16, dtype=np.uint8))


class Producer:
    """A foreign DLPack producer that hands out a Tile view's memory (as torch would hand out its own)."""

    def __init__(self, view: tc.DeviceView) -> None:
        self.view = view

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.view.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.view.__dlpack_device__()


def test_dlpack_export_round_trips_through_cuda_core(sim: SimDriver) -> None:
    buffer = tc.DeviceBuffer.from_host(np.arange(24, dtype=np.float32), stream=tc.Stream())
    exported = tc.DeviceView(
        buffer.ptr, np.dtype(np.float32), (3, 4), (32, 4), device=buffer.device, owner=buffer, buffer=buffer
    )
    borrowed = tc.borrow(Producer(exported))
    assert (borrowed.ptr, borrowed.shape, borrowed.strides) == (buffer.ptr, (3, 4), (32, 4))
    assert borrowed.dtype == np.dtype(np.float32)
    assert borrowed.device is buffer.device
    assert borrowed.buffer is buffer  # Tile memory coming back is its buffer's: uses recorded, dies with it
    assert not borrowed.is_contiguous
    consumer = tc.Device(0).default_stream.handle
    recorded_on_home = {r[1] for r in sim.kinds("record") if r[2] == buffer.stream.handle}
    assert any(("wait", consumer, event) in sim.log for event in recorded_on_home)  # consumer ordered after producer
    assert consumer in buffer._foreign_streams  # and the buffer's free will wait for the consumer


def test_two_threads_freeing_one_buffer_free_it_once(sim: SimDriver, race: Any) -> None:
    from tile.core import _dlpack

    buffer = tc.DeviceBuffer.allocate(64)
    race.meet_in(_dlpack, "live_exports")  # read between the freed test and the free
    results = race.run(buffer.free)
    assert len(sim.kinds("free")) == 1, "the buffer's memory was freed twice"
    assert sorted(type(r).__name__ for r in results) == ["DoubleFreeError", "NoneType"]


def test_two_threads_closing_one_stream_destroy_it_once(sim: SimDriver, race: Any) -> None:
    stream = tc.Device(0).create_stream()
    race.meet_in(tc.Stream, "record")  # called between the closed test and the destroy
    results = race.run(stream.close)
    assert len(sim.kinds("stream_destroy")) == 1, "the stream was destroyed twice"
    assert results == [None, None]  # close is idempotent


def test_owning_handles_refuse_copies_and_pickling(sim: SimDriver) -> None:
    """copy.copy of a buffer would make a second owner: two frees of one allocation. Every owning handle refuses
    the copy protocols with a typed error; a Device names a GPU, so it is its own copy."""
    import copy
    import pickle

    buffer = tc.DeviceBuffer.from_host(np.arange(4, dtype=np.int32))
    stream = tc.Stream()
    handles = [buffer, buffer.view(np.int32), stream, stream.record(), tc.PinnedBuffer.empty((4,), np.float32)]
    handles += [tc.Device(0).memory_pool]
    for handle in handles:
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(tc.HandleCopyError, match="second owner") as info:
                attempt(handle)
            assert type(handle).__name__ in str(info.value)
    assert copy.copy(tc.Device(0)) is tc.Device(0)
    assert copy.deepcopy(tc.Device(0)) is tc.Device(0)
    buffer.free()
    assert len(sim.kinds("free")) == 1


def test_a_freed_buffer_refuses_new_uses_and_one_byte_is_a_size(sim: SimDriver) -> None:
    """Mutants killed (found by scripts/mutation.py): record_use not raising after the free (foreign work would be
    ordered against memory the pool already hands out again), allocation refusing 1 byte (the <= 0 check at <= 1)."""
    stream = tc.Stream()
    buffer = tc.DeviceBuffer.allocate(1)
    assert buffer.nbytes == 1
    buffer.record_use(stream)
    buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed: it cannot be used on"):
        buffer.record_use(stream)
    stream.close()


def test_an_allocation_while_another_stream_captures(sim: SimDriver) -> None:
    """A decode step captured as a graph allocates its temporaries while the stream captures; the driver refuses an
    allocation or a host wait in the capturing thread unless it is in relaxed mode, and the refusal invalidates the
    capture (seen on the H100: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from cuMemAllocFromPoolAsync, then from
    cuStreamSynchronize). Marked as capturing, the thread makes both calls relaxed and its mode comes back."""
    other = tc.Stream()
    sim.capturing.add(other.handle)
    tc.begin_thread_capture()  # what tile.aio's CUDA recorder does when it begins the capture
    try:
        assert tc.thread_is_capturing()
        z = tc.DeviceBuffer.allocate(256)
        assert sim.mode() == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        z.stream.synchronize()  # the host waits for the allocation (the frontend does): relaxed, this stream only
        assert ("sync", z.stream.handle) in sim.log
        with pytest.raises(tb.CudaError, match="CAPTURE_UNSUPPORTED"):
            other.synchronize()  # the capturing stream itself can never be waited for
        assert sim.mode() == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    finally:
        tc.end_thread_capture()
        sim.capturing.clear()
    assert not tc.thread_is_capturing()
    assert ("alloc", z.ptr, z.stream.handle) in sim.log
    z.free()
