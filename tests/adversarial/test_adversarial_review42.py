"""Adversarial review 42: the rest of the classes review 39 found (a check's epoch read after the check; a raw stream
handle used outside the stream's counted uses), across tile.aio, tile.core's foreign borrows and tile.frontend, from
safe code only, on tile.core's strict simulator (``sim``).

Holes found and fixed (each test below failed before its fix; checked by reverting the fix):

- tile.aio's host functions (``CudaContext.enqueue``, what ``host_call`` and ``.then()`` on a CUDA context use)
  checked the stream open and then passed its raw handle to ``cuLaunchHostFunc``, outside review 39's counted uses:
  a ``stream.close()`` in between (a finalizer the collector ran at the call's allocations, such as the ``CUhostFn``
  it builds, or another thread) destroyed the stream and the host function was enqueued on a destroyed handle
  (which the driver may have given to a new stream). It now runs inside the new public ``Stream.in_use()`` (counted
  before the open check; a close meanwhile closes the stream but leaves ``cuStreamDestroy`` to the block's end).
  The same fix, by reading (the simulated driver has no graphs; the GPU graph tests cover the path): graph replay
  (``cuGraphLaunch``), capture begin and end (``cuStreamBeginCapture``/``cuStreamEndCapture``) and upload.
- ``tc.borrow(obj, stream=s)`` checked ``s`` open and handed its handle to the producer (``__dlpack__(stream=)``,
  which makes that stream wait for its work): a close while the producer ran destroyed ``s`` first. Now inside
  ``s.in_use()``.
- a stream-ordered free deferred to a safe point (asked for inside a host function) ran there holding no
  ``use_lock``: it waited for the buffer's uses (event waits: allocations) and then passed ``stream._raw`` to
  ``cuMemFreeAsync``; a finalizer closing that stream in between was not refused (no use on this thread) and the free
  was enqueued on a destroyed stream (the memory released in another stream's order). It now runs under ``use_lock``
  (the close is refused there, as inside every other use).

Fixed by reading only (no test here can fail without it):

- tile.distributed's collective ran torch on the context stream's handle (``ExternalStream``) outside the counted
  uses, and did not refuse a closed stream: now inside ``ctx.stream.in_use()`` (torch is absent here).
- ``PreparedLaunch._revalidate`` stored the epoch read after its checks (review 39's class); it keeps the one read
  before them now. No allocation lies between its checks and that read today, so no finalizer can reach the window.

Tried, and held:

- the frontend's plans and its compiled relaunch (``_fastlaunch.c``) keep no epoch of their own: a plan re-checks
  every handle's state on each call under ``OWNERSHIP`` with the collector paused, and every launch holds its
  storages' ``pending`` count from the moment it is made, so a free from a finalizer (or a user ``__del__`` run by a
  refcount drop such as the prepared-launch cache's eviction) is deferred until the launch is done; the compiled
  relaunch of a tile.core ``PreparedLaunch`` compares the launch's own ``_epoch`` (review 39: read before the checks)
  under ``use_lock`` and caches nothing; its ``_call`` holds the stream handle, read under ``use_lock`` after the
  epoch compare (a close bumps the epoch, and is refused on this thread inside the lock).
- tile.core's copies, frees and launches read ``stream._raw`` under ``use_lock``, where a close on this thread is
  refused (``StateError``) and one on another thread waits for the lock (review 22); so does the DLPack export's
  consumer-stream wait (``_view.py``: ``__dlpack__`` holds ``use_lock`` around ``_order_consumer``).
- ``Stream.in_use`` itself: a close inside the block destroys the stream at the block's end, once; a closed stream
  is refused (pinned below).
- cost: ``benchmarks/bench_launch_sim.py`` host us per launch before -> after (same machine, the same built
  extensions): compiled add sync 7.28 -> 7.45, add chain 3.95 -> 3.92, rms chain 4.86 -> 4.63, core launch 0.80 ->
  0.76 (noise: no compiled launch path was changed; the counted use is on host functions, borrows and deferred frees).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import fire_at_collection, spy_destroyed

import tile.core as tc
from tile import aio
from tile.aio import _cuda
from tile.core import _dlpack, _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver


def _at_allocation(n: int, work: Callable[[], Any], fire: Callable[[], None]) -> None:
    """``work()`` with ``fire`` run by a finalizer at its ``n``-th collection."""
    with fire_at_collection(n, fire):
        work()


def _spy_destroyed(sim: SimDriver, calls: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Record each driver call in ``calls`` (name, position of its stream) that names a destroyed stream."""
    return spy_destroyed(sim, "cuStreamDestroy", calls)[1]


