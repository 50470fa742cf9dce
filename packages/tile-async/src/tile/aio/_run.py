"""Executing an op tree: the blocking and the asyncio paths share one run record.

A run claims the root op, enqueues the tree on one context with the execution lock held, and keeps the op
tree and its output until the context reports the work done; then it releases the tree (inputs handed
back) and returns the output, or raises the first error (from enqueuing or from the work itself).

Await: poll ``ctx.query()`` for at most ``TILE_AIO_SPIN_US`` (a small kernel finishes within it, so
the common case costs no thread hop); otherwise record a completion and let it call back, from a waiter
thread or the host stream's worker. The callback holds the run, so a cancelled ``await`` still keeps the
inputs alive until the work is done. It releases the run in its own thread (the work is done) and only then
hands the outcome to the event loop with ``call_soon_threadsafe``: the release never depends on the loop
running again (a loop stopped, closed or dropped with the hand-over still queued would otherwise keep the
inputs for good, review 41). The loop is looked up before the op is claimed: an ``await`` driven outside a
running asyncio loop is refused before any work is enqueued. A ``KeyboardInterrupt`` between the claim and the
wait parks the run as an interrupted ``.sync()`` does (`park`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tile.aio import _knobs, _lock
from tile.aio._context import ExecutionContext, refuse_recorder
from tile.aio._errors import EventLoopError, KnobError, OpConsumedError

if TYPE_CHECKING:
    from tile.aio._op import DeviceOp, Site

__all__ = ["Interrupted", "Run", "park", "run_async", "run_sync"]

T = TypeVar("T")

_FINISHING = threading.Lock()  # held while a run's tree, error and output are taken by `Run.finish`


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
            _lock._state.held = False  # `_lock.release()` inlined: no Python call a KeyboardInterrupt can land in

    def fail(self, error: BaseException | None) -> None:
        """Note an error of the work itself (the first error wins)."""
        if self.error is None:
            self.error = error
            if error is not None and self.op is not None:
                _note_waited_for(error, self.op)

    def finish(self) -> T:
        """Release the op tree (the work is done) and return the output or raise the first error.

        Once: the take is atomic (`_FINISHING`), so a completion's callback and the error path of `run_async` (a
        callback registered before its registration raised) never both release the tree; the later gets nothing."""
        with _FINISHING:
            op, self.op = self.op, None
            error, self.error = self.error, None
            output, self.output = self.output, None
        if op is not None:
            op._release()
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
    except OpConsumedError:
        _lock.release()
        parked = op._fate
        if type(parked) is Interrupted:  # a run whose wait was interrupted: finish it here
            return _resume(op, parked, verb, site)  # type: ignore[no-any-return]  # its output is op's
        raise
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
        # `_lock.release()` inlined: a KeyboardInterrupt lands at a Python call's entry, and one landing here left
        # the lock held for good (every later run of the thread: ExecutionLockError) and the run neither waited
        # for nor parked (its handles kept for good; review 36). From here the next call is the wait's, whose
        # interrupt parks the run.
        _lock._state.held = False
    try:
        ctx.synchronize()
    except Exception as exc:  # a failure of the work (the first error wins)
        if error is None:
            error = exc
            _note_waited_for(exc, op)
    except BaseException:  # KeyboardInterrupt while waiting: the work may still run, so nothing goes back now
        park(op, ctx, output, error)
        raise
    op._release()
    if error is not None:
        raise error
    return output  # type: ignore[return-value]  # None only when an error was raised above


class Interrupted(tuple[str, "Site"]):
    """The fate ``(verb, site)`` of an op whose run was interrupted while it waited for the work (a
    ``KeyboardInterrupt`` in ``synchronize()``): the op keeps its inputs (moved into it) while the work may still run.

    The run's context (``ctx``), ``output`` and first ``error`` stay here. The op's tree is released (inputs handed
    back) once the work is done: by a completion recorded on ``ctx`` (`park`), or by the next ``.sync()`` of the op,
    which waits for ``ctx`` and then returns the output (`_resume`). ``released`` changes under ``releasing``, held
    through the release (a resume returns only once it is complete), and ``taken`` under ``_PARKED``: the tree is
    released once and the output handed out once."""

    ctx: ExecutionContext
    output: Any
    error: BaseException | None
    released: bool
    releasing: threading.Lock
    taken: bool


_PARKED = threading.Lock()  # held while an `Interrupted` fate's ``taken`` is tested and set


def park(op: DeviceOp[Any], ctx: ExecutionContext, output: Any, error: BaseException | None) -> None:
    """Keep the run of ``op`` (claimed, its work enqueued on ``ctx``) whose wait was interrupted: give it the
    `Interrupted` fate and release its tree once a completion observed on ``ctx`` says the work is done (a failure
    stays with ``ctx``, for the resume's wait). If the completion cannot be recorded, the tree stays held (never
    released early) until ``.sync()`` resumes the run."""
    fate = op._fate
    assert fate is not None, "only a claimed op's run is parked"
    parked = Interrupted((fate[0], fate[1]))
    parked.ctx, parked.output, parked.error, parked.released, parked.taken = ctx, output, error, False, False
    parked.releasing = threading.Lock()
    op._fate = parked
    try:
        # Observed, not recorded: `record` takes a host stream's error, so the resume's wait (or the stream's next
        # one, if the op is dropped) would report a failed run's stale output as a success (review 35).
        completion = ctx._observe()
        completion.add_done_callback(lambda _failed: _release_parked(op, parked))
    except Exception:  # held until `.sync()` resumes it: releasing now could be early
        pass


def _release_parked(op: DeviceOp[Any], parked: Interrupted) -> None:
    """Release the tree of a parked run (its work is done), once; a second caller returns when the first is done."""
    with parked.releasing:
        if parked.released:
            return
        parked.released = True
        op._release()


def _resume(op: DeviceOp[Any], parked: Interrupted, verb: str, site: Site) -> Any:
    """Finish a parked run at the op's next ``.sync()``: wait for its context, release the tree (if its completion
    did not yet), then return the run's output or raise its first error; the output is handed out once."""
    failure: BaseException | None = None
    try:
        parked.ctx.synchronize()  # interrupted again: still parked
    except Exception as exc:
        failure = exc
    return _finish_parked(op, parked, verb, site, failure)


