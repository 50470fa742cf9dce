"""Streams and events: owned or borrowed, closed at most once, checked before every use.

Invariants: an owned :class:`Stream` is non-blocking (it never synchronises with the legacy NULL stream) and is
destroyed exactly once, by :meth:`Stream.close` or by the garbage collector; a borrowed stream is never destroyed
by Tile and keeps its owner object alive; any use of a closed stream or event raises before a driver call. The
driver defers destruction of a stream or event with pending work, so closing never cuts work short.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import tile.bindings as tb
from tile.bindings import check
from tile.core import _reaper
from tile.core._context import Device
from tile.core._errors import NullHandleError, StateError, StreamClosedError, WrongDeviceError, WrongTypeError
from tile.core._event import NOT_READY, Event, uses_lock
from tile.core._final import Exact, Frozen
from tile.core._keepalive import Holder
from tile.core._nocopy import Uncopyable

__all__ = ["InUse", "Stream", "as_stream", "invalidation", "open_successor", "use_lock"]

_closing = threading.Lock()  # held while a stream is closed: two threads closing one stream destroy it once
# Held by a use of device memory (a copy, fill, launch, export or record_use) from its check that the buffer is live
# (and its stream open) until the use is enqueued and recorded, by a free from its check until the free is enqueued,
# and by `Stream.close` and `Module.unload`: a free, close or unload on another thread is then ordered after every
# use that saw the buffer live, the stream open and the module loaded, two threads never both free a buffer, and no
# use is enqueued on a stream being destroyed. Re-entrant (a fill may copy); never held across a blocking wait for
# other work, and never taken by a GC-run finalizer (those only queue blocking work: see tile.core._reaper).
use_lock = threading.RLock()
# Bumped whenever a stream is closed or a buffer freed: prepared launches recheck their inputs only when it moved.
invalidation = [0]
# The open streams Tile created, by handle (unique among streams not yet destroyed): a foreign object that hands one
# back (``__cuda_stream__`` of a wrapper) is borrowed as that very Stream, so its close reaches every user of it.
_owned_streams: weakref.WeakValueDictionary[int, Stream] = weakref.WeakValueDictionary()


class _ThreadCaptures(threading.local):
    captures = 0  # graph captures this thread has begun (tile.aio's CUDA recorder) and not ended


_THREAD = _ThreadCaptures()


def begin_thread_capture() -> None:
    """Mark that this thread begins capturing a stream into a graph (in thread-local capture mode).

    While it captures, the thread's own host waits and allocations on *other* streams (a captured step allocating
    its temporaries, then waiting for the allocation) switch to relaxed mode for the call: thread-local mode refuses
    them, and a refused call invalidates the whole capture (seen on the H100). Pair with `end_thread_capture`.
    """
    _THREAD.captures += 1


def end_thread_capture() -> None:
    """This thread's capture ended (see `begin_thread_capture`)."""
    _THREAD.captures = max(0, _THREAD.captures - 1)


def thread_is_capturing() -> bool:
    """Whether this thread is capturing a graph (between `begin_thread_capture` and `end_thread_capture`)."""
    return _THREAD.captures > 0


