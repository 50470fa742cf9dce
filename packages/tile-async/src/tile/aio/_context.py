"""The execution-context protocol: what every op runs on, whatever the hardware.

An :class:`ExecutionContext` is stream-like: work enqueued on it runs in enqueue order; :meth:`record`
marks the current tail as a :class:`Completion`; :meth:`wait` orders later work after another context's
completion. Two implementations exist: CUDA streams (``tile.aio._cuda``) and host streams
(``tile.aio._host``), where work runs on the CPU in order. Ops are written against this protocol only,
so combinators, ownership, scheduling and asyncio behave the same on both.

Invariants: a completion is done only after every piece of work enqueued before it finished; errors of
that work are raised by whoever observes the completion (``query``/``wait`` or the callback's argument).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import cast, final

from tile.aio._errors import ContextMismatchError
from tile.aio._uncopyable import Uncopyable

__all__ = ["HOST", "Completion", "DoneCallback", "ExecutionContext", "HostDevice", "call_back"]

DoneCallback = Callable[[BaseException | None], None]


@final
class HostDevice:
    """The CPU as a device: host streams run their work here. Use the singleton :data:`HOST`."""

    _instance: HostDevice | None = None

    def __new__(cls) -> HostDevice:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "HOST"

    def __reduce__(self) -> tuple[type[HostDevice], tuple[()]]:
        return (HostDevice, ())


HOST = HostDevice()


class Completion(Uncopyable, ABC):
    """A recorded point of an execution context; done when all work enqueued before it has finished."""

    __slots__ = ()
    _copy_fix = "pass the completion itself (query, wait or add callbacks to it from any thread)"

    @abstractmethod
    def query(self) -> bool:
        """Return True when done (without blocking); raise the work's error if it failed."""

    @abstractmethod
    def wait(self) -> None:
        """Block until done without burning a core; raise the work's error if it failed."""

    @abstractmethod
    def add_done_callback(self, fn: DoneCallback) -> None:
        """Call ``fn(error_or_None)`` once, when done: at once in this thread if already done, else later in
        another thread. ``fn`` must not block and must not execute ops."""


BUILTIN_CONTEXTS: set[type[ExecutionContext]] = set()
"""The exact classes of tile.aio's own contexts (CUDA streams, host streams, graph recorders), whose completions and
``synchronize()`` are real. Ops that hand memory back on completion (tile.frontend's launches) run only on these: a
context written elsewhere, a subclass of one of these included, could report work done while the GPU still writes."""

RECORDING_CONTEXTS: set[type[ExecutionContext]] = set()
"""The exact classes of the contexts a graph capture records on (its recorders). Only the capture that made one runs
ops on it: a run rooted on a recorder (``op.sync_on(recorder)``, a policy handing one out, a capture on one) would put
its work into that graph, or onto its stream after the capture, and hand its arguments back at once (a recorder's
``synchronize()`` refuses), while every replay (or the stream) still reads and writes them. See `refuse_recorder`."""


def refuse_recorder(ctx: object, action: str) -> None:
    """Raise `ContextMismatchError` when ``ctx`` is a graph's recording context (`RECORDING_CONTEXTS`), before
    ``action`` (``".sync_on()"``, ``"await"``, ``"capture"``...) claims anything."""
    if type(ctx) in RECORDING_CONTEXTS:
        raise ContextMismatchError(
            action,
            "a CUDA stream or a host stream, not the recording context of a graph capture (work run on it would be "
            "recorded into that graph and replayed after this run had handed its arguments back)",
            repr(ctx),
        )


class ExecutionContext(Uncopyable, ABC):
    """A stream-like queue of work on one device (see the module docstring for the contract)."""

    __slots__ = ()
    _copy_fix = "pass the context itself; it may be shared between threads"

    @property
    @abstractmethod
    def device(self) -> Hashable:
        """The device the work runs on (:data:`HOST` or a ``tile.core.Device``)."""

    @property
    def capturing(self) -> bool:
        """True while this context records work into a graph instead of running it."""
        return False

    @abstractmethod
    def enqueue(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` (its result is ignored) after all work enqueued before it and before all work after it."""

    @abstractmethod
    def record(self) -> Completion:
        """Return a completion for all work enqueued so far."""

    def _observe(self) -> Completion:
        """A completion for all work enqueued so far, recorded by someone other than the work's own run (a shared op,
        another stream ordering after this one): it reports the work's error without taking it from this context, so
        the run whose work failed still reports it. ``record()`` for contexts whose errors are sticky (CUDA)."""
        return self.record()

    @abstractmethod
    def wait(self, completion: Completion) -> None:
        """Make work enqueued from now on start only after ``completion`` is done (the caller does not block)."""

    @abstractmethod
    def synchronize(self) -> None:
        """Block until all enqueued work is done; raise the error of failed work."""

    @abstractmethod
    def query(self) -> bool:
        """Return True when all enqueued work is done (without blocking); raise the error of failed work."""


def call_back(fn: DoneCallback, error: BaseException | None) -> None:
    """Run a done-callback; its failure must not kill the thread completing work, so it goes to the hook."""
    try:
        fn(error)
    except Exception as exc:  # reported like an exception in __del__: the completing thread has no caller
        args = _Unraisable(exc, f"a done-callback of a tile.aio completion ({fn!r})")
        sys.unraisablehook(cast("sys.UnraisableHookArgs", args))


class _Unraisable:
    """The argument ``sys.unraisablehook`` expects (CPython builds it with the same attribute names)."""

    def __init__(self, exc: BaseException, message: str) -> None:
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = message
        self.object = None
