"""Review 16: an adversarial look, from safe code only, at what was merged after review 15 (the compiled relaunch of
tile.core's prepared launches, ``pack_launch``'s as-is ints and DeviceBuffer shortcut, the cached signature, the
deferred finalizers of ``tile.core._reaper``, the ``unchecked=True`` opt-out for raw addresses, the 32-bit unravel of
own-grid ``tiles()`` walks, the fused GEMV forms and the multi-row ``qkv_prep_rows``). The tile.core tests run its GPU
code paths on the CPU against the asynchronous driver simulator (``tile.core.testing``): work stays queued until
something waits for it, and ``sim.bugs`` records work that runs on freed memory. Each hole's test names it, failed
before its fix, and asserts the typed error.

Holes found and fixed:

- a view made over a Tile buffer's view (``DeviceView(addr, ..., owner=buffer.view())``, the checked derivation review
  15 added for borrowed arrays) was checked to lie inside the view, but lost the buffer: its ``buffer`` was None, so
  after ``buffer.free()`` its ``ptr`` still answered, ``fill``/``copy_from`` wrote the freed block (which the pool hands
  the next allocation: another buffer's data was overwritten), a launch given it packed it as foreign memory (no
  stream ordering after the allocation, no use recorded for the free to wait for) and its DLPack export was
  registered on the view, not the buffer (``free()`` succeeded under the consumer). A view derived from a buffer's
  view now belongs to that buffer.
- handles resurrected by a finalizer: a garbage cycle whose ``__del__`` keeps an object it holds brings it back after
  the collector ran the finalizers of all the garbage. A `PinnedBuffer` brought back had queued its release, and the
  next safe point freed the memory under its ``.array`` (safe numpy code then used freed host memory); a
  `DeviceBuffer` brought back had freed its memory (tile.core refused it, marked freed, but a tile.frontend tensor
  brought back with it kept a storage that called itself live, and the frontend launches a storage's address as is:
  a kernel given the tensor wrote memory the pool had handed to the next allocation). A finalizer that runs inside a
  garbage collection (``tile.core._reaper.collecting()``) now frees nothing: the release holds the handle and runs at
  a safe point once nothing else refers to it (pinned memory: always so, also waiting for uses recorded after the
  finalizer); a handle brought back simply stays allocated.
- tile.aio enqueued on a closed stream's handle: ``aio.host_call(fn).sync_on(ctx)`` for a context whose tile.core
  stream was closed called ``cuLaunchHostFunc`` on the destroyed handle (the driver may have given it to another
  stream since), and the work ran later; a graph launch and a capture used the same raw handle. They raise
  `StreamClosedError` before the driver now.
- ``tile.core.borrow(obj, stream=s)`` handed a closed ``s``'s handle to the producer's DLPack export as the consumer
  stream: the producer (a tile.frontend tensor, torch...) ordered its pending work on the destroyed stream, and a Tile
  producer kept the handle as a consumer stream its free records on. The stream must be an open tile.core Stream
  (an int was a bare AttributeError, now `WrongTypeError`).

Tried and found solid (tests below where cheap, else reasoned):

- ``pack_launch``'s as-is ints against ``pack_args`` at every kind's range ends (i8/u8/i16/u16/i32/u32/i64/u64),
  one past them, bools, numpy bools and ints, lying int subclasses, floats, strings, 2**70: the same bytes or the
  same `LaunchArgumentError`; its DeviceBuffer shortcut still refuses a freed buffer (``ptr``) and one of another
  device (it falls back to ``_pointer``; ``device`` is never None on the launch path). ``_LAST_SIGNATURE`` holds the
  tuple it compares by identity (no reuse of its address), caches only exact tuples of exact strs (a list is never
  cached, so mutating one cannot skip the check), and ``_LAST_CHECKED`` skips only a (kinds, layout) pair that passed.
- the C ``relaunch`` of a tile.core PreparedLaunch: exact type test, the same epoch comparison under the same
  ``use_lock``, the launch's own ``_shared`` (falls back to ``__call__`` when there are buffers of other streams to
  track, or when the epoch moved), the result checked by tile.bindings' ``check``; the lock is released on every path
  with the error kept. Both launch paths run every adversarial module (``TILE_PURE_PYTHON=1`` and the built
  extension).
- deferred releases: a release runs once, never inside a host function, and retries (never frees early) while a use
  is pending; the queue is swapped under its lock and drained on one thread at a time; a resurrected DeviceBuffer,
  Stream or Event whose finalizer ran refuses use (marked freed / closed); ``_is_owned`` is RLock's own test.
- the 32-bit unravel of an own-grid ``tiles()`` walk: it runs inside the walk's ``first < total`` test made in 64
  bits, on outputs that are partitioned (injective: at most reach + 1 <= 2**31 elements, hence tiles), so a grid
  larger than the tile count, another output sizing the grid, or a zero extent (no tiles: the test fails) cannot
  wrap a tile number; grouped orders keep 64 bits.
- the fused GEMV forms and ``qkv_prep_rows``: every kernel is a safe one (compiler-inserted guards), so a wrong
  config or shape can give a wrong result or a typed refusal, never an access outside; odd / zero N with swiglu, a
  NORM form without norm=, a split or FORM 0 config for a fused call, and ``start`` outside the cache or the RoPE
  tables are refused on the host.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tile.core as tc
from tile.core import _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin

U8 = np.dtype(np.uint8)


def _queued(sim: SimDriver, stream: tc.Stream) -> int:
    return len(sim.queues.get(stream.handle, ()))


# -- hole: a view of a buffer's view lost the buffer -----------------------------------------------------------------


def _derived(buffer: tc.DeviceBuffer, offset: int = 0, n: int = 64) -> tc.DeviceView:
    """A view made over a view of ``buffer`` (not ``buffer.view``): the derivation review 15 checks against the view."""
    whole = buffer.view(U8)
    return tc.DeviceView(whole.ptr + offset, U8, (n,), (1,), device=buffer.device, owner=whole)


def test_a_view_derived_from_a_buffer_view_dies_with_the_buffer(sim: SimDriver) -> None:
    """Hole: the derived view's ``ptr`` outlived ``buffer.free()``: its ``fill`` wrote the freed block, which the pool
    had handed to the next allocation (another buffer's data overwritten)."""
    buffer = tc.DeviceBuffer.allocate(64, ready=True)
    derived = _derived(buffer)
    assert derived.buffer is buffer
    buffer.free()
    victim = tc.DeviceBuffer.allocate(64, ready=True)  # the pool's next block: the one just freed
    victim.fill(1)
    with pytest.raises(tc.UseAfterFreeError, match="which was freed: keep the buffer alive"):
        derived.fill(7)
    with pytest.raises(tc.UseAfterFreeError, match="which was freed"):
        derived.ptr  # noqa: B018  # the property is what is attacked
    np.testing.assert_array_equal(victim.to_numpy(np.uint8, (64,)), np.ones(64, np.uint8))
    victim.free()


def test_a_launch_of_a_derived_view_is_a_use_of_its_buffer(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: a launch given the derived view packed it as foreign memory: the buffer's free, on its home stream, did
    not wait for the kernel queued on another stream (the simulator saw the kernel run on freed memory)."""
    buffer = tc.DeviceBuffer.allocate(512, ready=True)
    derived = tc.DeviceView(buffer.ptr, np.dtype(np.float32), (128,), (4,), device=buffer.device, owner=buffer.view(U8))
    other = tc.Stream()
    args = [derived, 128, 1] * 3
    tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)
    again = tc.prepare(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)
    again()
    buffer.free()  # stream-ordered after both kernels only if they were recorded as uses
    sim.drain(tc.Device(0)._private_stream("free").handle)  # the free first: it must wait for the kernels
    sim.drain_all()
    assert sim.bugs == [], sim.bugs
    assert again.buffers == (buffer,)
    with pytest.raises(tc.UseAfterFreeError, match="was freed; prepare with live buffers"):
        again()
    other.synchronize()


def test_a_derived_view_exported_through_dlpack_keeps_the_buffer_from_being_freed(sim: SimDriver) -> None:
    """Hole: the derived view's DLPack export was registered on the view, so ``buffer.free()`` succeeded while the
    consumer still held the memory."""
    buffer = tc.DeviceBuffer.allocate(64, ready=True)
    capsule = _derived(buffer, 16, 32).__dlpack__(stream=-1)
    with pytest.raises(tc.StateError, match="still viewed through DLPack"):
        buffer.free()
    assert not buffer.closed
    del capsule
    gc.collect()
    buffer.free()


# -- hole: pinned memory released under an array resurrected by a finalizer ------------------------------------------


class _Resurrector:
    """A garbage cycle whose finalizer keeps what it holds: everything it reaches outlives the collection, though the
    collector ran the finalizers of all of it (a PinnedBuffer's included) first."""

    def __init__(self, held: object, into: list[object]) -> None:
        self.held, self.into, self.cycle = held, into, self

    def __del__(self) -> None:
        self.into.append(self.held)


def test_pinned_memory_is_not_released_under_a_buffer_resurrected_by_a_finalizer(sim: SimDriver) -> None:
    """Hole: a PinnedBuffer held by a garbage cycle whose finalizer kept it: the collector ran the buffer's finalizer
    with the rest of the garbage, which queued the release, and the next safe point freed the memory under the buffer
    that came back (its ``.array`` then reads and writes freed host memory). The release now waits until nothing but
    the queue holds the buffer."""
    kept: list[object] = []
    pinned = tc.PinnedBuffer.allocate(64)
    pinned.array[:] = 5
    _Resurrector(pinned, kept)
    del pinned
    gc.collect()
    assert len(kept) == 1, "the finalizer did not run"
    tc.DeviceBuffer.allocate(8).free()  # a safe point
    tc.Device(0).synchronize()  # another
    assert not sim.kinds("free_host"), "pinned memory was released under a live buffer"
    back = kept.pop()
    assert isinstance(back, tc.PinnedBuffer)
    np.testing.assert_array_equal(back.array, np.full(64, 5, np.uint8))
    device, other = tc.DeviceBuffer.allocate(64, ready=True), tc.Stream()
    device.copy_to(back, stream=other, sync=False)  # a use after the finalizer ran: the release must wait for it too
    del back
    gc.collect()
    tc.DeviceBuffer.allocate(8).free()  # a safe point while the copy is queued
    assert _queued(sim, other), "the copy ran early"
    assert not sim.kinds("free_host"), "pinned memory was released under a queued copy"
    other.synchronize()  # the last reference is gone and the copy done: this safe point releases the memory
    assert len(sim.kinds("free_host")) == 1
    device.free()
    assert _reaper.pending() == 0


def test_a_device_buffer_resurrected_by_a_finalizer_stays_allocated(sim: SimDriver) -> None:
    """Hole (the same class): a DeviceBuffer kept by a finalizer of the garbage it was collected with had already run
    its own finalizer, which freed the memory: tile.core refused the buffer then (it was marked freed), but whatever
    held its address believed it live (see the next test). A buffer whose finalizer runs inside a collection is now
    released at a safe point once nothing but the release queue holds it; one that came back is simply alive."""
    kept: list[object] = []
    buffer = tc.DeviceBuffer.from_host(np.arange(16, dtype=np.float32))
    address = buffer.ptr
    _Resurrector(buffer, kept)
    del buffer
    gc.collect()
    back = kept.pop()
    assert isinstance(back, tc.DeviceBuffer)
    tc.DeviceBuffer.allocate(64).free()  # a safe point; the pool must not hand out the resurrected memory
    assert not sim.kinds("free"), "the memory of a live buffer was freed"
    np.testing.assert_array_equal(back.to_numpy(np.float32, (16,)), np.arange(16, dtype=np.float32))
    assert back.ptr == address
    del back
    tc.Device(0).synchronize()  # only the queue holds it now: released here, once
    sim.drain_all()
    assert [entry[1] for entry in sim.kinds("free")].count(address) == 1
    assert _reaper.pending() == 0


def test_a_frontend_tensor_resurrected_by_a_finalizer_keeps_its_memory(sim: SimDriver) -> None:
    """Hole: a device tensor (its storage and tile.core buffer with it) kept by a finalizer of the garbage it was
    collected with: the buffer's finalizer had freed the memory, but the tensor's storage still called it live, and a
    launch packs a storage's address as is (the frontend's own ``unchecked=True`` of tile.core): a kernel given the
    tensor wrote freed memory, which the pool hands to the next allocation. The memory now stays with the tensor."""
    import tile.frontend as tile

    kept: list[object] = []
    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    _Resurrector(t, kept)
    del t
    gc.collect()
    back = kept.pop()
    assert isinstance(back, tile.Tensor)
    np.testing.assert_array_equal(back.numpy(), np.arange(16, dtype=np.float32))  # was UseAfterFreeError
    fresh = tile.from_numpy(np.zeros(16, np.float32), device=tc.Device(0))
    assert fresh.data_ptr() != back.data_ptr(), "the pool handed the live tensor's memory to a new one"
    del back, fresh
    gc.collect()


# -- hole: tile.aio enqueued on a closed stream's handle -------------------------------------------------------------


def test_host_work_on_a_closed_stream_is_refused_before_the_driver(
    sim: SimDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hole: ``aio.host_call(fn).sync_on(ctx)`` for a context whose tile.core stream was closed enqueued the host
    function on the destroyed stream's handle (``cuLaunchHostFunc``; the driver may have given the handle to another
    stream since); the StreamClosedError came only from the synchronize after it, and ``fn`` ran later anyway."""
    from tile import aio

    stream = tc.Stream()
    ctx = aio.CudaContext(stream)
    stream.close()
    enqueued: list[object] = []
    real = sim.cuLaunchHostFunc
    monkeypatch.setattr(sim, "cuLaunchHostFunc", lambda *a: enqueued.append(a) or real(*a))
    ran: list[int] = []
    with pytest.raises(tc.StreamClosedError, match=r"was closed.*a context of an open stream"):
        aio.host_call(ran.append, 1).sync_on(ctx)
    # (counted at the driver: the queue's length also drops when the wait on the closed stream runs its final event)
    assert enqueued == [], "host work was enqueued on the destroyed stream"
    sim.drain_all()
    assert ran == [], "the refused host work ran"


# -- held: pack_launch's as-is ints and DeviceBuffer shortcut ---------------------------------------------------------


class _LyingInt(int):
    """An int subclass whose comparisons and index lie: a range check must see its true value."""

    def __lt__(self, other: object) -> bool:
        return True

    def __le__(self, other: object) -> bool:
        return True

    def __index__(self) -> int:
        return 5


def _edges() -> list[object]:
    values: list[object] = [True, False, np.bool_(True), 1.0, np.float32(1), "1", None, 2**70, -(2**70)]
    for bits in (8, 16, 32, 64):
        for v in (-(2 ** (bits - 1)) - 1, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, 2 ** (bits - 1), 2**bits - 1):
            values += [v, _LyingInt(v)]
            values += [np.int64(v)] if -(2**63) <= v < 2**63 else []
            values += [np.uint64(v)] if 0 <= v < 2**64 else []
        values += [2**bits, -1, 0]
    return values


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("kind", [k for k in tc.KINDS if k != "ptr"])
def test_a_launch_packs_every_scalar_as_a_prepared_launch_does(kind: str) -> None:
    """Tried: ``pack_launch`` keeps an exact int in its kind's range as is (no numpy carrier); at the range ends,
    past them, for bools, int subclasses that lie, numpy ints and non-numbers, it packs the same bytes as
    ``pack_args`` (what ``prepare`` keeps) or raises the same error. Held."""
    from tile.core._args import pack_launch
    from tile.core._params import param_block

    for value in _edges():
        outcomes: list[bytes | str] = []
        for packer in ("prepared", "launch"):
            try:
                if packer == "prepared":
                    packed = tc.pack_args([value], (kind,))
                    kinds, values = packed.kinds, list(packed.values)
                else:
                    kinds, values, _, _ = pack_launch([value], (kind,), device=None, expected=None)
                block, _ = param_block(kinds, values)
                outcomes.append(bytes(memoryview(block).cast("B"))[:8])  # type: ignore[arg-type]  # the ctypes block
            except tc.LaunchArgumentError as exc:
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], (kind, value, outcomes)


def test_the_launch_shortcut_for_buffers_still_refuses_freed_and_foreign_device_ones() -> None:
    """Tried: ``pack_launch`` takes a DeviceBuffer of the launch's device without `_pointer`: a freed one still
    raises (its ``ptr``), and one of another device goes through `_pointer`'s device check. Held."""
    with simulated(2, asynchronous=True) as sim:
        vec_add = tc.Module.from_cubin(sm90_cubin()).function("vec_add")
        there = tc.DeviceBuffer.allocate(512, device=tc.Device(1), ready=True)
        gone = tc.DeviceBuffer.allocate(512, ready=True)
        gone.free()
        with pytest.raises(tc.WrongDeviceError, match="lives on device 1 but the launch is on device 0"):
            tc.launch(vec_add, 1, 1, [there, 128, 1] * 3, signature=VEC_ADD_SIGNATURE)
        with pytest.raises(tc.UseAfterFreeError, match="was freed"):
            tc.launch(vec_add, 1, 1, [gone, 128, 1] * 3, signature=VEC_ADD_SIGNATURE)
        assert not sim.kinds("launch")
        there.free()


# -- hole: tile.core.borrow's stream= taken as given -----------------------------------------------------------------


def test_borrow_refuses_a_closed_stream_before_the_producer_orders_work_on_it(sim: SimDriver) -> None:
    """Hole: ``tc.borrow(obj, stream=s)`` handed ``s.handle`` to the producer's DLPack export as the consumer stream
    with ``s`` closed: the producer (here a tile.frontend tensor) enqueued its wait on the destroyed stream's handle,
    and its buffer kept that handle as a consumer stream its free records an event on. An int ``stream=`` failed with
    a bare AttributeError."""
    import tile.frontend as tile

    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    gone = tc.Stream()
    gone.close()
    before = _queued(sim, gone)  # the close's final event
    with pytest.raises(tc.StreamClosedError, match="was closed"):
        tc.borrow(t, stream=gone)
    assert _queued(sim, gone) == before, "the producer enqueued work on the destroyed stream"
    with pytest.raises(tc.WrongTypeError, match=r"stream= takes a tile\.core\.Stream"):
        tc.borrow(t, stream=0xDEAD)  # type: ignore[arg-type]
    assert tc.borrow(t, stream=tc.Stream()).shape == (16,)  # an open stream as before
