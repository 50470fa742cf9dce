"""Timing one callable: `measure` and the `Sample` it returns.

On the GPU backend each call is bracketed by two CUDA events recorded on one stream (`tile.core.Event` with timing),
so what is timed is the stream's time from the call's first queued work to its last, host gaps included only where
the call itself waits. Between calls the L2 cache is flushed by writing a device buffer twice the L2's size
(`tile.core.Device.l2_cache_size`) on the same stream, before the start event: the flush is never timed, and every
call reads its inputs from device memory as a cold call would. On the CPU interpreter backend each call is timed with
``time.perf_counter_ns`` (the interpreter's calls finish before they return), and there is no cache to flush.

A call that queues work on another stream must wait for it before it returns (every ``tile.kernels`` function does),
or be timed on that stream (``stream=``): an event only times the work of its own stream.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tile.frontend as tile
from tile.frontend import ArgumentError

__all__ = ["Sample", "Timer", "check_count", "measure"]

FLUSH_FACTOR = 2
"""The L2 flush writes this many times the L2's size (a write of exactly the L2's size may leave lines resident)."""


def check_count(value: object, name: str, least: int) -> int:
    """``value`` as an int >= ``least``, else `ArgumentError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ArgumentError(f"bench: {name} must be an int >= {least}, got {value!r}")
    return value


@dataclass(frozen=True)
class Sample:
    """Per-call times of one callable, in milliseconds, with order statistics.

    ``times_ms`` holds every timed call in the order it ran; the statistics are over all of them. `tflops` and
    `gbps` turn the median into a rate for work of a known size.
    """

    times_ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.times_ms, tuple) or not self.times_ms:
            raise ArgumentError("bench: a Sample needs a tuple of at least one time")
        for t in self.times_ms:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t >= 0):
                raise ArgumentError(
                    f"bench: a Sample's times must be finite numbers >= 0 (milliseconds), got {t!r}; a file "
                    "edited by hand or written by something else than to_json can hold one: measure again"
                )

    @property
    def median_ms(self) -> float:
        """The median time of one call."""
        return float(statistics.median(self.times_ms))

    @property
    def min_ms(self) -> float:
        """The fastest call."""
        return min(self.times_ms)

    @property
    def max_ms(self) -> float:
        """The slowest call."""
        return max(self.times_ms)

    @property
    def quartiles_ms(self) -> tuple[float, float]:
        """The first and third quartiles (inclusive method: both equal the time itself for one call)."""
        if len(self.times_ms) == 1:
            return self.times_ms[0], self.times_ms[0]
        q1, _, q3 = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        return q1, q3

    @property
    def iqr_ms(self) -> float:
        """The interquartile range: the spread of the middle half of the calls."""
        q1, q3 = self.quartiles_ms
        return q3 - q1

    def tflops(self, flops: float) -> float:
        """TFLOP/s of a call doing ``flops`` floating-point operations, at the median time (``inf`` when the median
        is 0, below the clock's resolution)."""
        return _rate(flops, self.median_ms) / 1e12

    def gbps(self, nbytes: float) -> float:
        """GB/s (10^9 bytes per second) of a call moving ``nbytes``, at the median time (``inf`` when the median is
        0, below the clock's resolution)."""
        return _rate(nbytes, self.median_ms) / 1e9

    def summary(self) -> dict[str, float]:
        """The statistics as a dict (for JSON): median, q1, q3, iqr, min, max in ms, and the count."""
        q1, q3 = self.quartiles_ms
        return {
            "median_ms": self.median_ms,
            "q1_ms": q1,
            "q3_ms": q3,
            "iqr_ms": q3 - q1,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "count": len(self.times_ms),
        }


def _rate(work: float, ms: float) -> float:
    """``work`` per second over ``ms`` milliseconds; ``inf`` for a time of 0 (a call below the clock's resolution),
    never a ZeroDivisionError that would lose the whole comparison."""
    return work / (ms * 1e-3) if ms > 0 else math.inf


class Timer:
    """Times calls on the current backend (see the module docstring); reusable across callables, so a comparison
    allocates one flush buffer and one pair of events, not one per call.

    Parameters
    ----------
    flush_l2 : bool
        Flush the L2 before each timed call (GPU only).
    stream : object, optional
        The stream the events (and the flush) are recorded on: a ``tile.core.Stream`` or anything
        ``tile.core.Stream.borrow`` takes (a torch or cupy stream); the device's default stream when omitted.
    """

    def __init__(self, *, flush_l2: bool = True, stream: object = None) -> None:
        self.gpu = tile.backend() == "gpu"
        self._flush: Any = None
        self._fill = 0
        if not self.gpu:
            return
        import tile.core as tc

        self._stream: Any = self._as_stream(tc, stream)
        self._events = (tc.Event(self._stream.device, timing=True), tc.Event(self._stream.device, timing=True))
        if flush_l2:
            size = FLUSH_FACTOR * self._stream.device.l2_cache_size
            self._flush = tc.DeviceBuffer.allocate(size, stream=self._stream)

    @staticmethod
    def _as_stream(tc: Any, stream: object) -> Any:
        if stream is None:
            return tc.Device(0).default_stream
        return stream if isinstance(stream, tc.Stream) else tc.Stream.borrow(stream)

    def time_ms(self, fn: Callable[[], object]) -> float:
        """Milliseconds of one call of ``fn`` (whatever it raises propagates; nothing is left queued)."""
        if not self.gpu:
            start = time.perf_counter_ns()
            fn()
            return (time.perf_counter_ns() - start) / 1e6
        if self._flush is not None:
            self._fill ^= 0xFF  # alternate bytes: every line is written with a new value
            self._flush.fill(self._fill, stream=self._stream, sync=False)
        begin, end = self._events
        begin.record(self._stream)
        try:
            fn()
        finally:
            end.record(self._stream)
            end.synchronize()
        return end.elapsed_ms(begin)

    def close(self) -> None:
        """Free the flush buffer and the events (idempotent)."""
        if self._flush is not None:
            self._flush.free()
            self._flush = None
        if self.gpu:
            for event in self._events:
                event.close()


def time_calls(timer: Timer, fn: Callable[[], object], warmup: int, reps: int) -> list[float]:
    """``warmup`` untimed calls, then the times of ``reps`` calls."""
    for _ in range(warmup):
        fn()
    return [timer.time_ms(fn) for _ in range(reps)]


def measure(
    fn: Callable[[], object], *, warmup: int = 3, reps: int = 20, flush_l2: bool = True, stream: object = None
) -> Sample:
    """Time ``reps`` calls of ``fn`` after ``warmup`` untimed ones (compilation, plans, allocator pools).

    Parameters
    ----------
    fn : callable
        Called with no arguments; what it returns is ignored.
    warmup : int
        Untimed calls first (>= 0).
    reps : int
        Timed calls (>= 1), each its own sample.
    flush_l2 : bool
        On the GPU, flush the L2 before each timed call, outside the timed region.
    stream : object, optional
        The stream to time on (see `Timer`).

    Returns
    -------
    Sample
        The ``reps`` per-call times.

    Raises
    ------
    ArgumentError
        When ``fn`` is not callable or a count is out of range. What ``fn`` raises propagates.
    """
    if not callable(fn):
        raise ArgumentError(f"bench.measure: fn is a {type(fn).__name__}, not a callable; pass e.g. lambda: f(x)")
    warmup, reps = check_count(warmup, "warmup", 0), check_count(reps, "reps", 1)
    timer = Timer(flush_l2=flush_l2, stream=stream)
    try:
        return Sample(tuple(time_calls(timer, fn, warmup, reps)))
    finally:
        timer.close()
