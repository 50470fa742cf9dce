"""Owned device memory: stream-ordered, freed exactly once, never under pending work.

Invariants: allocated with ``cuMemAllocFromPoolAsync`` from Tile's pool, on its home ``stream`` or, for a *ready*
buffer (``allocate(..., ready=True)``), on the device's private allocation stream, which carries nothing but
allocations and is synchronized before ``allocate`` returns (so the memory is usable by any stream at once, and that
synchronize never waits for a free or a kernel); its home stream defaults to a private stream that never carries
a free either. Freed with ``cuMemFreeAsync`` exactly once - by :meth:`free`,
``with``, or the garbage collector - after the freeing stream waits for every use recorded on other streams
(:meth:`record_use`) and for every stream a DLPack consumer named, so the memory is never released under pending
work: on the home stream, or for a ready buffer on the device's private free stream, which also waits for
everything queued on the home stream so far (home-stream uses need no recording either way). A free is never
enqueued while the home stream, or a consumer's stream it must wait for, captures a graph (it is deferred until the
capture ends); any use of a freed buffer raises :class:`UseAfterFreeError` before touching the driver; an explicit
free while a DLPack consumer still views the memory raises :class:`StateError` and frees nothing.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import tile.bindings as tb
from tile.bindings import check
from tile.core import _dlpack, _reaper
from tile.core._context import Device
from tile.core._errors import (
    DoubleFreeError,
    LayoutMismatchError,
    StateError,
    UseAfterFreeError,
    factory_error,
    untracked_export_error,
)
from tile.core._event import Event
from tile.core._final import Exact, Frozen
from tile.core._layout import as_dtype, as_index, as_shape, c_strides, check_span, view_nbytes
from tile.core._nocopy import Uncopyable
from tile.core._stream import (
    Stream,
    _relaxed_capture,
    as_stream,
    invalidation,
    open_successor,
    thread_is_capturing,
    use_lock,  # defined beside Stream.close, which holds it too; documented there
)

if TYPE_CHECKING:
    from tile.core._view import DeviceView

__all__ = ["DeviceBuffer", "Uses", "use_lock"]

_deferred_lock = threading.RLock()  # re-entrant: a GC-run finalizer may free while it is held
_deferred: list[_PendingFree] = []  # frees that met a capturing stream, retried by the next allocation or free


def _drain_deferred() -> None:
    _reaper.drain()  # finalizers that fired inside a host function (a safe point: see tile.core._reaper)
    if not _deferred:
        return
    with _deferred_lock:
        pending = list(_deferred)
        _deferred.clear()
    for free in pending:
        free.run()


@dataclass(frozen=True)
class _PendingFree:
    """Everything a stream-ordered free needs: the pointer, its stream and the uses it must wait for."""

    ptr: int
    device: Device
    stream: Stream
    uses: tuple[Event, ...]
    foreign_streams: tuple[int, ...]
    ready: bool = False  # a ready buffer: freed on the device's private free stream, after the home stream

    def released(self) -> bool:
        """`run`, as a deferred release of ``tile.core._reaper`` (done once enqueued or deferred again)."""
        self.run()
        return True

    def run(self) -> None:
        """Enqueue the free after its uses, or defer all of it while a stream it must follow captures a graph.

        Under ``use_lock`` (a deferred release runs at a safe point that may hold none): the stream the free is
        enqueued on is chosen open and used with no close in between, as every use's (review 42)."""
        with use_lock:
            self._run()

    def _run(self) -> None:
        home = open_successor(self.stream)
        # Not even the waits: on the home stream they would become nodes of the user's graph, and an event recorded
        # in a capture would pull the freeing stream (and the free) into it.
        if home.is_capturing() or any(_capturing(handle) for handle in self.foreign_streams):
            with _deferred_lock:
                _deferred.append(self)
            return
        target = self.device._private_stream("free") if self.ready else home
        with _relaxed_capture() if thread_is_capturing() else contextlib.nullcontext():
            for event in self.uses:
                target.wait(event)
            # Home-stream uses are never recorded: they are all queued there by now (the buffer is marked freed, so
            # no new one can come). Nothing to wait for once the home stream is idle (one query, no event).
            if target is not home and not home.query():
                target.wait(home)
            for handle in self.foreign_streams:
                _wait_foreign(target, handle)
            self.device.make_current()
            check(_reaper.driver().cuMemFreeAsync(self.ptr, target._raw), "cuMemFreeAsync")