# -- hole: tile.aio's host function enqueued on a stream a finalizer closed after its open check -------------------


def test_a_stream_closed_during_a_host_function_enqueue_is_destroyed_after_it(sim: SimDriver) -> None:
    """Hole: ``CudaContext.enqueue(fn)`` checked the stream open, built the ``CUhostFn`` (an allocation: a finalizer
    the collector ran there could close the stream) and passed the raw handle to ``cuLaunchHostFunc``: a host
    function enqueued on a destroyed stream. Each collection point is tried; no driver call names a destroyed
    stream, and a close before the check is refused with `StreamClosedError`."""
    on_destroyed = _spy_destroyed(sim, [("cuLaunchHostFunc", 0)])
    ran: list[int] = []
    fired_inside = 0
    for n in range(1, 60):
        stream = tc.Stream()
        ctx = aio.CudaContext(stream)
        with contextlib.suppress(tc.StreamClosedError):  # closed before the check: refused, as it should be
            _at_allocation(n, lambda ctx=ctx, n=n: ctx.enqueue(lambda: ran.append(n)), stream.close)  # type: ignore[misc]
        if not stream.closed:  # the enqueue made fewer collections than n: every point was tried
            stream.synchronize()
            stream.close()
            break
        fired_inside += 1
    sim.drain_all()
    assert fired_inside > 0, "the finalizer never ran inside the enqueue"
    assert on_destroyed == [], f"host functions enqueued on destroyed streams: {on_destroyed}"
    assert _cuda._pending == {}, "an enqueued host function never ran (or a refused one stayed pending)"


# -- hole: a borrow handed the producer a stream handle a close could destroy while the producer ran ----------------

N = 32


