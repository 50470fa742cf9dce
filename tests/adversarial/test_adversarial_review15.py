"""Review 15: tile.core / tile.bindings as a standalone safe CUDA API, closing what review 11 left as documented trust.
The tests run tile.core's GPU code paths on the CPU against the asynchronous driver simulator (``tile.core.testing``):
work stays queued until something waits for it, and ``sim.bugs`` records work on freed memory and, since this review,
any driver call made inside a host function (CUDA forbids them there). Each hole's test names it, failed before its
fix, and asserts the typed error.

Holes found and fixed:

- raw addresses were trusted in safe code: ``DeviceView(0xdead, ...)`` over an address no Tile buffer or borrowed
  array vouched for, a launch's int ``"ptr"`` argument (``tc.launch(f, 1, 1, [0xdead, ...])``) and an int stream
  handle (``Stream.borrow(0xdead)``, or ``stream=0xdead`` to a copy or launch) let safe code read or write any device
  memory, or enqueue work on a stale stream handle. Each now needs the explicit, greppable opt-out ``unchecked=True``
  (the precedent of ``@tile.entry(unchecked=True)``), else `WrongTypeError` / `LaunchArgumentError` before anything
  is enqueued. A view whose owner is a borrowed array's view (what tile.frontend makes of borrowed tensors) is checked
  against it instead: inside its span, on its device, read-only when it is.
- a handle's finalizer that fired inside a CUDA host function (tile.aio's ``host_call`` dropping the last reference
  to a buffer) made driver calls there (``cuMemFreeAsync``, ``cuStreamDestroy``...), which CUDA forbids: the real
  driver fails them (the memory leaked, the error swallowed) or deadlocks. Code that runs Python in a host function
  marks it with ``tile.core.host_callback()`` (tile.aio's trampoline does); finalizers firing there queue their
  release, which runs at the next safe point (an allocation, a free, a synchronize).
- a `PinnedBuffer`'s finalizer blocked on its pending uses (``event.synchronize()``) wherever the garbage collector ran
  it: inside a host function (a deadlock: the stream waits for the callback) or on a thread holding ``use_lock``
  that the pending work needs. It never blocks now: a release whose uses are pending waits in the same queue.
- handle classes made by their constructors: ``tc.PreparedLaunch(function, grid, block, packed, ...)`` (what
  ``prepare`` returns after its checks) took a hand-made ``PackedArgs`` of raw addresses and launched them with no
  check at all; ``tc.Function(module, name, 0xdead)`` launched whatever kernel handle it was given; ``tc.MemoryPool``
  made a second pool of a device. They now raise `FactoryError` naming the factory, as ``DeviceBuffer()``,
  ``PinnedBuffer()`` and ``Module()`` do (those raised a plain TypeError, outside ``except tile.TileError``).
  `FactoryError` is a `WrongTypeError`, so a TileError and a TypeError as before.
- a `Module` or `Function` dropped inside a host function released its cuda.core library there (its finalizer
  unloads through the driver); their cuda.core objects now wait in the same queue.

Bugs fixed on the way (refusals that were untyped or came from the driver): ``event.record(stream)`` across devices
reached ``cuEventRecord`` (now `WrongDeviceError` first); ``stream.wait(x)`` of a foreign event or int failed with an
AttributeError (now `WrongTypeError`); an asynchronous copy given ``pinned.array`` (or a view or slice of it)
recorded no use of the PinnedBuffer, so its release did not wait for the copy (only ``cuMemFreeHost``'s implicit
context synchronization kept the DMA off freed memory); a numpy array over pinned memory now counts as the buffer;
``Module.unload`` on another thread during a ``prepare`` (after its kernel read, before its guard's epoch) left a
prepared launch that kept launching the unloaded module (unload takes ``use_lock`` now).

Left as is (documented trust): what a DLPack / ``__cuda_array_interface__`` / ``__cuda_stream__`` producer exports
(a hand-written class can claim any address; the protocols give a consumer no way to check it), and
``tile.bindings.driver()``, which hands out the raw cuda-python driver module (tile.bindings is the unchecked layer
under tile.core, as cuda-python itself is).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile import aio
from tile.core import _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, simulated, sm90_cubin


def _queued(sim: SimDriver, stream: tc.Stream) -> int:
    return len(sim.queues.get(stream.handle, ()))


class _Foreign:
    """Stands for anything that is not a Tile buffer or a borrowed view: it vouches for no memory."""


# -- hole: raw addresses in safe code -------------------------------------------------------------------------------


def test_a_view_over_a_raw_address_needs_unchecked(sim: SimDriver) -> None:
    """Hole: ``DeviceView(address, ...)`` with a foreign owner trusted the address; ``.fill`` wrote wherever it said."""
    victim = tc.DeviceBuffer.allocate(64, ready=True)
    victim.fill(0)
    u8 = np.dtype(np.uint8)
    with pytest.raises(tc.WrongTypeError, match=r"raw address .* DeviceView\(\.\.\., unchecked=True\)"):
        tc.DeviceView(victim.ptr, u8, (64,), (1,), device=victim.device, owner=_Foreign())
    with pytest.raises(tc.WrongTypeError, match=r"tile\.core\.borrow"):
        tc.DeviceView(victim.ptr, u8, (64,), (1,), device=victim.device, owner=None, unchecked=1)  # type: ignore[arg-type]
    np.testing.assert_array_equal(victim.to_numpy(np.uint8, (64,)), np.zeros(64, np.uint8))
    opted = tc.DeviceView(victim.ptr, u8, (64,), (1,), device=victim.device, owner=_Foreign(), unchecked=True)
    opted.fill(7)  # the explicit opt-out still works
    np.testing.assert_array_equal(victim.to_numpy(np.uint8, (64,)), np.full(64, 7, np.uint8))
    victim.free()


def test_a_view_of_a_borrowed_view_is_checked_against_it(sim: SimDriver) -> None:
    """Hole (the same): a view whose owner is a borrowed array's view (tile.frontend's byte views of borrowed tensors)
    trusted its address too. It must lie inside the borrowed view, on its device, and stay read-only when it is."""
    memory = tc.DeviceBuffer.allocate(256, ready=True)
    u8 = np.dtype(np.uint8)
    borrowed = tc.DeviceView(memory.ptr + 64, u8, (64,), (1,), device=memory.device, owner=_Foreign(), unchecked=True)
    inside = tc.DeviceView(memory.ptr + 80, u8, (16,), (1,), device=memory.device, owner=borrowed)
    assert inside.ptr == memory.ptr + 80
    for start, n in ((memory.ptr, 16), (memory.ptr + 120, 16), (memory.ptr + 64, 65)):
        with pytest.raises(tc.OutOfBoundsError, match="make views inside the array it views"):
            tc.DeviceView(start, u8, (n,), (1,), device=memory.device, owner=borrowed)
    frozen = tc.DeviceView(
        memory.ptr, u8, (64,), (1,), device=memory.device, owner=_Foreign(), readonly=True, unchecked=True
    )
    with pytest.raises(tc.LayoutMismatchError, match=r"exported read-only .* must be readonly=True"):
        tc.DeviceView(memory.ptr, u8, (64,), (1,), device=memory.device, owner=frozen)
    assert tc.DeviceView(memory.ptr, u8, (8,), (1,), device=memory.device, owner=frozen, readonly=True).readonly
    memory.free()


@pytest.mark.parametrize("how", ["launch", "prepare", "pack_args"])
def test_a_launch_with_an_int_address_needs_unchecked(sim: SimDriver, vec_add: tc.Function, how: str) -> None:
    """Hole: an int ``"ptr"`` argument was launched as given: the kernel wrote wherever the int said."""
    work = tc.Stream()
    x = tc.DeviceBuffer.allocate(512, stream=work, ready=True)
    args: list[Any] = [x.ptr, 128, 1, x, 128, 1, x, 128, 1]
    call: Callable[..., Any] = {
        "launch": lambda **k: tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=work, **k),
        "prepare": lambda **k: tc.prepare(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=work, **k)(),
        "pack_args": lambda **k: tc.pack_args(args, VEC_ADD_SIGNATURE, **k),
    }[how]
    before = _queued(sim, work)
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 0 is the raw address .* unchecked=True"):
        call()
    assert _queued(sim, work) == before, "something was enqueued"
    call(unchecked=True)  # the explicit opt-out
    work.synchronize()
    x.free()


def test_an_int_stream_handle_needs_unchecked(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: an int stream handle was taken as a stream anywhere one is accepted (``Stream.borrow``, ``stream=`` of a
    copy or launch): a stale handle names a destroyed stream, or another stream the driver gave the handle since."""
    gone = tc.Stream()
    handle = gone.handle
    gone.close()
    x = tc.DeviceBuffer.allocate(512, ready=True)
    with pytest.raises(tc.WrongTypeError, match=r"raw stream handle.*Stream\.borrow\(handle, unchecked=True\)"):
        tc.Stream.borrow(handle)
    with pytest.raises(tc.WrongTypeError, match="raw stream handle"):
        x.copy_from(np.zeros(512, np.uint8), stream=handle)
    with pytest.raises(tc.WrongTypeError, match="raw stream handle"):
        tc.launch(vec_add, 1, 1, [x, 128, 1] * 3, signature=VEC_ADD_SIGNATURE, stream=handle)
    assert not sim.kinds("launch")
    live = tc.Stream()
    assert tc.Stream.borrow(live.handle, unchecked=True).handle == live.handle  # the explicit opt-out
    x.free()


