"""Executing an op tree: the blocking and the asyncio paths share one run record.

A run claims the root op, enqueues the tree on one context with the execution lock held, and keeps the op
tree and its output until the context reports the work done; then it releases the tree (inputs handed
back) and returns the output, or raises the first error (from enqueuing or from the work itself).

Await: poll ``ctx.query()`` for at most ``TILE_AIO_SPIN_US`` (a small kernel finishes within it, so
the common case costs no thread hop); otherwise record a completion and let it call back, from a waiter
thread or the host stream's worker, into the event loop with ``call_soon_threadsafe``. The callback holds
the run, so a cancelled ``await`` still keeps the inputs alive until the work is done and releases them
then. If the loop is already closed when the work completes, the run is released in the callback's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tile.aio import _knobs, _lock
from tile.aio._context import ExecutionContext, refuse_recorder
from tile.aio._errors import KnobError

if TYPE_CHECKING:
    from tile.aio._op import DeviceOp, Site

__all__ = ["Run", "run_async", "run_sync"]

T = TypeVar("T")


class Run(Generic[T]):
    """One execution of an op tree on one context."""

    __slots__ = ("ctx", "error", "op", "output")

    def __init__(self, op: DeviceOp[T], ctx: ExecutionContext, verb: str, site: Site) -> None:
        refuse_recorder(ctx, verb)
        _lock.acquire(verb)
        try:
            op._claim(_executed_by(verb), site)
        except BaseException:
            _lock.release()
            raise
        self.op: DeviceOp[T] | None = op
        self.ctx = ctx
        self.error: BaseException | None = None
        self.output: T | None = None
        try:
            self.output = op._run_root(ctx)
        except BaseException as exc:  # the work enqueued so far still runs: report after it completes
            self.error = exc
        finally:
            _lock.release()

    def fail(self, error: BaseException | None) -> None:
        """Note an error of the work itself (the first error wins)."""
        if self.error is None:
            self.error = error
            if error is not None and self.op is not None:
                _note_waited_for(error, self.op)

    def finish(self) -> T:
        """Release the op tree (the work is done) and return the output or raise the first error."""
        op, self.op = self.op, None
        if op is not None:
            op._release()
        error, self.error = self.error, None
        output, self.output = self.output, None
        if error is not None:
            raise error
        return output  # type: ignore[return-value]  # None only when an error was raised above


def run_sync(op: DeviceOp[T], ctx: ExecutionContext, verb: str, site: Site) -> T:
    """Execute ``op`` on ``ctx``, block until its work is done, return its output.

    `Run`'s steps without the record (the run ends here, so nothing needs to hold it): per launch this is the hot
    path of ``.sync()`` and ``.sync_on()``.
    """
    refuse_recorder(ctx, verb)
    _lock.acquire(verb)
    try:
        op._claim(_VERBS.get(verb) or _executed_by(verb), site)  # the cache hit inlined (per launch)
    except BaseException:
        _lock.release()
        raise
    error: BaseException | None = None
    output: T | None = None
    try:
        output = op._run_root(ctx)
    except BaseException as exc:  # the work enqueued so far still runs: report after it completes
        error = exc
    finally:
        _lock.release()
    try:
        ctx.synchronize()
    except Exception as exc:  # a failure of the work (the first error wins)
        if error is None:
            error = exc
            _note_waited_for(exc, op)
    op._release()
    if error is not None:
        raise error
    return output  # type: ignore[return-value]  # None only when an error was raised above


def _note_waited_for(error: BaseException, op: DeviceOp[Any]) -> None:
    """Name the op whose completion reported ``error`` (a GPU fault's message names no kernel). Python 3.10 has no
    exception notes; there the error stays as it is."""
    add_note = getattr(error, "add_note", None)
    if add_note is None:
        return
    try:
        described = op._describe()
    except Exception:  # a description must never replace the error it explains
        return
    add_note(
        f"reported while waiting for {described}; CUDA reports a kernel fault at the next wait, so an earlier "
        "launch on the same stream may be the cause"
    )


_VERBS: dict[str, str] = {}


def _executed_by(verb: str) -> str:
    """``"executed by <verb>"``, formatted once per verb (the verbs are a handful of literals)."""
    found = _VERBS.get(verb)
    if found is None:
        found = _VERBS[verb] = f"executed by {verb}"
    return found


async def run_async(op: DeviceOp[T], ctx: ExecutionContext, verb: str, site: Site) -> T:
    """Execute ``op`` on ``ctx`` and resolve when its work is done (see the module docstring)."""
    run = Run(op, ctx, verb, site)
    try:
        if ctx.query():
            return run.finish()
        try:
            budget = _knobs.spin_budget_ns()
        except KnobError as exc:  # reported once the work is done; meanwhile do not spin
            run.fail(exc)
            budget = 0
        if _poll(ctx, budget):
            return run.finish()
        completion = ctx.record()
    except Exception as exc:  # query() or record() failed: make sure the work is over before releasing
        run.fail(exc)
        return _finish_blocking(run, ctx)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    completion.add_done_callback(lambda error: _deliver(loop, future, run, error))
    return await future


def _finish_blocking(run: Run[T], ctx: ExecutionContext) -> T:
    """Error path: wait for the context (blocking the loop, rarely) so no input is released early."""
    with contextlib.suppress(Exception):  # the first error is already noted on the run
        ctx.synchronize()
    return run.finish()


def _poll(ctx: ExecutionContext, budget_ns: int) -> bool:
    """Query ``ctx`` until it is idle or ``budget_ns`` passed; True when idle."""
    deadline = time.perf_counter_ns() + budget_ns
    while time.perf_counter_ns() < deadline:
        if ctx.query():
            return True
    return False


def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], run: Run[T], error: Any) -> None:
    """Completion callback (any thread): settle the future on the loop's thread."""
    run.fail(error)
    try:
        loop.call_soon_threadsafe(_settle, future, run)
    except RuntimeError:  # the loop is closed: nobody awaits any more, but the inputs must still go back
        _abandon(run)


def _settle(future: asyncio.Future[T], run: Run[T]) -> None:
    try:
        output = run.finish()
    except BaseException as exc:  # handed to the awaiting task, or dropped with it when it was cancelled
        if not future.done():
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(output)


def _abandon(run: Run[Any]) -> None:
    """Release a run whose awaiter is gone; its error has no one left to receive it."""
    with contextlib.suppress(Exception):  # the awaiting loop is closed, so there is nobody to raise to
        run.finish()