class _Producer:
    """Another library's device array offered through DLPack, which (as torch does) makes the consumer's stream wait
    for its own pending work: an event of its stream, waited for on the handle ``__dlpack__(stream=)`` names. Before
    that it runs ``meanwhile`` (what a finalizer run at one of its allocations, or another thread, may do)."""

    def __init__(self, sim: SimDriver, meanwhile: Callable[[], None]) -> None:
        self.sim, self.meanwhile, self.lib = sim, meanwhile, tc.Stream()
        self.ptr = int(sim.cuMemAllocFromPoolAsync(4 * N, None, self.lib.handle)[1])

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None, **_: object) -> object:
        self.meanwhile()
        if isinstance(stream, int) and stream > 2:
            event = self.lib.record()
            self.sim.cuStreamWaitEvent(stream, event.handle, 0)
        versioned = _dlpack.wants_versioned(max_version)
        return _dlpack.export_capsule(
            self.ptr, np.dtype(np.float32), (N,), (4,), device=(2, 0), owner=self, versioned=versioned
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def free(self) -> None:
        self.lib.synchronize()
        self.sim.cuMemFreeAsync(self.ptr, self.lib.handle)
        self.lib.synchronize()
        self.lib.close()


def test_a_stream_closed_while_a_producer_orders_a_borrow_is_destroyed_after_it(sim: SimDriver) -> None:
    """Hole: ``tc.borrow(obj, stream=s)`` checked ``s`` open and handed its raw handle to the producer
    (``__dlpack__(stream=handle)``), outside the stream's counted uses: a ``s.close()`` while the producer ran (here
    its own code; a finalizer at one of cuda.core's or the producer's allocations does the same) destroyed ``s``
    before the producer's ``cuStreamWaitEvent`` on the handle (a wait on a destroyed stream, which the driver may
    have given to a new one). Now the destroy waits for the producer; a borrow on a closed stream is refused."""
    on_destroyed = _spy_destroyed(sim, [("cuStreamWaitEvent", 0)])
    stream = tc.Stream()
    producer = _Producer(sim, stream.close)
    view = tc.borrow(producer, stream=stream)
    assert stream.closed
    assert on_destroyed == [], f"the producer waited on a destroyed stream: {on_destroyed}"
    assert [e for e in sim.log if e == ("stream_destroy", stream.handle)], "the close never destroyed the stream"
    with pytest.raises(tc.StreamClosedError, match=r"was closed: create a new Stream"):
        tc.borrow(producer, stream=stream)
    del view
    producer.free()


# -- hole: a deferred free enqueued on a stream a finalizer closed while it ordered the free -------------------------


def test_a_stream_closed_while_a_deferred_free_is_ordered_is_destroyed_after_it(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Hole: a free asked for inside a host function is deferred to the next safe point (`_reaper.drain`, run by a
    synchronize, outside ``use_lock``); there it made the freeing stream wait for the buffer's uses (event waits:
    allocations, where the collector runs finalizers) and then passed ``stream._raw`` to ``cuMemFreeAsync``. A
    finalizer closing that stream in between (not inside a use: no ``use_lock`` was held, so the close was not
    refused) destroyed it first: a free enqueued on a destroyed stream, which the driver may have given to a new one
    (the memory released in another stream's order, before the uses it was to wait for). Each collection point is
    tried; no ``cuMemFreeAsync`` names a destroyed stream."""
    on_destroyed = _spy_destroyed(sim, [("cuMemFreeAsync", 1)])
    other = tc.Stream()
    fired_inside = 0
    for n in range(1, 80):
        home = tc.Stream()
        x, y, z = (tc.DeviceBuffer.from_host(np.ones(N, np.float32), stream=home) for _ in range(3))
        tc.launch(vec_add, 1, N, [x, N, 1, y, N, 1, z, N, 1], signature=VEC_ADD_SIGNATURE, stream=other)
        with tc.host_callback():  # as tile.aio's trampoline runs a host function: the release waits for a safe point
            x.free()
        assert _reaper.pending()
        refused: list[int] = []

        def close(home: tc.Stream = home, refused: list[int] = refused) -> None:
            try:
                home.close()
            except tc.StateError:  # a close inside a use on this thread: refused, the stream left open
                refused.append(1)

        _at_allocation(n, _reaper.drain, close)
        _reaper.drain()
        if not home.closed and not refused:  # the drain made fewer collections than n: every point was tried
            break
        fired_inside += 1
        other.synchronize()
    assert fired_inside > 0, "the finalizer never ran inside the deferred free"
    assert on_destroyed == [], f"frees enqueued on destroyed streams: {on_destroyed}"
    other.synchronize()


# -- held: Stream.in_use counts the block, refuses a closed stream ---------------------------------------------------


def test_in_use_defers_a_close_made_inside_it_and_refuses_a_closed_stream(sim: SimDriver) -> None:
    """``with stream.in_use() as raw``: a close inside the block closes the stream but destroys it at the block's end
    (never before a driver call in the block); a closed stream is refused."""
    destroys = len([e for e in sim.log if e[0] == "stream_destroy"])
    stream = tc.Stream()
    with stream.in_use() as raw:
        stream.close()
        assert stream.closed
        assert len([e for e in sim.log if e[0] == "stream_destroy"]) == destroys
        assert int(raw) == stream.handle
    assert len([e for e in sim.log if e[0] == "stream_destroy"]) == destroys + 1
    with pytest.raises(tc.StreamClosedError, match=r"was closed: create a new Stream"), stream.in_use():
        pass