@contextlib.contextmanager
def _relaxed_capture() -> Iterator[None]:
    """This thread in relaxed capture mode for the block: driver calls on streams that are not being captured
    (allocations and frees on the buffer's own stream) are then allowed while the thread captures a graph. A
    thread-local capture refuses them (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``), though they are not part of it."""
    d = _reaper.driver()
    relaxed = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    previous = check(d.cuThreadExchangeStreamCaptureMode(relaxed), "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        check(d.cuThreadExchangeStreamCaptureMode(previous), "cuThreadExchangeStreamCaptureMode")


class Stream(Frozen, Uncopyable, metaclass=Exact):
    """A CUDA stream on one device.

    ``Stream(device=None, priority=0)`` creates an owned non-blocking stream on ``device`` (default: device 0);
    :meth:`borrow` wraps a stream someone else owns. Final, and ``handle``, ``device`` and ``owned`` are read-only
    (buffers order their uses by the handle; see ``tile.core._final``).
    """

    _copy_fix = "pass the stream itself, or make another with Stream(device)"
    _frozen = frozenset({"handle", "device", "owned"})

    handle: int
    device: Device
    owned: bool

    def __init__(self, device: Device | None = None, priority: int = 0) -> None:
        self._init_owned(device if device is not None else Device(0), priority, protected=False)

    @classmethod
    def _create(cls, device: Device, priority: int, *, protected: bool) -> Stream:
        self = cls.__new__(cls)
        self._init_owned(device, priority, protected=protected)
        return self

    def _init_owned(self, device: Device, priority: int, *, protected: bool) -> None:
        d = _reaper.driver()
        device.make_current()
        flags = int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)
        raw = check(d.cuStreamCreateWithPriority(flags, priority), "cuStreamCreateWithPriority")
        self._setup(raw, device, owned=True, owner=None, protected=protected)
        _owned_streams[self.handle] = self

    def _setup(self, raw: Any, device: Device, *, owned: bool, owner: object, protected: bool) -> None:
        self._raw, self.handle, self.device, self.owned = raw, int(raw), device, owned
        self._owner, self._protected, self._closed, self._cc = owner, protected, False, None
        self._final: Event | None = None
        self._mark: Event | None = None
        self._holder: Holder | None = None  # foreign memory its queued work uses (tile.core._keepalive)
        self._aliases: weakref.WeakSet[Stream] = weakref.WeakSet()  # borrows of this owned stream: closed with it
        # Calls on the handle under way (`_enter`): a close meanwhile leaves the destroy to the last (review 39).
        self._uses, self._destroy_pending = [0], False  # one cell: counted without a __setattr__ call
        # Whose count a call counts on: None for this stream's own; a weak reference to the owned stream for a borrow
        # of Tile's own stream (weak: a borrow does not keep the owned stream alive; a call holds it while it runs).
        self._counted: weakref.ref[Stream] | None = None

    @classmethod
    def borrow(
        cls, obj: object, *, device: Device | None = None, allow_null: bool = False, unchecked: bool = False
    ) -> Stream:
        """Wrap a foreign stream without taking ownership; ``obj`` is kept alive while the wrapper lives.

        Parameters
        ----------
        obj : object
            An int ``CUstream`` address, a ``cuda.bindings`` ``CUstream``, an object with ``__cuda_stream__``
            (cuda.core, recent torch and cupy), or a torch (``.cuda_stream``) / cupy (``.ptr``) stream.
        device : Device, optional
            The stream's device; asked from the driver when omitted.
        allow_null : bool
            Accept the legacy NULL stream (handle 0), which synchronises with every blocking stream.
        unchecked : bool
            Accept a raw handle (an int or a ``cuda.bindings`` ``CUstream``): nothing can check that it names a live
            stream (the driver may reuse a destroyed stream's handle, and a stale one crashes the process), so a raw
            handle needs this explicit opt-out, else `WrongTypeError`. Stream objects (``__cuda_stream__``, torch,
            cupy) are what their library exports and need no opt-out.
        """
        if isinstance(obj, Stream):
            return obj
        handle = _foreign_stream_handle(obj, unchecked=unchecked)
        if handle == 0 and not allow_null:
            raise NullHandleError(
                "cannot borrow stream handle 0 (the legacy NULL stream): it serialises with all other work; "
                "create a tile.core.Stream, or pass allow_null=True to use it deliberately"
            )
        d = _reaper.driver()
        raw = d.CUstream(handle)
        if device is None:
            device = Device(int(check(d.cuStreamGetDevice(raw), "cuStreamGetDevice")))
        self = cls.__new__(cls)
        self._setup(raw, device, owned=False, owner=obj, protected=False)
        mine = _owned_streams.get(handle)
        if mine is not None and not mine.closed:
            # A stream of Tile's own coming back through another object (a ``__cuda_stream__`` wrapper): the wrapper
            # closes with it (it stayed open after the Stream's close, and enqueued on the destroyed handle).
            mine._aliases.add(self)
            self._counted = weakref.ref(mine)  # a call through the wrapper holds off the owned one's destroy too
        return self

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("owned" if self.owned else "borrowed")
        return f"<Stream 0x{self.handle:x} on device {self.device.ordinal}, {state}>"

    def __cuda_stream__(self) -> tuple[int, int]:
        self._check_open()
        return (0, self.handle)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def owner(self) -> object:
        """The foreign object a borrowed stream keeps alive (None for owned streams, or once closed)."""
        return self._owner

    def _wait_final(self) -> None:
        """Block until the work queued before this (closed) stream's close is done: its final event, or the whole
        device when no final event could be recorded (a borrowed stream already gone)."""
        final = self._final
        try:
            if final is not None and not final._closed:
                final.synchronize()
            else:  # the stream's own device (the current context may be another device's)
                self.device.synchronize()
        except tb.CudaError:  # a sticky fault: the work is over (failed); the caller gets the closed stream's error
            pass

    def in_use(self) -> InUse:
        """Use the stream's handle in a driver call of your own (a host function, a graph launch or capture, a
        foreign library's work): ``with stream.in_use() as raw: driver.cuLaunchHostFunc(raw, ...)``.

        The call is counted on the stream before its open check, so a `close` from then until the block ends (a
        finalizer the garbage collector runs at one of the block's allocations, a foreign library's callback, or
        another thread) still closes the stream but leaves ``cuStreamDestroy`` to the block's end: the handle the
        block passes on never names a destroyed stream (which the driver may have given to a new one). Yields the
        ``cuda.bindings`` ``CUstream``.

        Raises
        ------
        StreamClosedError
            When the stream is closed already (at the ``with``).
        """
        # A plain context manager, not a generator: a graph replay passes its handle here, and contextlib's
        # generator machinery cost more than the count itself (bench_frontend's graph replay row).
        return InUse(self)

    def _check_open(self) -> None:
        if self._closed:
            raise StreamClosedError(f"{self!r} was closed: create a new Stream (closed streams cannot be reused)")

    def _enter(self) -> Stream:
        """Begin a driver call on the handle outside ``use_lock`` (a wait, query, record...): counted first, then
        checked open, so a close from then on (a finalizer the collector runs at one of the call's allocations, or
        another thread) leaves the destroy to `_leave`: no call reaches the driver with a destroyed handle, which the
        driver may already have given to a new stream. Returns the stream counted on, whose `_leave` ends the call
        (the caller holds it meanwhile)."""
        ref = self._counted
        counted = self if ref is None else (ref() or self)
        with uses_lock:
            counted._uses[0] += 1  # (a list cell: no Frozen.__setattr__ call on this path)
        if self._closed:
            counted._leave()
            self._check_open()
        return counted

    def _leave(self) -> None:
        """End a call counted on this stream by `_enter`; the last one after a close destroys the stream."""
        with uses_lock:
            uses = self._uses
            uses[0] -= 1
            last = self._destroy_pending and not uses[0]
            if last:
                self._destroy_pending = False
        if last:
            check(_reaper.driver().cuStreamDestroy(self._raw), "cuStreamDestroy")

    @property
    def priority(self) -> int:
        """The stream's scheduling priority (lower runs first)."""
        counted = self._enter()
        try:
            return int(check(_reaper.driver().cuStreamGetPriority(self._raw), "cuStreamGetPriority"))
        finally:
            counted._leave()

    def synchronize(self) -> None:
        """Block the calling thread until all work queued on the stream is done.

        On a closed stream: wait for the work queued before the close (its final event), then raise
        `StreamClosedError`. A caller that takes the error for "the stream's work is over" (a run handing its
        arguments back) must never be answered before that work is done: a close does not wait for it.
        """
        try:
            counted = self._enter()
        except StreamClosedError:  # closed (now or before): the work queued before the close first
            self._wait_final()
            raise
        try:
            if _THREAD.captures:  # this thread captures a graph: a wait for another stream's work is no part of it
                with _relaxed_capture():
                    check(_reaper.driver().cuStreamSynchronize(self._raw), "cuStreamSynchronize")
                return
            result = _reaper.driver().cuStreamSynchronize(self._raw)
        finally:
            counted._leave()
        _reaper.drain()  # a safe point for releases deferred by finalizers (their uses may just have completed)
        if result[0] != 0:  # `check`, inlined for the common success: a synchronize follows every blocking launch
            check(result, "cuStreamSynchronize")

    def query(self) -> bool:
        """Return True when all queued work is done, False while some runs; raises on a sticky fault."""
        counted = self._enter()
        try:
            (err,) = _reaper.driver().cuStreamQuery(self._raw)
        finally:
            counted._leave()
        if err == NOT_READY:
            return False
        check(err, "cuStreamQuery")
        return True

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one when omitted) at the current end of the stream and return it."""
        self._check_open()
        event = event if event is not None else Event(self.device)
        event.record(self)
        return event

    def _record_mark(self) -> Event:
        """Record the stream's own use mark (one event per stream, made once, re-recorded by every call) and return
        it. A record covers everything queued on the stream before it, so a later record of the mark stands for every
        earlier one: a holder waiting on the mark waits for at least the work it saw queued. Not during a capture
        (the caller checks): a captured record would leave the mark meaning nothing outside the graph."""
        mark = self._mark
        if mark is None:
            mark = self._mark = Event(self.device)
        mark.record(self)
        return mark

    def wait(self, other: Event | Stream) -> None:
        """Make later work on this stream wait for ``other`` (an event, or everything queued on a stream)."""
        self._check_open()
        if not isinstance(other, (Event, Stream)):
            raise WrongTypeError(
                f"a stream can wait for a tile.core Event or Stream, not {type(other).__name__}: wrap a foreign stream "
                "with tile.core.Stream.borrow(obj) and wait for it (its work queued so far)"
            )
        event = other if isinstance(other, Event) else other.record()
        event._enter()  # (a close of either meanwhile leaves its destroy to the end of this wait's driver call)
        try:
            counted = self._enter()
            try:
                check(_reaper.driver().cuStreamWaitEvent(self._raw, event._raw, 0), "cuStreamWaitEvent")
            finally:
                counted._leave()
        finally:
            event._leave()

    def is_capturing(self) -> bool:
        """Return True while the stream is capturing a CUDA graph."""
        counted = self._enter()
        try:
            d = _reaper.driver()
            status = check(d.cuStreamIsCapturing(self._raw), "cuStreamIsCapturing")
        finally:
            counted._leave()
        return bool(status != d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)

    def close(self) -> None:
        """Destroy an owned stream (queued work still completes) or release a borrowed one; idempotent.

        Raises
        ------
        StateError
            For the device's default stream, or when asked for inside another use of device memory on this thread
            (a finalizer the garbage collector ran mid-launch): nothing is closed.
        """
        if self._protected:
            raise StateError(f"{self!r} is the device's default stream and lives as long as the process")
        # Under use_lock: a launch or copy on another thread that saw the stream open is enqueued and recorded before
        # the final record and the destroy, and one that comes after sees it closed (and prepared launches' guards
        # see the invalidation) before enqueueing anything. On this thread, a use's window may hold it already: a
        # close asked for there (a finalizer the collector ran between a launch's checks and its enqueue) could
        # destroy the stream the launch is about to enqueue on, so it is refused, the stream left open.
        if _reaper.inside_use() and not self._closed:
            raise StateError(
                f"{self!r} cannot be closed inside another use of device memory on this thread (a finalizer run "
                "mid-launch or mid-copy, or an argument's own method): that use may enqueue on it; close it after"
            )
        with use_lock, _closing:
            if self._closed:
                return
            with contextlib.suppress(tb.CudaError):  # a borrowed stream may already be gone
                self._final = self.record()  # outlives the stream: frees that were ordered on it wait for this
            self._closed = True
            invalidation[0] += 1
            self._cc, self._owner = None, None
            if _owned_streams.get(self.handle) is self:
                del _owned_streams[self.handle]
            for alias in list(self._aliases):  # the same CUDA stream: closed too (its final event is this one's)
                alias._closed, alias._final, alias._cc, alias._owner = True, self._final, None, None
            if self.owned:
                with uses_lock:  # a call on the handle under way destroys it when it ends (`_leave`)
                    self._destroy_pending = bool(self._uses[0])
                if not self._destroy_pending:
                    check(_reaper.driver().cuStreamDestroy(self._raw), "cuStreamDestroy")

    def __del__(self) -> None:
        if getattr(self, "owned", False) and not self._closed:
            self._closed = True
            # At interpreter shutdown module globals (contextlib, tb) may already be None, so no helper
            # from them can be trusted here; a failed destroy then only leaks what the process exit frees.
            try:
                aliases = list(self._aliases)
                for alias in aliases:  # borrows of this stream (whose owner no longer held it): closed too
                    alias._closed, alias._cc, alias._owner = True, None, None
                if aliases:
                    invalidation[0] += 1  # prepared launches on them recheck their stream
                raw = self._raw
                if _reaper.deferring():  # inside a host function: no driver call (see tile.core._reaper)
                    _reaper.defer(lambda: _reaper.driver().cuStreamDestroy(raw) is not None)
                else:
                    _reaper.driver().cuStreamDestroy(raw)
            except Exception:  # a finalizer must not raise
                pass

    def _cuda_core(self) -> Any:
        """The ``cuda.core.Stream`` view of this stream (for cuda.core APIs; benchmarks launch through it)."""
        cc = self._cc
        if cc is None:
            self._check_open()
            from cuda.core import Stream as CoreStream

            cc = self._cc = CoreStream.from_handle(self.handle)
        return cc


class InUse:
    """What `Stream.in_use` returns: ``with`` it, the stream's handle is counted in use (see there)."""

    __slots__ = ("_counted", "_stream")

    def __init__(self, stream: Stream) -> None:
        self._stream = stream
        self._counted: Stream | None = None

    def __enter__(self) -> Any:
        """Count the use (then check the stream open: `StreamClosedError`) and return the ``CUstream``."""
        stream = self._stream
        self._counted = stream._enter()
        return stream._raw

    def __exit__(self, *exc: object) -> None:
        """End the use; the last one after a close destroys the stream."""
        counted, self._counted = self._counted, None
        if counted is not None:
            counted._leave()


