"""``Shared`` (``op.shared()``) and ``unzip``: one execution, many uses of its output.

Invariants: the inner op runs once, on the context of the first execution (which may not be a graph
capture: its output would never exist for the other uses); every later execution returns the same output
and, on another context, first makes that context wait for the first run's work. The inner op is released
once, by the first tree released after the first run's work completed: a tree that ran or waited for it (its
own work done, so is the first run's), never one that failed before reaching it while the first run's work is
still queued elsewhere. A failed first run makes every use raise the same error.
"""

from __future__ import annotations

import contextlib
import operator
import threading
from typing import Any, Generic, TypeVar

from tile.aio import _combinators
from tile.aio._context import Completion, ExecutionContext
from tile.aio._errors import CaptureError, OpTypeError
from tile.aio._host import HostCompletion
from tile.aio._op import DeviceOp, Site

__all__ = ["Shared", "unzip_shared"]

T = TypeVar("T")
U = TypeVar("U")


class Shared(DeviceOp[T]):
    """Runs its inner op once; every execution gets the same output (see the module docstring)."""

    __slots__ = ("_error", "_inner", "_mutex", "_output", "_ran", "_ran_on", "_ready")

    def __init__(self, inner: DeviceOp[T]) -> None:
        super().__init__()
        self._inner: DeviceOp[T] | None = inner
        self._mutex = threading.Lock()
        self._ran_on: ExecutionContext | None = None
        self._ready: Completion | None = None
        self._ran: Completion | None = None  # recorded right after the first run: its work, for `_hand_off`
        self._output: T | None = None
        self._error: BaseException | None = None

    def _claim(self, verb: str, site: Site) -> None:
        """A shared op may be used any number of times: only record the first use."""
        if self._fate is None:
            self._fate = (verb, site)

    def _execute(self, ctx: ExecutionContext) -> T:
        with self._mutex:
            if self._ran_on is None:
                return self._first_run(ctx)
        if self._error is not None:
            raise self._error
        if ctx != self._ran_on:
            ctx.wait(self._ready_completion())
        return self._output  # type: ignore[return-value]  # set by the first run, which did not fail

    def _first_run(self, ctx: ExecutionContext) -> T:
        self._ran_on = ctx
        if ctx.capturing:
            self._ran = HostCompletion.finished()  # nothing of the inner op was enqueued
            self._error = _first_run_in_capture()
            raise self._error
        assert self._inner is not None
        try:
            self._output = self._inner._run_in(ctx)
        except BaseException as exc:  # every later use reports the same failure
            self._error = exc
            raise
        finally:  # the point `_hand_off` tests: the inner op's work (what of it was enqueued) is done
            with contextlib.suppress(Exception):  # not recorded: `_first_run_done` records a later point
                self._ran = ctx._observe()  # not `record`: the tree's own run reports an error
        return self._output

    def _ready_completion(self) -> Completion:
        """Completion of the first run's work (recorded lazily: a later point on that context is also fine)."""
        with self._mutex:
            if self._ready is None:
                assert self._ran_on is not None
                self._ready = self._ran_on._observe()
            return self._ready

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return () if self._inner is None else (self._inner,)

    def _drop(self) -> None:
        self._inner = None

    def _hand_off(self) -> tuple[DeviceOp[Any], ...]:
        with self._mutex:
            if self._ran_on is None:
                return ()  # released by a tree that never reached it: the inner op waits for the first run
            if self._inner is None or not self._first_run_done():
                # Released by a tree that never reached it (it failed first) while the first run's work is still
                # queued on another context: the tree that ran it (or one that waited for it) releases it later.
                return ()
            inner, self._inner = self._inner, None
        return (inner,)

    def _first_run_done(self) -> bool:
        """Whether the first run's work is done (with ``_mutex`` held). A completion that reports a failure is done
        (the work ended), as ``Completion.add_done_callback`` counts it."""
        ready = self._ran
        if ready is None:  # the first run's record failed: a later point of its context also tells
            assert self._ran_on is not None
            try:
                ready = self._ran = self._ran_on._observe()
            except Exception:  # not known: kept (never handed back early), as a tree whose work failed keeps it
                return False
        try:
            return ready.query()
        except Exception:
            return True


def _first_run_in_capture() -> BaseException:
    return CaptureError(
        "a shared op", "its first execution would only be recorded, so its output would not exist for other uses"
    )


def arity(n: object) -> int:
    """``n`` as the length ``.unzip(n)`` splits into: an int (``operator.index``, once) of at least 1, else
    `OpTypeError` (``n`` < 1 made no element op: the op was moved into nothing and its work could never run)."""
    try:
        count = operator.index(n)  # type: ignore[arg-type]  # checked here: anything with __index__
    except TypeError:
        count = None
    if count is None or count < 1:
        got = repr(n) if count is not None else type(n).__name__
        raise OpTypeError(".unzip(n)", "an int n >= 1 (the length of the op's output tuple)", got, "pass that length")
    return count


def unzip_shared(shared: Shared[tuple[Any, ...]], n: int) -> tuple[DeviceOp[Any], ...]:
    """Split a shared tuple-valued op into ``n`` element ops (checking the arity when it runs)."""
    return tuple(_combinators.Map(shared, _Element(i, n)) for i in range(n))


class _Element(Generic[U]):
    """Picks element ``index`` of an ``n``-tuple, checking that the output really has ``n`` elements."""

    __slots__ = ("index", "n")

    def __init__(self, index: int, n: int) -> None:
        self.index = index
        self.n = n

    def __call__(self, out: tuple[Any, ...]) -> Any:
        if not isinstance(out, tuple) or len(out) != self.n:
            got = f"a {len(out)}-tuple" if isinstance(out, tuple) else type(out).__name__
            raise OpTypeError(f".unzip({self.n})", f"an op whose output is a {self.n}-tuple", got)
        return out[self.index]