class _Unreferenced:
    """The release of a buffer finalized inside a garbage collection (a `tile.core._reaper` deferred release): it
    holds the buffer and frees it once nothing else refers to it; a buffer brought back by another finalizer stays
    allocated (its own finalizer does not run again, so this release is what frees it, later)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: DeviceBuffer) -> None:
        self.buffer = buffer

    def __call__(self) -> bool:
        if self.buffer._freed:  # brought back, then freed by its owner: nothing left to do
            return True
        if _reaper.held_elsewhere(self.buffer):  # (no local name for it before this test: it would count)
            return False
        buffer = self.buffer
        with use_lock:
            buffer._freed = True
            buffer._release()
        return True


def _capturing(handle: int) -> bool:
    """Whether a consumer's stream captures a graph now (False for one that no longer exists).

    The legacy NULL stream answers ``CUDA_ERROR_STREAM_CAPTURE_IMPLICIT`` while another stream captures: an event
    recorded there now would fail, and the free would no longer wait for the consumer, so that counts as capturing.
    """
    d = _reaper.driver()
    try:
        status = check(d.cuStreamIsCapturing(d.CUstream(handle)), "cuStreamIsCapturing")
    except tb.CudaError as exc:
        return exc.name == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    return bool(status != d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def _wait_foreign(target: Stream, handle: int) -> None:
    """Order ``target`` after everything queued so far on a consumer's stream (skipped if it no longer exists)."""
    d = _reaper.driver()
    event = Event(target.device)
    try:
        check(d.cuEventRecord(event._raw, d.CUstream(handle)), "cuEventRecord")
    except tb.CudaError:
        return
    target.wait(event)


def _handle_reused(ordered: Stream | None) -> bool:
    """Whether a stream handle a buffer was ordered on may now name another stream: the stream it was ordered on
    was closed or collected (the driver reuses a destroyed stream's handle). While that stream lives open, any
    wrapper of its handle is the same CUDA stream."""
    return ordered is None or ordered.closed


def _wait_during_capture(event: Event) -> None:
    """Block the host until ``event`` (recorded outside the capture) is done, while this thread captures.

    A capture may not depend on another stream's uncaptured work (``CUDA_ERROR_STREAM_CAPTURE_ISOLATION``), so the
    host waits instead and the capture and every replay come after it. A thread-local capture forbids the event
    wait itself (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``), though this event has nothing to do with the graph: the
    thread is switched to relaxed mode for the wait only (what ``cuThreadExchangeStreamCaptureMode`` is for).
    """
    with _relaxed_capture():
        event.synchronize()


