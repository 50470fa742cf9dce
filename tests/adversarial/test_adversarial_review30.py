"""Adversarial review 30 of tile.core used alone: memory whose owner is not Tile, used by work still in flight.

Safe code only (no ``unchecked=True``, nothing named unsafe), on the strict simulator (``sim``: nothing runs before
something waits for it; a free that overtakes queued work touching the memory, or an access outside every live
allocation, is a bug it reports). Each hole's test names it and failed before its fix.

Holes found and fixed (one class: work that outlived the references the caller passed it):

- A launch through a borrowed foreign view (``tile.core.borrow`` of a DLPack producer: torch, cupy, ...) kept the view,
  and through it the producer, only for the length of the call: ``tc.launch(...)`` then dropping the view and the
  producer let the producer free its memory (torch's caching allocator hands the block to its next allocation on its
  stream) while the kernel, queued on another stream, still read it. The same through the launch plan (a repeated
  launch of the same view) and a `PreparedLaunch` called and then dropped. The DLPack contract puts this on the
  consumer: it keeps the producer alive while it uses the memory, and a kernel uses it until it completes.
- An asynchronous copy or fill (``sync=False``) through a borrowed view: the same.
- An asynchronous copy from or to a host array in page-locked memory that tile.core did not allocate (a numpy array
  over torch's ``pin_memory()`` block): the driver runs such a copy truly asynchronously, but only a `PinnedBuffer`
  recorded the use. Dropping the array gave the block back to its library, whose next array got it: the queued copy
  read the new array's bytes (host to device) or overwrote them (device to host).

Fixed at the class level (``tile.core._keepalive``): every launch (plain, planned, prepared) and asynchronous copy or
fill hands what it uses and Tile does not own -- the borrowed views, the host array of an asynchronous copy -- to its
stream's holder, which keeps them until the stream's use mark, recorded after the work, is complete, and drops them
at the first safe point after (a synchronize, an allocation, a free; a stream used in a loop drops what completed
every 64 holds). Tile buffers (and views of them, borrowed back included) need no hold: their frees are ordered
after their recorded uses. A graph capture holds nothing (its record guards nothing; whoever replays the graph keeps
its memory alive, the rule for buffers already).

Tried and found solid: an event recorded on a closed stream or a stream waiting on a closed event (StreamClosedError
/ UseAfterFreeError); a `DeviceView` with negative strides, or extents and offsets whose span passes the buffer or
overflows (refused when made); a buffer freed on its home stream while a launch on another stream reads it (the free
waits for the recorded use, review 29); a foreign stream whose owner destroys it under a queued launch (CUDA defers
the destroy until the queued work is done; the wrapper keeps the owner object alive while it lives).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core import _dlpack, _keepalive
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver

N = 32
F32 = np.dtype(np.float32)


def _args(x: object, y: object, z: object) -> list[Any]:
    return [x, N, 1, y, N, 1, z, N, 1]


class _Foreign:
    """Another library's device array (as torch's): its memory is allocated and freed on the library's stream, and
    freed (stream-ordered, as torch's caching allocator gives the block to its next allocation there) as soon as
    the array is collected. Offered through DLPack, as torch offers it."""

    def __init__(self, sim: SimDriver, lib: tc.Stream, value: float) -> None:
        self.sim, self.lib = sim, lib
        self.ptr = int(sim.cuMemAllocFromPoolAsync(4 * N, None, lib.handle)[1])
        values = np.full(N, value, F32)
        sim.cuMemcpyHtoDAsync(self.ptr, values.ctypes.data, 4 * N, lib.handle)  # pageable: staged at once
        lib.synchronize()

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None, **_: object) -> object:
        versioned = _dlpack.wants_versioned(max_version)
        return _dlpack.export_capsule(self.ptr, F32, (N,), (4,), device=(2, 0), owner=self, versioned=versioned)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __del__(self) -> None:
        self.sim.cuMemFreeAsync(self.ptr, self.lib.handle)


def _launch_plain(f: tc.Function, v: tc.DeviceView, z: tc.DeviceBuffer, s: tc.Stream) -> None:
    tc.launch(f, 1, N, _args(v, v, z), signature=VEC_ADD_SIGNATURE, stream=s)


def _launch_planned(f: tc.Function, v: tc.DeviceView, z: tc.DeviceBuffer, s: tc.Stream) -> None:
    _launch_plain(f, v, z, s)
    s.synchronize()  # the first launch completes; the second, the plan's, is the one left in flight
    _launch_plain(f, v, z, s)


def _launch_prepared(f: tc.Function, v: tc.DeviceView, z: tc.DeviceBuffer, s: tc.Stream) -> None:
    tc.prepare(f, 1, N, _args(v, v, z), signature=VEC_ADD_SIGNATURE, stream=s)()  # called, then dropped


LAUNCHES: dict[str, Callable[[tc.Function, tc.DeviceView, tc.DeviceBuffer, tc.Stream], None]] = {
    "launch": _launch_plain,
    "planned launch": _launch_planned,
    "prepared launch": _launch_prepared,
}


# -- hole: a launch through a borrowed view let the producer free the memory under the kernel -------------------------


@pytest.mark.parametrize("derived", [False, True], ids=["borrowed view", "view of it"])
@pytest.mark.parametrize("how", list(LAUNCHES))
def test_a_launch_holds_a_borrowed_view_until_the_kernel_completes(
    sim: SimDriver, vec_add: tc.Function, how: str, derived: bool
) -> None:
    lib, other = tc.Stream(), tc.Stream()
    foreign = _Foreign(sim, lib, 1.0)
    gone = weakref.ref(foreign)
    view = tc.borrow(foreign)
    if derived:  # a view made over the borrowed one (checked against it, holding it as its owner)
        view = tc.DeviceView(view.ptr, F32, (N,), (4,), device=view.device, owner=view)
    z = tc.DeviceBuffer.allocate(4 * N, stream=other)
    LAUNCHES[how](vec_add, view, z, other)
    del view, foreign
    gc.collect()
    assert gone() is not None  # held by the launch in flight
    lib.synchronize()  # the library goes on with its stream: a free queued there runs now
    other.synchronize()
    assert sim.bugs == []
    assert gone() is None  # and let go once the kernel completed (at the synchronize)
    np.testing.assert_array_equal(z.to_numpy(F32), np.full(N, 2.0, F32))
    z.free()


# -- hole: an asynchronous copy or fill through a borrowed view ------------------------------------------------------

COPIES: dict[str, Callable[[tc.DeviceView, tc.DeviceBuffer, tc.Stream], None]] = {
    "copy out": lambda v, z, s: tc.copy(z.view(F32, N), v, stream=s, sync=False),
    "copy in": lambda v, z, s: tc.copy(v, z.view(F32, N), stream=s, sync=False),
    "buffer.copy_from": lambda v, z, s: z.copy_from(v, stream=s, sync=False),
    "buffer.copy_to": lambda v, z, s: z.copy_to(v, stream=s, sync=False),
    "from the host": lambda v, _, s: v.copy_from(np.full(N, 2.0, F32), stream=s, sync=False),
    "fill": lambda v, _, s: v.fill(2.0, stream=s, sync=False),
}


@pytest.mark.parametrize("how", list(COPIES))
def test_an_asynchronous_copy_holds_a_borrowed_view_until_it_completes(sim: SimDriver, how: str) -> None:
    lib, other = tc.Stream(), tc.Stream()
    foreign = _Foreign(sim, lib, 1.0)
    gone = weakref.ref(foreign)
    view = tc.borrow(foreign)
    z = tc.DeviceBuffer.from_host(np.full(N, 2.0, F32), stream=other)
    COPIES[how](view, z, other)
    del view, foreign
    gc.collect()
    assert gone() is not None
    lib.synchronize()
    other.synchronize()
    assert sim.bugs == []
    assert gone() is None
    z.free()


# -- hole: an asynchronous copy from/to page-locked memory of another library -----------------------------------------


class _PinnedPool:
    """Another library's caching allocator of page-locked host memory (as torch's ``pin_memory()``): a block goes
    back to the pool when its array is collected, and the next array gets it."""

    def __init__(self, sim: SimDriver) -> None:
        self.sim, self.free = sim, list[int]()

    def array(self) -> np.ndarray[Any, Any]:
        ptr = self.free.pop() if self.free else int(self.sim.cuMemHostAlloc(4 * N, 0)[1])
        return np.asarray(_Block(self, ptr))


class _Block:
    def __init__(self, pool: _PinnedPool, ptr: int) -> None:
        self.pool, self.ptr = pool, ptr
        self.__array_interface__ = {"shape": (N,), "typestr": "<f4", "data": (ptr, False), "version": 3}

    def __del__(self) -> None:
        self.pool.free.append(self.ptr)


HOST_COPIES: dict[str, Callable[[tc.DeviceBuffer, np.ndarray[Any, Any], tc.Stream], None]] = {
    "buffer.copy_from": lambda z, a, s: z.copy_from(a, stream=s, sync=False),
    "view.copy_from": lambda z, a, s: z.view(F32, N).copy_from(a, stream=s, sync=False),
    "tc.copy": lambda z, a, s: tc.copy(z, a, stream=s, sync=False),
}


@pytest.mark.parametrize("how", list(HOST_COPIES))
def test_an_asynchronous_copy_from_foreign_pinned_memory_holds_the_array(sim: SimDriver, how: str) -> None:
    pool, stream = _PinnedPool(sim), tc.Stream()
    z = tc.DeviceBuffer.allocate(4 * N, stream=stream)
    a = pool.array()
    a[:] = 1.0
    HOST_COPIES[how](z, a, stream)
    del a
    gc.collect()
    b = pool.array()  # the library's next array: its block must not be the one the copy still reads
    b[:] = 7.0
    np.testing.assert_array_equal(z.to_numpy(F32), np.full(N, 1.0, F32))
    z.free()


@pytest.mark.parametrize("how", ["buffer.copy_to", "view.copy_to", "tc.copy"])
def test_an_asynchronous_copy_to_foreign_pinned_memory_holds_the_array(sim: SimDriver, how: str) -> None:
    pool, stream = _PinnedPool(sim), tc.Stream()
    z = tc.DeviceBuffer.from_host(np.full(N, 1.0, F32), stream=stream)
    a = pool.array()
    if how == "buffer.copy_to":
        z.copy_to(a, stream=stream, sync=False)
    elif how == "view.copy_to":
        z.view(F32, N).copy_to(a, stream=stream, sync=False)
    else:
        tc.copy(a, z, stream=stream, sync=False)
    del a
    gc.collect()
    b = pool.array()
    b[:] = 7.0
    stream.synchronize()
    np.testing.assert_array_equal(b, np.full(N, 7.0, F32))  # not overwritten by the copy into the dropped array
    z.free()


# -- the holds end: nothing kept past completion, and a loop does not pile them up ----------------------------------


def test_a_stream_used_in_a_loop_drops_what_completed(sim: SimDriver, vec_add: tc.Function) -> None:
    """With no safe point in the loop, the holds are pruned once the work before them completed (the simulator
    runs queued work early here, as a GPU does)."""
    sim.eagerness = 1.0
    lib, other = tc.Stream(), tc.Stream()
    z = tc.DeviceBuffer.allocate(4 * N, stream=other)
    foreigns = [_Foreign(sim, lib, 1.0) for _ in range(3 * _keepalive._PRUNE_AT)]  # (each synchronizes: made first)
    refs = [weakref.ref(foreign) for foreign in foreigns]
    views: list[tc.DeviceView | None] = [tc.borrow(foreign) for foreign in foreigns]
    del foreigns
    for i in range(len(views)):  # launches only: no synchronize, allocation or free (no safe point)
        view = views[i]
        tc.launch(vec_add, 1, N, _args(view, view, z), signature=VEC_ADD_SIGNATURE, stream=other)
        views[i] = view = None
        holder = other._holder
        assert holder is not None
        assert len(holder.objects) <= _keepalive._PRUNE_AT + 2  # (one launch holds its view once per argument)
    other.synchronize()
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert sim.bugs == []
    z.free()


def test_a_synchronous_copy_holds_nothing(sim: SimDriver) -> None:
    """A copy that is waited for is held by its caller until it completes: no hold, no event recorded for it."""
    stream = tc.Stream()
    z = tc.DeviceBuffer.allocate(4 * N, stream=stream)
    z.copy_from(np.ones(N, F32), stream=stream)
    assert stream._holder is None
    z.free()


# -- what held ------------------------------------------------------------------------------------------------------


def test_events_and_closed_streams(sim: SimDriver) -> None:
    stream = tc.Stream()
    stream.close()
    with pytest.raises(tc.StreamClosedError, match="closed"):
        tc.Event().record(stream)
    event = tc.Stream().record()
    event.close()
    with pytest.raises(tc.UseAfterFreeError, match="closed"):
        tc.Stream().wait(event)


@pytest.mark.parametrize(
    ("shape", "strides", "offset"),
    [((4,), (-4,), 8), ((2**62,), (4,), 0), ((4,), (2**62,), 0), ((4,), (4,), 2**64 - 4), ((8,), (4,), 4)],
)
def test_views_outside_their_buffer_are_refused(sim: SimDriver, shape: Any, strides: Any, offset: int) -> None:
    buffer = tc.DeviceBuffer.allocate(32)
    with pytest.raises(tc.OutOfBoundsError, match=r"covers bytes .* which has 32"):
        tc.DeviceView(buffer.ptr + offset, F32, shape, strides, device=buffer.device, owner=buffer)
    buffer.free()
