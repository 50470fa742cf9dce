"""CUDA events: markers recorded on a stream that other streams and threads wait for or time against.

Invariants: an event is destroyed exactly once (``close`` or the garbage collector; the driver defers destruction
past a pending record); any use after ``close`` raises before a driver call; ``elapsed_ms`` refuses events created
without timing or never recorded, with the fix in the message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tile.bindings import check
from tile.core import _reaper
from tile.core._context import Device
from tile.core._errors import StateError, UseAfterFreeError, WrongDeviceError
from tile.core._final import Exact, Frozen
from tile.core._nocopy import Uncopyable

if TYPE_CHECKING:
    from tile.core._stream import Stream

__all__ = ["NOT_READY", "Event"]

NOT_READY = 600  # CUDA_ERROR_NOT_READY: a query's "still running", not a failure


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

    def __init__(self, device: Device | None = None, *, timing: bool = False, blocking_sync: bool = False) -> None:
        d = _reaper.driver()
        home = device if device is not None else Device(0)
        home.make_current()
        flags = 0 if timing else int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        flags |= int(d.CUevent_flags.CU_EVENT_BLOCKING_SYNC) if blocking_sync else 0
        raw = check(d.cuEventCreate(flags), "cuEventCreate")
        # The only assignment of the read-only fields (one event per cross-stream launch: no __setattr__ check).
        vars(self).update(device=home, _raw=raw, handle=int(raw), timing=timing, _closed=False, _recorded=False)

    def __repr__(self) -> str:
        return f"<Event 0x{self.handle:x} on device {self.device.ordinal}{', closed' if self._closed else ''}>"

    def _check_open(self) -> None:
        if self._closed:
            raise UseAfterFreeError(f"{self!r} was closed: create a new Event")

    def record(self, stream: Stream) -> None:
        """Record the event at the current end of ``stream``."""
        self._check_open()
        stream._check_open()
        if stream.device is not self.device:
            raise WrongDeviceError(
                f"{self!r} is an event of device {self.device.ordinal} and {stream!r} a stream of device "
                f"{stream.device.ordinal}: record an event of the stream's device, tile.core.Event(device) (waiting "
                "on it from another device's stream is fine)"
            )
        check(_reaper.driver().cuEventRecord(self._raw, stream._raw), "cuEventRecord")
        self._recorded = True

    def query(self) -> bool:
        """Return True when the work before the recorded point is done (True for a never-recorded event)."""
        self._check_open()
        (err,) = _reaper.driver().cuEventQuery(self._raw)
        if err == NOT_READY:
            return False
        check(err, "cuEventQuery")
        return True

    def synchronize(self) -> None:
        """Block until the work before the recorded point is done."""
        self._check_open()
        check(_reaper.driver().cuEventSynchronize(self._raw), "cuEventSynchronize")
        _reaper.drain()  # a safe point for releases deferred by finalizers (their uses may just have completed)

    def elapsed_ms(self, since: Event) -> float:
        """Milliseconds between ``since`` and this event (both recorded, completed, and created with timing)."""
        for event in (since, self):
            event._check_open()
            if not event.timing:
                raise StateError(f"{event!r} was created without timing: use Event(timing=True)")
            if not event._recorded:
                raise StateError(f"{event!r} was never recorded: call stream.record(event) first")
        return float(check(_reaper.driver().cuEventElapsedTime(since._raw, self._raw), "cuEventElapsedTime"))

    def close(self) -> None:
        """Destroy the event (a pending record still completes); idempotent."""
        if not self._closed:
            self._closed = True
            check(_reaper.driver().cuEventDestroy(self._raw), "cuEventDestroy")

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            # At interpreter shutdown the driver module, and this module's globals, may be gone: no contextlib here.
            try:
                raw = self._raw
                if _reaper.deferring():  # inside a host function: no driver call (see tile.core._reaper)
                    _reaper.defer(lambda: _reaper.driver().cuEventDestroy(raw) is not None)
                else:
                    _reaper.driver().cuEventDestroy(raw)
            except Exception:  # nobody to report a failed destroy to
                pass