class Uses:
    """Events recorded on streams other than the home stream, pruned as they complete."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, stream: Stream) -> None:
        self.add_event(stream.record())

    def add_event(self, event: Event) -> None:
        events = self.events
        for held in events:
            if held is event:  # a stream's use mark, re-recorded since: it already stands for this use
                return
        if len(events) >= 8:
            events = self.events = [e for e in events if not e.query()]
        events.append(event)


class DeviceBuffer(Frozen, Uncopyable, metaclass=Exact):
    """An owned, stream-ordered device allocation. Make one with :meth:`allocate` or :meth:`from_host`.

    Final, and ``nbytes``, ``device`` and ``stream`` are read-only: the checks trust them (see ``tile.core._final``).
    """

    _frozen = frozenset({"nbytes", "device", "stream"})

    _copy_fix = "for a second buffer with the same bytes, allocate one and copy into it with tile.core.copy(dst, src)"

    nbytes: int
    device: Device
    stream: Stream
    _ptr: int
    _freed: bool
    _uses: Uses
    _foreign_streams: set[int]
    _ordered: dict[int, weakref.ref[Stream]]
    _ready: bool

    def __init__(self) -> None:
        raise factory_error("DeviceBuffer", "DeviceBuffer.allocate(nbytes, ...) or DeviceBuffer.from_host(array, ...)")

    @classmethod
    def allocate(
        cls, nbytes: int, *, device: Device | None = None, stream: object = None, ready: bool = False
    ) -> DeviceBuffer:
        """Allocate ``nbytes`` (> 0) on ``device``, ordered on ``stream`` (default: the device's default stream).

        The memory is ready for any work queued on ``stream`` afterwards; use it from another stream only after
        that stream waits for this one (Tile's own copies and launches do that wait).

        With ``ready=True`` the allocation is complete when the call returns: any stream may use the memory at once
        (even through its plain address), without ordering. It is made on the device's private allocation stream,
        which carries nothing else, so the wait is for the allocation alone, never for queued frees or kernels. Its
        free goes to the device's private free stream, after the home stream and every recorded use. The buffer's
        ``stream`` (where its copies go by default, and whose uses need no recording) is ``stream``, or without one
        a private stream of the device that carries ready buffers' copies and never a free, so ``from_host`` and
        the default copies wait for their own work, not for frees (the default stream may carry other buffers').
        """
        size = as_index(nbytes)
        if size is None or size <= 0:
            raise LayoutMismatchError(f"cannot allocate {nbytes!r} bytes: pass a positive int")
        if device is None:
            device = stream.device if isinstance(stream, Stream) else Device(0)
        home = device._private_stream("home") if ready and stream is None else as_stream(stream, device)
        on = device._private_stream("alloc") if ready else home
        device.make_current()
        # While this thread captures a graph, the allocation (a captured step's temporaries, on the buffer's own
        # stream, not the captured one) runs in relaxed capture mode: thread-local mode refuses it.
        with _relaxed_capture() if thread_is_capturing() else contextlib.nullcontext():
            _drain_deferred()
            pool = device.memory_pool.handle
            ptr: Any = check(_reaper.driver().cuMemAllocFromPoolAsync(size, pool, on._raw), "cuMemAllocFromPoolAsync")
        if ready:
            on.synchronize()  # only allocations are queued there, and the pool adds no waits: this waits for them
        self = cls.__new__(cls)
        self._ptr, self.nbytes, self.device, self.stream = int(ptr), size, device, home
        self._freed, self._uses, self._foreign_streams = False, Uses(), set[int]()
        self._ordered, self._ready = {home.handle: weakref.ref(home)}, bool(ready)
        return self

    @classmethod
    def from_host(
        cls, array: Any, *, device: Device | None = None, stream: object = None, sync: bool = True, ready: bool = False
    ) -> DeviceBuffer:
        """Allocate a buffer the size of a host array (or bytes) and copy it in (on ``stream``; ``ready`` as in
        :meth:`allocate`)."""
        from tile.core._copy import host_region

        region = host_region(array, writable=False)
        buffer = cls.allocate(max(region.nbytes, 1), device=device, stream=stream, ready=ready)
        if region.nbytes:
            buffer.copy_from(array, sync=sync)
        return buffer

    def __repr__(self) -> str:
        state = "freed" if self._freed else f"0x{self._ptr:x}"
        return f"<DeviceBuffer {self.nbytes} bytes on device {self.device.ordinal}, {state}>"

    @property
    def closed(self) -> bool:
        """True once the buffer was freed."""
        return self._freed

    @property
    def ptr(self) -> int:
        """The device address; raises UseAfterFreeError once freed."""
        if self._freed:
            raise UseAfterFreeError(f"{self!r} was freed: allocate a new buffer (pointers die with their buffer)")
        return self._ptr

    def _before_use(self, stream: Stream) -> None:
        """Order ``stream`` after the home stream's work so far (the allocation, for a buffer that is not ready, and
        the copies and fills queued there), once per stream.

        A ready buffer's allocation is complete already, but what its home stream queued since (``from_host(...,
        sync=False)``, ``copy_from``, ``fill``) is not: skipping the wait let a kernel on another stream read the
        buffer before the copy landed. Keyed by handle, but a handle counts as ordered only while the stream it was
        ordered as is alive and open.
        """
        known = self._ordered.get(stream.handle)
        ordered = known() if known is not None else None
        if ordered is not stream and _handle_reused(ordered):
            if self._freed:
                raise UseAfterFreeError(f"{self!r} was freed: it cannot be used on {stream!r}")
            home = self.stream
            # A closed home stream's last work (the allocation among it) is its final event: the buffer stays usable.
            done = home._final if home.closed else home.record()
            if done is not None and stream.is_capturing():  # None: a borrowed home stream gone before its close
                _wait_during_capture(done)
            elif done is not None:
                stream.wait(done)
            self._ordered[stream.handle] = weakref.ref(stream)

    def record_use(self, stream: Stream) -> None:
        """Note that work queued on ``stream`` uses the buffer: the free will wait for it.

        Tile's own copies and launches call this; call it yourself after queueing foreign work on the memory.
        Work captured into a graph is not recorded (an event recorded in a capture can never be waited on, and
        the capture ran nothing): whoever replays the graph keeps the buffer alive until the replays are done.
        """
        with use_lock:  # a free on another thread comes before the check or after the use is recorded
            if self._freed:
                raise UseAfterFreeError(f"{self!r} was freed: it cannot be used on {stream!r}")
            if stream is not self.stream and not stream.is_capturing():
                self._uses.add(stream)

    def free(self) -> None:
        """Release the memory, stream-ordered after every recorded use (exactly once).

        Asked for inside another use of device memory on this thread (a finalizer the garbage collector ran in the
        middle of a launch or copy), the buffer is refused by every use from then on, and its memory released once
        that use is enqueued and recorded (at the next safe point: see ``tile.core._reaper``).

        Raises
        ------
        DoubleFreeError
            When the buffer was already freed.
        StateError
            While a DLPack consumer (torch, cupy, ...) still views the memory; nothing is freed.
        """
        inside = _reaper.inside_use()  # before taking the lock: whether this thread held it already
        with use_lock:
            if self._freed:
                raise DoubleFreeError(f"{self!r} was already freed: free each buffer once (or use `with`)")
            self._take()
            self._release(later=inside)

    def _take(self) -> None:
        """Mark the buffer freed, unless another library still views it (the caller holds ``use_lock``)."""
        if _dlpack.live_exports(self):
            raise StateError(
                f"{self!r} is still viewed through DLPack by another library: drop that tensor before freeing"
            )
        self._freed = True

    def _release(self, *, later: bool = False) -> None:
        """Free the memory of a buffer this thread just marked freed (at the next safe point inside a host function,
        where no driver call may be made: see ``tile.core._reaper``). ``later``: the free was asked for inside
        another use's window on this thread (`_reaper.inside_use`: a finalizer the collector ran between a launch's
        checks and its enqueue, which may use this very memory); every later check refuses the buffer at once, and
        the memory is released once this thread has let ``use_lock`` go, after that use's recorded uses."""
        invalidation[0] += 1
        if later:
            _reaper.defer(self._release_later, blocks=True)
            return
        self._release_now()

    def _release_later(self) -> bool:
        with use_lock:
            self._release_now()
        return True

    def _release_now(self) -> None:
        uses, self._uses.events = tuple(self._uses.events), []
        pending = _PendingFree(self._ptr, self.device, self.stream, uses, tuple(self._foreign_streams), self._ready)
        if _reaper.deferring():
            _reaper.defer(pending.released)
            return
        _drain_deferred()
        pending.run()

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        inside = _reaper.inside_use()  # see `free`
        with use_lock:
            if self._freed:
                return
            self._take()
            self._release(later=inside)

    def __del__(self) -> None:
        if not getattr(self, "_freed", True):
            with contextlib.suppress(Exception):  # interpreter shutdown may have torn the driver module down
                if _reaper.collecting():
                    # A finalizer of the garbage collected with this buffer may keep it (or a handle that holds its
                    # address, such as a tile.frontend tensor): free it at a safe point once nothing refers to it.
                    _reaper.defer(_Unreferenced(self))
                    return
                self._freed = True  # nothing else refers to the buffer any more: no other thread can free it
                self._release()

    def view(self, dtype: Any = np.uint8, shape: int | tuple[int, ...] | None = None, offset: int = 0) -> DeviceView:
        """Return a dense, typed view of part of the buffer (bounds and alignment checked).

        Parameters
        ----------
        dtype : dtype-like
            Element type.
        shape : int or tuple of int, optional
            Extents; by default as many elements as fit after ``offset``.
        offset : int
            Byte offset of element 0.
        """
        from tile.core._view import DeviceView

        dt = as_dtype(dtype)
        offset = check_span(offset, 0, self.nbytes, what=f"view of {self!r}")  # an exact int from here on
        dims = as_shape(shape) if shape is not None else ((self.nbytes - max(offset, 0)) // dt.itemsize,)
        view_nbytes(dt, dims, offset, self.nbytes)
        strides = c_strides(dims, dt.itemsize)
        return DeviceView(self.ptr + offset, dt, dims, strides, device=self.device, owner=self, buffer=self)

    def copy_from(self, src: Any, *, offset: int = 0, stream: object = None, sync: bool = True) -> None:
        """Copy all of ``src`` (host array, bytes, PinnedBuffer, DeviceBuffer or view) to byte ``offset``."""
        from tile.core._copy import copy_bytes

        copy_bytes(self, offset, src, stream=stream, sync=sync, into_buffer=True)

    def copy_to(self, dst: Any, *, offset: int = 0, stream: object = None, sync: bool = True) -> None:
        """Fill all of ``dst`` with the buffer's bytes starting at ``offset``."""
        from tile.core._copy import copy_bytes

        copy_bytes(self, offset, dst, stream=stream, sync=sync, into_buffer=False)

    def fill(
        self, value: int, *, offset: int = 0, nbytes: int | None = None, stream: object = None, sync: bool = True
    ) -> None:
        """Set bytes ``[offset, offset + nbytes)`` (default: to the end) to the byte ``value``."""
        self.view(np.uint8, nbytes, offset).fill(value, stream=stream, sync=sync)

    def to_numpy(self, dtype: Any = np.uint8, shape: int | tuple[int, ...] | None = None) -> np.ndarray[Any, Any]:
        """Copy the buffer (or its first ``shape`` elements of ``dtype``) to a new numpy array; blocks."""
        return self.view(dtype, shape).to_numpy()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Not offered: its consumer keeps a raw pointer and never says when it is done, so ``free()`` could not wait
        for it. Raises `UntrackedExportError` (an ``AttributeError``); export through DLPack, which is tracked."""
        raise untracked_export_error(f"a tile.core DeviceBuffer ({self.nbytes} bytes)")

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.view().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_dlpack.KDL_CUDA, self.device.ordinal)