# -- hole: finalizers inside host functions -------------------------------------------------------------------------


def test_a_buffer_dropped_inside_a_host_function_is_freed_at_the_next_safe_point(sim: SimDriver) -> None:
    """Hole: the last reference to a buffer dropped inside tile.aio's host function; its finalizer called
    ``cuMemFreeAsync`` there (the simulator, like CUDA, refuses driver calls inside a host function)."""
    ctx = aio.CudaContext(tc.Stream())
    holder = [tc.DeviceBuffer.allocate(128, stream=ctx.stream), tc.Stream(), tc.Event()]
    aio.host_call(holder.clear).sync_on(ctx)  # the buffer, a stream and an event die inside the host function
    assert sim.bugs == [], sim.bugs
    assert not holder
    assert _reaper.pending() == 0, "the releases did not run at the synchronize after the host function"
    sim.drain_all()  # the stream-ordered free runs
    assert len(sim.kinds("free")) == 1


def test_finalizers_inside_a_marked_host_callback_make_no_driver_call(sim: SimDriver) -> None:
    """The same through tile.core alone: ``tc.host_callback()`` marks the code; nothing reaches the driver there."""
    buffer, stream, event = tc.DeviceBuffer.allocate(64), tc.Stream(), tc.Event()
    pinned = tc.PinnedBuffer.allocate(64)
    entries = len(sim.log)
    with tc.host_callback():
        del buffer, stream, event, pinned
        gc.collect()
        queued = _reaper.pending()
        assert queued >= 4  # the buffer, stream, event, pinned memory (and the events they held)
        _reaper.drain()  # not a safe point inside a host function: nothing runs
        assert _reaper.pending() == queued
    assert len(sim.log) == entries, "a finalizer called the driver inside the host function"
    tc.Device(0).synchronize()  # a safe point
    assert _reaper.pending() == 0
    sim.drain_all()  # the stream-ordered free runs
    assert len(sim.kinds("free")) == 1
    assert len(sim.kinds("free_host")) == 1