async def _resume_async(op: DeviceOp[Any], parked: Interrupted, verb: str, site: Site) -> Any:
    """`_resume` for ``await``: wait for the parked run's context without blocking the event loop (a completion
    recorded there wakes it), then finish the run. A cancelled ``await`` leaves the run parked."""
    try:
        completion = parked.ctx.record()
    except Exception:  # no completion to wait for: wait blocking, as a run's error path does
        return _resume(op, parked, verb, site)
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def wake(error: BaseException | None) -> None:
        # `record` took the context's error: it is the parked run's now, also if this await is cancelled (the run
        # stays parked, and the next resume must report it, not the stale output as a success).
        if error is not None and parked.error is None:
            parked.error = error
            _note_waited_for(error, op)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits; the park's completion releases
            loop.call_soon_threadsafe(lambda: None if woken.done() else woken.set_result(None))

    completion.add_done_callback(wake)
    await woken
    return _finish_parked(op, parked, verb, site, None)


def _finish_parked(op: DeviceOp[Any], parked: Interrupted, verb: str, site: Site, failure: BaseException | None) -> Any:
    """The end of a resume, the parked run's context being idle (``failure``: its wait's error, if any)."""
    error = parked.error
    if error is None and failure is not None:
        error = failure
        _note_waited_for(failure, op)
    _release_parked(op, parked)
    with _PARKED:
        taken, parked.taken = parked.taken, True
    if taken:  # another thread's .sync() resumed it first
        raise OpConsumedError(op._describe(), f"{parked[0]} at {parked[1][0]}:{parked[1][1]}")
    op._fate = (_executed_by(verb), site)
    output, parked.output, parked.error = parked.output, None, None
    if error is not None:
        raise error
    return output


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
    """Execute ``op`` on ``ctx`` and resolve when its work is done (see the module docstring). An op whose ``.sync()``
    was interrupted while it waited is resumed, as ``.sync()`` resumes it."""
    # Before the claim: without a running asyncio loop (a coroutine driven by hand or by another framework) nothing
    # could deliver the outcome, and a run claimed and enqueued here would keep its inputs for good (review 41).
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise EventLoopError(op._describe()) from None
    future: asyncio.Future[T] = loop.create_future()
    try:
        run = Run(op, ctx, verb, site)
    except OpConsumedError:
        parked = op._fate
        if type(parked) is Interrupted:  # a run whose wait was interrupted: finish it here
            return await _resume_async(op, parked, verb, site)  # type: ignore[no-any-return]  # its output is op's
        raise
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
        completion.add_done_callback(lambda error: _deliver(loop, future, run, error))
    except Exception as exc:  # query(), record() or the callback failed: the work must be over before releasing
        run.fail(exc)
        return _finish_blocking(run, ctx)
    except BaseException:  # KeyboardInterrupt while polling or recording: the work may still run
        _park_run(run, ctx)
        raise
    return await future


def _park_run(run: Run[Any], ctx: ExecutionContext) -> None:
    """Hand a run interrupted before it could wait to `park` (as an interrupted ``.sync()``'s): its tree is released
    once a completion observed on ``ctx`` says the work is done, and the op's next ``.sync()`` returns the output.
    The take is atomic with `Run.finish`, so a completion callback registered before the interrupt releases nothing.
    Before review 41 the run was dropped here with its inputs moved into it: held for good."""
    with _FINISHING:
        op, run.op = run.op, None
        output, run.output = run.output, None
        error, run.error = run.error, None
    if op is not None:
        park(op, ctx, output, error)


def _finish_blocking(run: Run[T], ctx: ExecutionContext) -> T:
    """Error path: wait for the context (blocking the loop, rarely) so no input is released early; interrupted
    (a ``KeyboardInterrupt``), the run is parked as an interrupted ``.sync()``'s is."""
    try:
        ctx.synchronize()
    except Exception:  # the first error is already noted on the run
        pass
    except BaseException:
        op, run.op = run.op, None
        if op is not None:
            park(op, ctx, run.output, run.error)
        raise
    return run.finish()


def _poll(ctx: ExecutionContext, budget_ns: int) -> bool:
    """Query ``ctx`` until it is idle or ``budget_ns`` passed; True when idle."""
    deadline = time.perf_counter_ns() + budget_ns
    while time.perf_counter_ns() < deadline:
        if ctx.query():
            return True
    return False


def _deliver(loop: asyncio.AbstractEventLoop, future: asyncio.Future[T], run: Run[T], error: Any) -> None:
    """Completion callback (any thread; the work is done): release the run here, then settle the future on the
    loop's thread. Releasing here, not in the loop, means no inputs are kept when the loop never runs the hand-over
    (stopped, closed or dropped with it queued); only the outcome is lost then, and nobody awaits it any more."""
    run.fail(error)
    outcome: tuple[bool, Any]
    try:
        outcome = (True, run.finish())
    except BaseException as exc:  # the first error: handed to the awaiting task, or dropped with it when it is gone
        outcome = (False, exc)
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody awaits any more, the inputs went back
        loop.call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future[T], outcome: tuple[bool, Any]) -> None:
    """On the loop's thread: hand the run's output or error to the awaiting task (gone if it was cancelled)."""
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