def _foreign_stream_handle(obj: object, *, unchecked: bool) -> int:
    protocol = getattr(obj, "__cuda_stream__", None)
    if protocol is not None:
        _version, handle = protocol() if callable(protocol) else protocol
        return int(handle)
    # Only the libraries whose stream objects are known: a stray ``.ptr`` (a buffer!) must not pass as a stream.
    library = type(obj).__module__.split(".")[0]
    attribute = {"torch": "cuda_stream", "cupy": "ptr", "cupy_backends": "ptr"}.get(library)
    value = getattr(obj, attribute, None) if attribute else None
    if isinstance(value, int):
        return value
    raw = (isinstance(obj, int) and not isinstance(obj, bool)) or (library == "cuda" and hasattr(obj, "getPtr"))
    if raw and unchecked is not True:
        raise WrongTypeError(
            f"{obj!r} is a raw stream handle, which no check can vouch for (a stale handle names a destroyed or "
            "reused stream): pass a tile.core.Stream, a torch/cupy/cuda.core stream object, or opt out explicitly "
            "with tile.core.Stream.borrow(handle, unchecked=True)"
        )
    if isinstance(obj, int) and not isinstance(obj, bool):
        return int(obj)  # the exact int: an int subclass cannot report one handle and be used as another
    if raw:  # a cuda.bindings CUstream
        return int(obj)  # type: ignore[call-overload,no-any-return]  # cuda.bindings handles define __int__
    raise WrongTypeError(
        f"cannot use {type(obj).__name__} as a stream: pass a tile.core.Stream, an object with __cuda_stream__, "
        "a torch/cupy stream, or Stream.borrow(handle, unchecked=True) for a raw CUstream"
    )


def open_successor(stream: Stream) -> Stream:
    """Return ``stream`` if open, else the device's default stream ordered after the closed stream's last work."""
    if not stream.closed:
        return stream
    successor = stream.device.default_stream
    if stream._final is not None:
        successor.wait(stream._final)
    return successor


def as_stream(stream: object, device: Device) -> Stream:
    """Return ``stream`` as an open :class:`Stream` of ``device`` (None: the device's default stream)."""
    if stream is None:
        return device.default_stream
    result = stream if isinstance(stream, Stream) else Stream.borrow(stream)
    result._check_open()
    if result.device is not device:
        raise WrongDeviceError(
            f"{result!r} belongs to device {result.device.ordinal}, but the memory is on device {device.ordinal}: "
            "use a stream of the same device"
        )
    return result