def test_a_pinned_buffer_finalizer_never_blocks_on_pending_uses(sim: SimDriver) -> None:
    """Hole: a PinnedBuffer's finalizer waited for its pending uses (``event.synchronize()``) wherever the garbage
    collector ran it - inside a host function, or on a thread holding ``use_lock`` that the pending work needs."""
    device = tc.DeviceBuffer.allocate(64, ready=True)
    pinned = tc.PinnedBuffer.allocate(64)
    other = tc.Stream()
    device.copy_to(pinned, stream=other, sync=False)  # queued, not run: a pending use of the pinned memory
    queued = _queued(sim, other)
    assert queued
    del pinned
    gc.collect()
    assert _queued(sim, other) == queued, "the finalizer waited for the pending copy"
    assert not sim.kinds("free_host")
    assert _reaper.pending() == 1
    tc.DeviceBuffer.allocate(8).free()  # a safe point while the copy is pending: the release waits on
    assert _reaper.pending() == 1
    assert not sim.kinds("free_host")
    other.synchronize()  # the copy is done: this safe point releases the memory
    assert _reaper.pending() == 0
    assert len(sim.kinds("free_host")) == 1
    device.free()


# -- hole: handles made by their constructors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "factory"),
    [
        (tc.DeviceBuffer, r"DeviceBuffer\.allocate"),
        (tc.PinnedBuffer, r"PinnedBuffer\.allocate"),
        (tc.Module, r"Module\.from_cubin"),
    ],
)
def test_constructing_a_handle_directly_is_a_typed_error_naming_its_factory(make: Any, factory: str) -> None:
    """Bug: ``DeviceBuffer()`` and the like raised a plain TypeError, outside ``except tile.TileError``."""
    with pytest.raises(tc.FactoryError, match=rf"cannot be made directly: use .*{factory}") as info:
        make()
    assert isinstance(info.value, tc.TileError)
    assert isinstance(info.value, TypeError)  # as before


