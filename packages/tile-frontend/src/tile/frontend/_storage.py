"""Storage: the memory that tensor handles view, and the registry that finds handles overlapping a byte range.

A `Storage` is one allocation: owned host memory (the CPU backend: a numpy byte array), an owned
``tile.core.DeviceBuffer`` (the GPU backend), or borrowed foreign memory (numpy/torch/cupy through DLPack or
``__cuda_array_interface__``), which Tile never frees and which may overlap any other storage.

Invariants:
- Every live handle (a tensor, a view, the tensor inside a partition, an op's in-flight argument) is in its
  storage's weak registry (`Storage.add`); a handle leaves it when moved, and an entry whose handle was collected
  counts as absent (`live` skips it; `sweep` removes it). An object exported through ``__dlpack__`` is tracked the
  same way, for as long as the consumer keeps it.
- Overlap is decided by absolute byte ranges ``[lo, hi)`` on one device, never by object identity: two handles
  of different storages conflict when their ranges intersect (foreign memory makes that possible).
- Memory is released only when no pending launch uses it and no DLPack consumer or Tile borrow views it: ``free`` is
  deferred until ``pending`` is 0, no ``tile.from_dlpack`` borrow overlaps it (whatever interface it came through:
  a re-import of our own export included) and (device buffers) the last export is gone; a device buffer's free is
  then stream-ordered by tile.core after every use the launches recorded. A freed storage whose free is deferred
  still takes part in overlap checks (its pending launches' handles and its exports count) until it is dropped.
- A tensor held by a writer (a partition, a loan: `Storage.hold`) blocks new borrows: a foreign storage overlapping
  it cannot be made until the writer gives it back (`unhold`), so no handle appears on memory a launch or another
  library may be writing. Together with the overlap check at partition and lend, a writer's memory has one handle.
- Every step that checks a handle's state and then changes it (a launch's checks and moves, partition, unpartition,
  share, unshare, views, free, exports, reads, the pending counts) holds `OWNERSHIP`, so threads sharing handles
  take each handle at most once: two threads can never both move one output into a launch.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, ParamSpec, Protocol, TypeVar

import numpy as np

__all__ = ["HOST", "OWNED", "OWNERSHIP", "Handle", "Storage", "overlapping", "owning"]

P = ParamSpec("P")
R = TypeVar("R")

HOST = "cpu"
"""The device of host (CPU backend) storage."""

OWNERSHIP = threading.RLock()
"""Held while a handle's state is checked and changed (re-entrant: a launch moves handles whose moves take it too).
Never held across a compile: a kernel call checks and compiles first, then checks again and moves under it."""


def owning(fn: Callable[P, R]) -> Callable[P, R]:
    """Run the handle method ``fn`` holding `OWNERSHIP` with the cyclic garbage collector paused (its check and its
    change become one step: see `OWNED`)."""

    @functools.wraps(fn)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        with OWNERSHIP:
            if not _gc_enabled():  # nested in another step (or the application paused the collector itself)
                return fn(*args, **kwargs)
            _gc_disable()
            try:
                return fn(*args, **kwargs)
            finally:
                _gc_enable()

    return locked


_gc_enabled, _gc_disable, _gc_enable = gc.isenabled, gc.disable, gc.enable
_PAUSED: list[bool] = []  # per `OWNED` step entered (one thread at a time: under the lock): did it pause the collector


class _Owned:
    """``with OWNED:`` holds `OWNERSHIP` with the cyclic garbage collector paused for the outermost step.

    OWNERSHIP is re-entrant, so code that runs in the middle of a step on the same thread could take a handle between
    the step's check and its change. The collector is such code: it runs ``__del__`` methods and weakref callbacks of
    unreachable cycles at whatever allocation crosses its threshold, and a user's ``__del__`` may hold a handle (it
    could unpartition the partition a launch has just checked and is about to move). So no collection starts inside a
    step; one that is due runs after it. (A signal handler that uses Tile handles can interrupt a step too: that is
    outside the contract, see the ownership guide.)
    """

    __slots__ = ()

    def __enter__(self) -> None:
        OWNERSHIP.acquire()
        paused = _gc_enabled()
        _PAUSED.append(paused)
        if paused:
            _gc_disable()

    def __exit__(self, *exc: object) -> None:
        try:
            if _PAUSED.pop():
                _gc_enable()
        finally:
            OWNERSHIP.release()


OWNED = _Owned()


class Handle(Protocol):
    """What the registry needs from a handle: its absolute byte range and a description for messages."""

    def _byte_range(self) -> tuple[int, int]: ...
    def _describe(self) -> str: ...


class _Export:
    """A buffer handed to another library through ``__dlpack__``; live while the consumer holds it."""

    __slots__ = ("__weakref__", "hi", "lo", "what")

    def __init__(self, lo: int, hi: int, what: str) -> None:
        self.lo, self.hi, self.what = lo, hi, what

    def _byte_range(self) -> tuple[int, int]:
        return self.lo, self.hi

    def _describe(self) -> str:
        return self.what


# Live borrowed storages by id (a dict, not a WeakSet: a launch tests its truth, and WeakSet.__len__ is Python code).
_FOREIGN: dict[int, weakref.ref[Storage]] = {}
_ALL: weakref.WeakSet[Storage] = weakref.WeakSet()
# A registry entry is a weak reference without a callback (a callback closure per handle per launch would triple the
# objects a launch allocates): entries of collected handles stay until a sweep, run when the registry has doubled.
_SWEEP_SLACK = 8


class Storage:
    """One allocation (owned or borrowed) that handles view.

    Attributes
    ----------
    device
        `HOST` or a ``tile.core.Device``.
    address, nbytes
        The byte range ``[address, address + nbytes)`` the storage covers.
    host
        The bytes as a flat uint8 numpy array (host storage), else None.
    buffer
        The ``tile.core.DeviceBuffer`` (owned device storage) or ``DeviceView`` (borrowed), else None.
    owned
        False for borrowed foreign memory (never freed by Tile).
    readonly
        True when the producer exported the memory read-only (it can never be an output).
    foreign_views
        Another library's zero-copy wrappers of this memory, cached by the Tile code that made them (tile.distributed's
        torch tensors, keyed by byte range and type), or None. Only Tile's own ops use them, after their handle
        checks; they are dropped before the memory is released (`_drop`), so none outlives a free or keeps the memory.
    """

    __slots__ = (
        "__weakref__",
        "_exports",
        "_handles",
        "_held",
        "_imports",
        "_sweep_at",
        "address",
        "buffer",
        "consumed",
        "device",
        "dropped",
        "foreign_views",
        "freed_at",
        "host",
        "keepalive",
        "nbytes",
        "owned",
        "pending",
        "readonly",
    )

    def __init__(
        self,
        device: Hashable,
        address: int,
        nbytes: int,
        *,
        host: np.ndarray[Any, Any] | None = None,
        buffer: Any = None,
        owned: bool = True,
        readonly: bool = False,
        keepalive: object = None,
    ) -> None:
        self.device, self.address, self.nbytes = device, address, nbytes
        self.host, self.buffer, self.owned, self.readonly, self.keepalive = host, buffer, owned, readonly, keepalive
        self._handles: dict[int, weakref.ref[Any]] = {}
        self._sweep_at = _SWEEP_SLACK
        self._exports: set[_Export] = set()  # each leaves through its finalizer, which holds it until then
        self._imports: set[_Export] = set()  # borrows of this memory made by tile.from_dlpack (same finalizers)
        # Tensors a writer holds (a partition, a loan): id -> (the tensor, what holds it). See `hold`.
        self._held: dict[int, tuple[weakref.ref[Any], str]] = {}
        self.pending = 0
        self.freed_at: str | None = None
        self.dropped = False
        self.foreign_views: dict[Any, Any] | None = None
        self.consumed = False  # device memory exported since the last `settle`: other libraries may have queued work
        with OWNED:  # `overlapping` iterates these registries under the lock
            if not owned:
                _refuse_held(device, address, address + nbytes)
                self._hold_overlapped()
                key = id(self)
                _FOREIGN[key] = weakref.ref(self, lambda _: _FOREIGN.pop(key, None))
            _ALL.add(self)

    def _hold_overlapped(self) -> None:
        """A borrow of memory that Tile owns (a re-import of our own export, through DLPack or an array interface)
        keeps that memory: its free is deferred until this borrow is gone, so the borrow never reads freed memory."""
        lo, hi = self.address, self.address + self.nbytes
        for other in list(_ALL):
            near = other.owned and not other.dropped and other.device == self.device
            if near and other.address < hi and lo < other.address + other.nbytes:
                token = _Export(lo, hi, "a tile.from_dlpack borrow of this memory")
                other._imports.add(token)
                weakref.finalize(self, other._export_gone, token)

    def hold(self, tensor: Handle, what: str) -> None:
        """Mark ``tensor`` (a handle of this storage) as held by a writer, ``what`` (a partition or a loan): no new
        borrow of its memory may be made until `unhold` (a new handle would read what a launch or another library is
        writing; every other handle that overlaps it was refused when the writer took it)."""
        self._held[id(tensor)] = (weakref.ref(tensor), what)

    def unhold(self, tensor: Handle) -> None:
        """The writer gave ``tensor`` back (unpartition, reclaim)."""
        self._held.pop(id(tensor), None)

    @classmethod
    def host_owned(cls, nbytes: int) -> Storage:
        """Allocate ``nbytes`` of host memory (64-byte aligned, so alignment facts match device allocations)."""
        raw = np.empty(max(nbytes, 1) + 64, np.uint8)
        skip = -raw.ctypes.data % 64
        data = raw[skip : skip + max(nbytes, 1)]
        return cls(HOST, int(data.ctypes.data), max(nbytes, 1), host=data)

    @classmethod
    def host_foreign(cls, lo: int, hi: int, readonly: bool, keepalive: object) -> Storage:
        """Borrow host bytes ``[lo, hi)`` that ``keepalive`` owns (a numpy array or a DLPack producer)."""
        n = max(hi - lo, 1)
        data = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(lo))
        return cls(HOST, lo, n, host=data, owned=False, readonly=readonly, keepalive=keepalive)

    def __repr__(self) -> str:
        kind = "owned" if self.owned else "borrowed"
        return f"<Storage {kind} {self.nbytes} bytes on {self.device!r} at 0x{self.address:x}>"

    def add(self, handle: Handle) -> None:
        """Register a live handle (a move re-keys its entry to the new handle, ``Tensor._hand_over``; the entry of a
        collected handle is swept out lazily)."""
        with OWNED:
            handles = self._handles
            handles[id(handle)] = weakref.ref(handle)
            if len(handles) > self._sweep_at:
                self.sweep()

    def sweep(self) -> None:
        """Drop the entries of collected handles (amortized: the next sweep waits until the registry doubles)."""
        handles = self._handles
        for key in [key for key, ref in handles.items() if ref() is None]:
            del handles[key]
        self._sweep_at = 2 * len(handles) + _SWEEP_SLACK

    def live(self) -> Iterator[Handle]:
        """Every live handle and export of this storage."""
        for ref in list(self._handles.values()):
            if (handle := ref()) is not None:
                yield handle
        yield from list(self._exports)

    def export(self, lo: int, hi: int, what: str, consumer_view: object) -> _Export:
        """Track a buffer exported to another library as a borrow until ``consumer_view`` is collected."""
        token = _Export(lo, hi, what)
        self._exports.add(token)
        self.consumed = self.consumed or self.buffer is not None
        # The finalizer holds the token (and this storage) as long as the view lives, then runs a deferred free.
        weakref.finalize(consumer_view, self._export_gone, token)
        return token

    def _export_gone(self, token: _Export) -> None:
        with OWNED:  # a finalizer: it runs in whichever thread collects the consumer's view
            self._exports.discard(token)
            self._imports.discard(token)
            if self.freed_at is not None and self.pending == 0:
                self._drop()

    def release(self) -> None:
        """A pending launch finished with this storage: perform a deferred free when it was the last."""
        self.pending -= 1
        if self.pending == 0 and self.freed_at is not None:
            self._drop()

    def free(self, site: str) -> None:
        """Free the memory now, or when the last pending launch is done (a launch that is not even enqueued yet
        still counts: it holds the memory from the moment it was made)."""
        self.freed_at = site
        if self.pending == 0:
            self._drop()

    def settle(self) -> None:
        """Wait for the device work other libraries queued on this memory through exports that are gone now.

        A consumer (torch, cupy) queues work on its own stream; dropping its array does not mean that work ran. So
        before Tile writes the memory (a partition, a loan, a reclaimed loan) or frees it, the device finishes it.
        """
        if self.consumed:
            self.device.synchronize()  # type: ignore[attr-defined]  # device storage: a tile.core.Device
            self.consumed = False

    def _drop(self) -> None:
        self.foreign_views = None  # first: a cached DLPack wrapper would block the buffer's free, or keep host memory
        if self._imports or (self.buffer is not None and self.owned and len(self._exports)):
            return  # another library (or a borrow of ours) still views the memory: the last one's finalizer frees it
        if self.buffer is not None and self.owned:
            self.settle()
            self.buffer.free()  # stream-ordered by tile.core after every use it recorded
        self.host, self.buffer, self.keepalive = None, None, None
        self.dropped = True


def _refuse_held(device: Hashable, lo: int, hi: int) -> None:
    """Raise `BorrowError` when a new borrow of ``[lo, hi)`` on ``device`` would overlap memory a writer holds."""
    for storage in list(_ALL):
        if storage.device != device or storage.dropped or not storage._held:
            continue
        for key, (ref, what) in list(storage._held.items()):
            held = ref()
            if held is None:
                del storage._held[key]
                continue
            a, b = held._byte_range()
            if a < hi and lo < b:
                from tile.frontend._errors import BorrowError
                from tile.frontend._site import user_site

                raise BorrowError(
                    f"cannot borrow this memory (at {user_site()}): a writer holds it, {what}, and a launch or "
                    "another library may be writing it now. Give it back first (.unpartition() / .reclaim()), then "
                    "borrow it, or borrow a copy"
                )


@owning
def overlapping(storage: Storage, lo: int, hi: int, exclude: tuple[object, ...] = ()) -> list[Handle]:
    """Live handles whose absolute byte range intersects ``[lo, hi)`` on ``storage``'s device.

    Only the storage's own handles can overlap unless foreign memory is borrowed somewhere: then every storage
    on the device is scanned, because a borrow may alias anything (including a re-imported export of ours).
    """
    skip = {id(e) for e in exclude}  # the excluded objects are alive (``exclude`` holds them): ids are unique
    if not _FOREIGN and not storage._exports:
        if storage._handles.keys() <= skip:
            return []  # the common launch: the storage's only handles are the launch's own arguments
        storage.sweep()  # entries of collected handles would keep failing the test above
    # A dropped storage's range may already belong to a new allocation: its stale handles alias nothing. A freed one
    # that is not dropped yet is still read by pending launches (their handles count) or viewed by exports.
    pools = [storage] if not _FOREIGN else [s for s in list(_ALL) if s.device == storage.device and not s.dropped]
    found: list[Handle] = []
    for pool in pools:
        stale = pool.freed_at is not None and pool.pending == 0  # every handle left is unusable; exports still count
        for handle in pool.live():
            if id(handle) in skip or (stale and not isinstance(handle, _Export)):
                continue
            a, b = handle._byte_range()
            if a < hi and lo < b:
                found.append(handle)
    return found
