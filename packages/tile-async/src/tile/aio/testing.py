"""Test helpers for code built on tile.aio: a host stream whose work is held at a gate, and interrupted waits.

A ``KeyboardInterrupt`` while ``.sync()`` waits parks the run (its handles stay with it until the work is done, and
``.sync()`` or ``await`` resumes it). `interrupted_waits` makes that happen on purpose: the work waits at a gate on
a worker host stream while the waits of host streams are interrupted, as a Ctrl-C would::

    with interrupted_waits() as (stream, gate, interrupts):
        launch = kernel(z, x)
        try:
            launch.sync_on(stream)   # KeyboardInterrupt: the run is parked, its work held at the gate
        except KeyboardInterrupt:
            pass
        gate.set()
        z, x = launch.sync_on(stream)  # resumed: waits for the work, then hands the handles back
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from tile.aio._host import HostStream

__all__ = ["drained", "interrupted_waits"]


@contextlib.contextmanager
def interrupted_waits(count: int = 1) -> Iterator[tuple[HostStream, threading.Event, list[int]]]:
    """Yield ``(stream, gate, interrupts)``: a worker host stream whose queued work waits until ``gate`` is set, and
    a list with one entry per ``HostStream.synchronize()`` (of any host stream) to interrupt with a
    ``KeyboardInterrupt`` before it waits (``count`` of them; append or clear to change that). On exit the gate is
    opened, the stream drained and closed, and ``synchronize`` restored. Not thread-safe against other code patching
    ``HostStream.synchronize`` at the same time."""
    stream = HostStream(worker=True, name="interrupted-waits")
    gate = threading.Event()
    stream.enqueue(gate.wait)
    real = HostStream.synchronize
    interrupts = [1] * count

    def interrupted(self: HostStream) -> None:
        if interrupts:
            interrupts.pop()
            raise KeyboardInterrupt("interrupted while waiting")
        real(self)

    HostStream.synchronize = interrupted  # type: ignore[method-assign]  # the point of the helper
    try:
        yield stream, gate, interrupts
    finally:
        HostStream.synchronize = real  # type: ignore[method-assign]
        gate.set()
        drained(stream)
        stream.close()


def drained(stream: HostStream) -> None:
    """Return once ``stream`` ran everything queued so far, completion callbacks included (they run in order); the
    stream's error, if any, stays with it for its next wait."""
    done = threading.Event()
    stream._observe().add_done_callback(lambda _error: done.set())
    done.wait()
