"""CUDA events: markers recorded on a stream that other streams and threads wait for or time against.

Invariants: an event is destroyed exactly once (``close`` or the garbage collector; the driver defers destruction
past a pending record); any use after ``close`` raises before a driver call; ``elapsed_ms`` refuses events created
without timing or never recorded, with the fix in the message. A use (a record, query, synchronize, elapsed time or
a stream's wait) counts itself on the event before it checks that the event is open, and a ``close`` made while one
is under way (on another thread, or by a finalizer the collector ran at one of its allocations) leaves the destroy to
the last of them: no driver call is made on a destroyed handle, which the driver may already have given to a new
event (the stream would then wait for, or record, another event; review 39).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tile.bindings import check
from tile.core import _reaper
from tile.core._context import Device
from tile.core._errors import StateError, UseAfterFreeError, WrongDeviceError
from tile.core._final import Exact, Frozen
from tile.core._nocopy import Uncopyable

if TYPE_CHECKING:
    from tile.core._stream import Stream

__all__ = ["NOT_READY", "Event", "uses_lock"]

NOT_READY = 600  # CUDA_ERROR_NOT_READY: a query's "still running", not a failure

# Guards every event's count of uses under way (held for a count's update only, never across a driver call);
# re-entrant: a finalizer the collector runs while it is held may close an event.
uses_lock = threading.RLock()


class Event(Frozen, Uncopyable, metaclass=Exact):
    """A CUDA event: a marker recorded on a stream that others can wait for or time against.

    Parameters
    ----------
    device : Device, optional
        Device 0 when omitted.
    timing : bool
        Enable :meth:`elapsed_ms` (costs a little on record).
    blocking_sync : bool
        Make :meth:`synchronize` sleep instead of spin.
    """

    _copy_fix = "pass the event itself, or record a new one with stream.record()"
    _frozen = frozenset({"handle", "device", "timing"})  # final, these read-only: see tile.core._final

    device: Device
    handle: int
    timing: bool
    _raw: Any
    _closed: bool
    _recorded: bool
    _users: int  # uses under way: a close meanwhile leaves the destroy to the last
    _destroyed: bool

    def __init__(self, device: Device | None = None, *, timing: bool = False, blocking_sync: bool = False) -> None:
        d = _reaper.driver()
        home = device if device is not None else Device(0)
        home.make_current()
        flags = 0 if timing else int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        flags |= int(d.CUevent_flags.CU_EVENT_BLOCKING_SYNC) if blocking_sync else 0
        raw = check(d.cuEventCreate(flags), "cuEventCreate")
        # The only assignment of the read-only fields (one event per cross-stream launch: no __setattr__ check).
        vars(self).update(
            device=home, _raw=raw, handle=int(raw), timing=timing, _closed=False, _recorded=False, _users=0
        )
        self._destroyed = False

    def __repr__(self) -> str:
        return f"<Event 0x{self.handle:x} on device {self.device.ordinal}{', closed' if self._closed else ''}>"

    def _check_open(self) -> None:
        if self._closed:
            raise UseAfterFreeError(f"{self!r} was closed: create a new Event")

    def _enter(self) -> None:
        """Begin a use of the handle: counted first, then checked open (a close from then on waits for `_leave`)."""
        with uses_lock:
            self._users += 1
        if self._closed:
            self._leave()
            self._check_open()

    def _leave(self) -> None:
        """End a use begun by `_enter`; the last use after a close destroys the event."""
        with uses_lock:
            self._users -= 1
            last = self._closed and not self._users and not self._destroyed
            if last:
                self._destroyed = True
        if last:
            check(_reaper.driver().cuEventDestroy(self._raw), "cuEventDestroy")

    def record(self, stream: Stream) -> None:
        """Record the event at the current end of ``stream``."""
        self._enter()
        try:
            counted = stream._enter()  # (its close meanwhile leaves the destroy to the end of this record)
            try:
                if stream.device is not self.device:
                    raise WrongDeviceError(
                        f"{self!r} is an event of device {self.device.ordinal} and {stream!r} a stream of device "
                        f"{stream.device.ordinal}: record an event of the stream's device, tile.core.Event(device) "
                        "(waiting on it from another device's stream is fine)"
                    )
                check(_reaper.driver().cuEventRecord(self._raw, stream._raw), "cuEventRecord")
            finally:
                counted._leave()
            self._recorded = True
        finally:
            self._leave()

    def query(self) -> bool:
        """Return True when the work before the recorded point is done (True for a never-recorded event)."""
        self._enter()
        try:
            (err,) = _reaper.driver().cuEventQuery(self._raw)
        finally:
            self._leave()
        if err == NOT_READY:
            return False
        check(err, "cuEventQuery")
        return True

    def synchronize(self) -> None:
        """Block until the work before the recorded point is done."""
        self._enter()
        try:
            check(_reaper.driver().cuEventSynchronize(self._raw), "cuEventSynchronize")
        finally:
            self._leave()
        _reaper.drain()  # a safe point for releases deferred by finalizers (their uses may just have completed)

    def elapsed_ms(self, since: Event) -> float:
        """Milliseconds between ``since`` and this event (both recorded, completed, and created with timing)."""
        for event in (since, self):
            event._check_open()
            if not event.timing:
                raise StateError(f"{event!r} was created without timing: use Event(timing=True)")
            if not event._recorded:
                raise StateError(f"{event!r} was never recorded: call stream.record(event) first")
        since._enter()
        try:
            self._enter()
            try:
                return float(check(_reaper.driver().cuEventElapsedTime(since._raw, self._raw), "cuEventElapsedTime"))
            finally:
                self._leave()
        finally:
            since._leave()

    def close(self) -> None:
        """Destroy the event (a pending record still completes; a use under way, on another thread or interrupted by
        a finalizer, ends first: the last one destroys it); idempotent."""
        with uses_lock:
            if self._closed:
                return
            self._closed = True
            if self._users:
                return
            self._destroyed = True
        check(_reaper.driver().cuEventDestroy(self._raw), "cuEventDestroy")

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):  # (no use under way: each holds the event)
            self._closed = self._destroyed = True
            # At interpreter shutdown the driver module, and this module's globals, may be gone: no contextlib here.
            try:
                raw = self._raw
                if _reaper.deferring():  # inside a host function: no driver call (see tile.core._reaper)
                    _reaper.defer(lambda: _reaper.driver().cuEventDestroy(raw) is not None)
                else:
                    _reaper.driver().cuEventDestroy(raw)
            except Exception:  # nobody to report a failed destroy to
                pass