def test_a_function_cannot_be_made_over_a_raw_kernel_handle(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``tc.Function(module, name, kernel)`` took any kernel handle (an int): its launch ran whatever the
    handle named, with the argument checks of the module's real kernel."""
    with pytest.raises(tc.FactoryError, match=r"use module\.function\(name\)"):
        tc.Function(vec_add.module, "vec_add", 0xDEAD)
    assert not sim.kinds("launch")


def test_a_prepared_launch_cannot_be_made_from_hand_packed_arguments(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``tc.PreparedLaunch(function, grid, block, packed, ...)`` is what ``prepare`` returns after its checks;
    made directly from a hand-made ``PackedArgs(("ptr", ...), (0xdead, ...), ())`` it launched a raw address with no
    check at all, and its relaunch guard watched no buffer."""
    work = tc.Stream()
    packed = tc.PackedArgs(VEC_ADD_SIGNATURE, (0xDEAD, 128, 1) * 3, ())
    with pytest.raises(tc.FactoryError, match=r"use tile\.core\.prepare\(\.\.\.\)"):
        tc.PreparedLaunch(vec_add, (1, 1, 1), (1, 1, 1), packed, stream=work, shared_mem=0)
    assert _queued(sim, work) == 0


def test_a_second_memory_pool_cannot_be_made(sim: SimDriver) -> None:
    """Bug: ``tc.MemoryPool(device)`` made a second pool of a device (never used by its buffers, never destroyed)."""
    with pytest.raises(tc.FactoryError, match=r"use device\.memory_pool"):
        tc.MemoryPool(tc.Device(0))
    assert tc.Device(0).memory_pool is tc.Device(0).memory_pool


# -- events and streams across devices, foreign events --------------------------------------------------------------


def test_an_event_recorded_on_a_stream_of_another_device_is_refused_before_the_driver() -> None:
    """Bug: ``event.record(stream)`` with the event of device 0 and the stream of device 1 reached ``cuEventRecord``
    (the driver refuses it with an invalid-handle CudaError that says nothing of devices)."""
    with simulated(2) as sim:
        event, there = tc.Event(tc.Device(0)), tc.Stream(tc.Device(1))
        records = len(sim.kinds("record"))
        with pytest.raises(tc.WrongDeviceError, match=r"event of device 0 .* stream of device 1: .*Event\(device\)"):
            event.record(there)
        with pytest.raises(tc.WrongDeviceError, match="event of device 0"):
            there.record(event)
        assert len(sim.kinds("record")) == records
        tc.Stream(tc.Device(0)).wait(there)  # waiting across devices is fine: the event is made on there's device
        assert len(sim.kinds("record")) == records + 1


@pytest.mark.parametrize("foreign", [object(), 0x1234, "event"])
def test_a_stream_waits_only_for_tile_events_and_streams(sim: SimDriver, foreign: object) -> None:
    """Bug: ``stream.wait(x)`` of anything else (a torch or cuda.core event, an int handle) called ``x.record()``
    and failed with an AttributeError (or ran a foreign ``record`` method and used what it returned)."""
    with pytest.raises(tc.WrongTypeError, match=r"wait for a tile\.core Event or Stream"):
        tc.Stream().wait(foreign)  # type: ignore[arg-type]


def test_a_module_dropped_inside_a_host_function_is_released_at_the_next_safe_point(sim: SimDriver) -> None:
    """Hole: a Module (or Function) whose last reference dropped inside a host function released its cuda.core
    library there (``cuLibraryUnload``, a driver call CUDA forbids in a host function). Its cuda.core objects now wait
    in the release queue and are dropped at the next safe point."""
    module = tc.Module.from_cubin(sm90_cubin())
    function = module.function("vec_add")
    before = _reaper.pending()
    with tc.host_callback():
        del module, function
        gc.collect()
        assert _reaper.pending() == before + 2, "the module's and the function's cuda.core objects were released here"
    tc.Device(0).synchronize()
    assert _reaper.pending() == 0


# -- copies between pinned and device memory ------------------------------------------------------------------------


@pytest.mark.parametrize("through", ["array", "typed view", "slice"])
def test_an_async_copy_into_a_pinned_buffers_array_is_a_use_of_the_pinned_buffer(sim: SimDriver, through: str) -> None:
    """Bug: an asynchronous copy given ``pinned.array`` (or a view of it) instead of the PinnedBuffer recorded no use
    of the pinned memory: its release did not wait for the copy (only ``cuMemFreeHost``'s implicit synchronization of
    the whole context kept the DMA off freed memory). A numpy array over pinned memory now counts as the buffer."""
    device = tc.DeviceBuffer.allocate(64, ready=True)
    pinned = tc.PinnedBuffer.allocate(64)
    other = tc.Stream()
    target = pinned.array
    if through == "typed view":
        target = target.view(np.float32)
    elif through == "slice":
        target = target[:64]
    device.copy_to(target, stream=other, sync=False)
    del pinned, target
    gc.collect()
    tc.DeviceBuffer.allocate(8).free()  # a safe point while the copy is still queued
    assert _queued(sim, other), "the copy ran early"
    assert not sim.kinds("free_host"), "pinned memory was released under a queued copy"
    other.synchronize()
    assert len(sim.kinds("free_host")) == 1
    device.free()


# -- thread races: an unload during a prepare -----------------------------------------------------------------------


def test_a_module_unloaded_during_a_prepare_on_another_thread_stops_the_prepared_launch(
    sim: SimDriver, vec_add: tc.Function, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: ``Module.unload`` took no lock. An unload on another thread between a prepare's read of the kernel and
    its guard's epoch left a launch whose guard had seen the unload's invalidation already: it kept launching the
    unloaded module's kernel. The unload now takes ``use_lock``: it comes wholly before or after a prepare."""
    x = tc.DeviceBuffer.allocate(512, ready=True)
    kernel_of = tc.Function.cu_function
    unloaders: list[threading.Thread] = []

    def unload_meanwhile(function: tc.Function) -> Any:
        kernel = kernel_of.fget(function)  # type: ignore[attr-defined]  # read before the unload
        unloader = threading.Thread(target=function.module.unload)
        unloader.start()
        unloader.join(0.2)  # with the lock held by the prepare, the unload waits
        unloaders.append(unloader)
        return kernel

    monkeypatch.setattr(tc.Function, "cu_function", property(unload_meanwhile))
    again = tc.prepare(vec_add, 1, 1, [x, 128, 1] * 3, signature=VEC_ADD_SIGNATURE)
    for unloader in unloaders:
        unloader.join()
    with pytest.raises(tc.UseAfterFreeError, match="its module was unloaded"):
        again()
    assert not sim.kinds("launch")
    x.free()
