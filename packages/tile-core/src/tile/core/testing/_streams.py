# ruff: noqa: N802 - the simulator mirrors the CUDA driver's function names (cuStreamSynchronize, ...)
"""The simulated driver's streams and events: work waits in per-stream queues and runs in stream order.

In immediate mode (the default) every call runs its work at once, so the log order is the call order. In
asynchronous mode a stream keeps what was enqueued on it (kernels, copies, memsets, frees, event records, waits,
host functions) and runs it when the host synchronizes, queries, or when a seeded scheduler decides to make progress
on a later driver call. A wait holds its stream until the event's latest record (at the time of the wait) has run,
so a missing cross-stream wait lets work run out of order, and the memory checks of :mod:`._driver` see it.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cuda.bindings import driver as real

OK = real.CUresult.CUDA_SUCCESS
NOT_READY = real.CUresult.CUDA_ERROR_NOT_READY


@dataclass(eq=False)
class Work:
    """One queued piece of stream work: what it touches (device byte ranges) and what it does when it runs."""

    stream: int
    run: Callable[[], None]
    ranges: list[tuple[int, int]] = field(default_factory=list)
    record: int | None = None  # the record id this work completes (an event record)
    waits_for: int | None = None  # the record id this work waits on (a stream wait)
    kind: str = ""  # kernel, memcpy, memset, free, host, record or wait: what a capture makes of it (._graphs)


class SimStreams:
    """Stream queues, events and the scheduler shared by the simulated driver."""

    def __init__(self, *, asynchronous: bool = False, seed: int = 0, eagerness: float = 0.3) -> None:
        self.asynchronous = asynchronous
        self.rng = random.Random(seed)
        self.eagerness = eagerness  # chance that a driver call also runs some queued work early
        self.queues: dict[int, deque[Work]] = {}
        self.log: list[tuple[Any, ...]] = []
        self.bugs: list[str] = []  # ordering errors the real GPU would show as races or faults
        self.recorded_at: dict[int, int] = {}  # event -> its position in the log (a clock: 0.5 ms per entry)
        self.latest_record: dict[int, int] = {}  # event -> id of its latest record call
        self.done_records: set[int] = set()
        self.record_ids = itertools.count(1)
        self.capturing: set[int] = set()
        self.ids = itertools.count(0x100)
        self.current = threading.local()

    def mode(self) -> Any:
        """This thread's capture interaction mode (global until exchanged, as in the driver)."""
        return getattr(self.current, "mode", real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)

    def bug(self, message: str) -> None:
        """Note an ordering error; immediate mode raises it where it happens."""
        self.bugs.append(message)
        if not self.asynchronous:
            raise AssertionError(message)

    def pending(self) -> list[Work]:
        """Every piece of work still queued, on any stream."""
        return [work for queue in self.queues.values() for work in queue]

    # -- the queue ------------------------------------------------------------------------------------------------

    def enqueue(self, work: Work) -> None:
        if not self.asynchronous:
            self.execute(work)
            return
        self.queues.setdefault(work.stream, deque()).append(work)
        self.progress()

    def progress(self) -> None:
        """Maybe run some queued work early (seeded), as a GPU may at any moment; never out of stream order."""
        if not self.asynchronous:
            return
        while self.rng.random() < self.eagerness:
            ready = [s for s, q in self.queues.items() if q and self.ready(q[0])]
            if not ready:
                return
            self.step(self.rng.choice(sorted(ready)))

    def ready(self, work: Work) -> bool:
        return work.waits_for is None or work.waits_for in self.done_records

    def step(self, stream: int) -> None:
        self.execute(self.queues[stream].popleft())

    def execute(self, work: Work) -> None:
        work.run()
        if work.record is not None:
            self.done_records.add(work.record)

    def finish_record(self, record: int, seen: frozenset[int] = frozenset()) -> None:
        """Run the stream that holds ``record`` (and what it waits on) until the record has run."""
        while record not in self.done_records:
            holder = next((s for s, q in self.queues.items() if any(w.record == record for w in q)), None)
            if holder is None or holder in seen:
                raise AssertionError(f"record {record} can never complete (a wait cycle between streams)")
            self.advance(holder, seen | {holder})

    def advance(self, stream: int, seen: frozenset[int]) -> None:
        head = self.queues[stream][0]
        if head.waits_for is not None and not self.ready(head):
            self.finish_record(head.waits_for, seen)
        self.step(stream)

    def drain(self, stream: int) -> None:
        queue = self.queues.get(stream)
        while queue:
            self.advance(stream, frozenset({stream}))

    def drain_all(self) -> None:
        for stream in list(self.queues):
            self.drain(stream)

    # -- driver entry points --------------------------------------------------------------------------------------

    def cuEventCreate(self, flags: int) -> tuple[Any, Any]:
        return OK, real.CUevent(next(self.ids))

    def cuEventRecord(self, event: Any, stream: Any) -> tuple[Any]:
        record, ev, st = next(self.record_ids), int(event), int(stream)
        self.latest_record[ev] = record

        def run() -> None:
            self.log.append(("record", ev, st))
            self.recorded_at[ev] = len(self.log)

        self.enqueue(Work(st, run, record=record, kind="record"))
        return (OK,)

    def event_done(self, event: Any) -> bool:
        record = self.latest_record.get(int(event))
        return record is None or record in self.done_records

    def cuEventQuery(self, event: Any) -> tuple[Any]:
        self.progress()
        return (OK,) if self.event_done(event) else (NOT_READY,)

    def cuEventSynchronize(self, event: Any) -> tuple[Any]:
        if self.capturing and self.mode() != real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED:
            return (real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)  # what the H200 answers
        record = self.latest_record.get(int(event))
        if record is not None:
            self.finish_record(record)
        self.log.append(("event_sync", int(event)))
        return (OK,)

    def cuEventElapsedTime(self, start: Any, end: Any) -> tuple[Any, float]:
        return OK, 0.5 * (self.recorded_at[int(end)] - self.recorded_at[int(start)])

    def cuEventDestroy(self, event: Any) -> tuple[Any]:
        return (OK,)  # a pending record still completes, as in the driver

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: int) -> tuple[Any]:
        st, ev = int(stream), int(event)
        record = self.latest_record.get(ev)
        self.enqueue(Work(st, lambda: self.log.append(("wait", st, ev)), waits_for=record, kind="wait"))
        return (OK,)

    def cuStreamSynchronize(self, stream: Any) -> tuple[Any]:
        relaxed = self.mode() == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
        if int(stream) in self.capturing or (self.capturing and not relaxed):
            return (real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)  # what the H100 answers
        self.drain(int(stream))
        self.log.append(("sync", int(stream)))
        return (OK,)

    def cuStreamQuery(self, stream: Any) -> tuple[Any]:
        self.progress()
        return (NOT_READY,) if self.queues.get(int(stream)) else (OK,)

    def cuCtxSynchronize(self) -> tuple[Any]:
        self.drain_all()
        return (OK,)

    def cuLaunchHostFunc(self, stream: Any, fn: Any, data: Any) -> tuple[Any]:
        """A host function runs on a driver thread when its stream reaches it (here: on the thread that got there)."""
        import ctypes

        st, call = int(stream), ctypes.CFUNCTYPE(None, ctypes.c_void_p)(int(fn))
        key = int(data) if not isinstance(data, int) else data

        def run() -> None:
            self.log.append(("host_func", st))
            self.current.host_func = getattr(self.current, "host_func", 0) + 1
            try:
                call(key)
            finally:
                self.current.host_func -= 1

        self.enqueue(Work(st, run, kind="host"))
        return (OK,)
