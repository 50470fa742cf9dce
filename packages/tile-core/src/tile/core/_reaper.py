"""Finalizers that fire at a bad time: their driver calls wait for the next safe point.

A handle's finalizer (``__del__`` of a `DeviceBuffer`, `PinnedBuffer`, `Stream`, `Event`) runs wherever the last
reference drops or the garbage collector happens to run: possibly inside a CUDA host function (``cuLaunchHostFunc``,
e.g. tile.aio's ``host_call``), where CUDA forbids every driver call (``CUDA_ERROR_NOT_PERMITTED``, or a deadlock:
the stream waits for the callback), or on a thread that holds `use_lock` while the work the finalizer would wait for
needs that lock (a host function that copies). So:

- code that runs Python inside a host function marks it with :func:`host_callback`; a finalizer that fires there
  queues its work (:func:`defer`) instead of calling the driver;
- a finalizer that runs inside a garbage collection (:func:`collecting`) frees nothing there: a finalizer of other
  garbage collected with it may keep the handle (resurrect it), and the memory would be freed under it; its release
  holds the handle and runs at a safe point once nothing else refers to it (a resurrected handle stays allocated);
- a finalizer never blocks: pinned memory (whose ``cuMemFreeHost`` synchronizes the context, so it would wait for
  its pending uses and everything else queued) is always queued, never released inline;
- a driver call asked for inside a host function (an allocation, a copy, a launch, a synchronize: tile.core's
  entry points all reach the driver through :func:`driver`) raises `HostFunctionError` before it is made;
- the queue is drained at the next safe point (:func:`drain`: an allocation, a free, a synchronize), on a thread
  that may call the driver; a release that blocks waits for a safe point where this thread holds no ``use_lock``
  (work it would wait for may need that lock), and one that still cannot run (a use pending) is queued again.

Invariant: a deferred release runs exactly once, never inside a host function, and never before the uses it was
waiting for are complete; until then the memory stays allocated (a late release, never an early one).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from types import ModuleType

import tile.bindings as tb

__all__ = [
    "collecting",
    "defer",
    "deferring",
    "drain",
    "driver",
    "held_elsewhere",
    "host_callback",
    "inside_use",
    "pending",
    "refuse_in_host_function",
]

_THREAD = threading.local()  # .depth: host functions this thread is running (nested ones count)
_queue: list[tuple[Callable[[], bool], bool]] = []  # (release, blocks): True once done, False to be retried later
_queue_lock = threading.Lock()  # guards the list only: held for an append or a swap, never while a release runs
# Host functions running on any thread: the driver's entry points ask `deferring` only when one runs (a read of this
# list is what the hot launch paths pay; tile.frontend's compiled relaunch reads it too).
RUNNING = [0]
_running_lock = threading.Lock()


_collections = [0]  # garbage collections under way (gc.callbacks: "start" and "stop" of each)


def _on_collection(phase: str, _info: dict[str, int]) -> None:
    # Never below 0: a "stop" whose "start" came before this callback was registered must not hide the next one.
    _collections[0] = _collections[0] + 1 if phase == "start" else max(0, _collections[0] - 1)


gc.callbacks.append(_on_collection)


def collecting() -> bool:
    """True while the garbage collector runs finalizers: a handle finalized now may be resurrected by another
    finalizer of the same garbage, so its release must wait until nothing refers to it (`held_elsewhere`)."""
    return _collections[0] > 0


def held_elsewhere(obj: object) -> bool:
    """Whether anything but the caller's one reference (an attribute or list slot) holds ``obj``: a deferred release
    holding a finalized handle waits while a resurrection keeps it."""
    return sys.getrefcount(obj) > _HELD_ONCE


_HELD_ONCE = 3  # sys.getrefcount's count of an object held by one slot: the slot, this frame's argument and its own


@contextlib.contextmanager
def host_callback() -> Iterator[None]:
    """Mark the calling code as running inside a CUDA host function (``cuLaunchHostFunc``).

    tile.core finalizers that fire meanwhile make no driver call: their releases run at the next safe point on a
    thread that may call the driver. Libraries that run Python in host functions (tile.aio does) wrap it in this.
    """
    _THREAD.depth = getattr(_THREAD, "depth", 0) + 1
    with _running_lock:
        RUNNING[0] += 1
    try:
        yield
    finally:
        with _running_lock:
            RUNNING[0] -= 1
        _THREAD.depth -= 1


def deferring() -> bool:
    """True while this thread runs a host function: no driver call may be made now."""
    return getattr(_THREAD, "depth", 0) > 0


def refuse_in_host_function(what: str = "this tile.core call") -> None:
    """Raise `HostFunctionError` when this thread runs a host function (no driver call may be made now)."""
    if RUNNING[0] and getattr(_THREAD, "depth", 0) > 0:
        from tile.core._errors import HostFunctionError

        raise HostFunctionError(
            f"{what} calls the CUDA driver inside a CUDA host function (tile.aio.host_call's function), where CUDA "
            "forbids driver calls (it fails them or deadlocks): do the allocation, copy, launch or synchronize after "
            "the host function, e.g. in a .then() step or after .sync()"
        )


def _refuse_query() -> None:
    if RUNNING[0]:
        refuse_in_host_function("this device query (tile.core.Device, tile.bindings.device_count...)")


tb.set_query_guard(_refuse_query)  # tile.bindings' device queries, which Device asks, refused the same way


def driver() -> ModuleType:
    """``tile.bindings.driver()`` for tile.core's driver calls, refused inside a host function."""
    if RUNNING[0]:
        refuse_in_host_function()
    return tb.driver()


def defer(release: Callable[[], bool], *, blocks: bool = False) -> None:
    """Queue ``release`` (returns True once done, False to be retried) for the next safe point; ``blocks`` when it
    may wait for other work (it then runs only where this thread holds no ``use_lock``)."""
    with _queue_lock:
        _queue.append((release, blocks))


def _holds_use_lock() -> bool:
    from tile.core._stream import use_lock

    return bool(use_lock._is_owned())  # type: ignore[attr-defined]  # RLock's own test (both implementations)


def inside_use() -> bool:
    """Whether this thread holds ``use_lock`` already: a free asked for now is made inside another use's window (its
    checks passed, its enqueue still to come: a finalizer the garbage collector ran at one of its allocations), so
    the memory must not be released before that use is enqueued and recorded."""
    return _holds_use_lock()


def pending() -> int:
    """How many releases wait for a safe point."""
    return len(_queue)


def drain() -> None:
    """Run the queued releases (a safe point: never inside a host function); those not yet possible stay queued."""
    if not _queue or deferring():
        return
    may_block = not _holds_use_lock()
    retry: list[tuple[Callable[[], bool], bool]] = []
    while True:  # releases queued by these releases run too (a held producer dropped, its buffer's free deferred)
        with _queue_lock:
            batch = list(_queue)
            _queue.clear()
        if not batch:
            break
        for release, blocks in batch:
            if blocks and not may_block:
                retry.append((release, blocks))
                continue
            try:
                done = release()
            except Exception:  # a release that fails (a driver torn down) is dropped unrun: a leak, not an early free
                done = True
            if not done:
                retry.append((release, blocks))
    if retry:
        with _queue_lock:
            _queue.extend(retry)
