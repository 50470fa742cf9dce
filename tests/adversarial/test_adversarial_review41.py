"""Adversarial review 41: ``tile.aio`` under asyncio and threads, with tile.frontend launches, on both launch paths
(``path``). The device work is held back by a gated worker host stream (as in ``test_frontend_interrupt.py`` and
review 35), so "the kernel still runs" is observable on the CPU: a handle's ``pending`` count stays 1 while the work
using it may still run, and must drop to 0 once it is done (never before, never never).

Holes found and fixed (class level, `tile.aio._run`):

- An ``await`` whose completion came while its event loop was not running lost its inputs for good: the completion's
  callback queued the hand-back (``run.finish()``) on the loop with ``call_soon_threadsafe``, and a loop that never
  ran again (``loop.close()`` after a ``wait_for`` timed out and the work then completed, a loop whose thread exited
  without closing it, ``asyncio.run`` closing with the hand-over still queued) dropped it with the run: the launch's
  tensors stayed moved and their frees deferred forever, with no error anywhere. The callback now releases the run
  in its own thread (the work is done there, as the closed-loop path and a parked run already did) and hands only the
  outcome (output or error) to the loop.
- ``await op`` where no asyncio loop runs (a coroutine driven by hand, or by another async framework) claimed the op
  and enqueued its work, then ``asyncio.get_running_loop()`` raised a bare ``RuntimeError``: the run was dropped with
  its inputs moved into it, never handed back. The loop is now looked up before the claim; the refusal is a typed
  `tile.aio.EventLoopError` and the op is left unclaimed (it can still be ``.sync()``-ed).

- A ``KeyboardInterrupt`` while ``await`` polled or recorded its completion (between the claim and the wait: the
  spin of ``TILE_AIO_SPIN_US`` included) dropped the run with its inputs moved into it: held for good. The run is now
  parked as an interrupted ``.sync()``'s is (review 35's `park`): released once the work is done, and the op's next
  ``.sync()`` returns its output. A ``KeyboardInterrupt`` out of ``run_until_complete`` while the task waits leaves the
  task pending on a loop that may never run again: the first fix covers it.

Tried, and held (pinned below for a launch, a ``.then`` chain, ``zip`` and ``collect``):

- ``Task.cancel()`` of a task awaiting the op, and ``asyncio.wait_for`` timing out: the inputs stay held until the
  work is done, then go back once (review 19's callback-held run);
- ``asyncio.shield``: the outer await is cancelled, the shielded one completes with the right output;
- ``asyncio.gather(..., return_exceptions=True)`` with one failing op (a host function raising on its own stream):
  the failure is returned, the other op's output is right, every input goes back;
- ``asyncio.run`` ending with a task still awaiting an op: the task is cancelled, the inputs stay held until the
  work is done and then go back (the loop is closed by then: released in the completion's thread);
- one op awaited from two event loops in two threads, and an op awaited after another thread's ``.sync()`` of it:
  exactly one run, the other gets ``OpConsumedError``;
- an async generator yielding a launch, closed (``aclose``) or collected before the launch was awaited: the launch
  was never claimed and its drop hands the inputs back at once (no work was enqueued);
- a ``.then`` function raising mid-chain under ``await``: the error is raised only after the work already enqueued
  is done (the earlier link's inputs held until then, then back once), the later link never runs;
- a ``.then`` function reading a ``contextvars.ContextVar``: it runs in the awaiting task's context (it runs while the
  op is enqueued, in the task's step), so two tasks each see their own value; no user code runs in the completion's
  thread.

Read, not kept as tests: a graph replay (`_GraphLaunch`) and a collective awaited go through the same `run_async`
(so the fix covers them); a loop stopped and later run again runs the queued hand-over (the outcome is settled then).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.aio import EventLoopError, HostStream, OpConsumedError, SingleStream
from tile.frontend import f32

N = 256


class BoomError(Exception):
    """The failure of a host function or a ``.then`` function."""


@pytest.fixture
def gated() -> Iterator[tuple[HostStream, threading.Event]]:
    """A worker host stream whose queued work waits for the event."""
    stream = HostStream(worker=True)
    gate = threading.Event()
    stream.enqueue(gate.wait)
    yield stream, gate
    gate.set()
    _drained(stream)
    stream.close()


def _drained(stream: HostStream) -> None:
    """Everything queued so far ran, completion callbacks included."""
    done = threading.Event()
    stream._observe().add_done_callback(lambda _error: done.set())
    done.wait()


def _launch(kernels: ModuleType) -> tuple[Any, list[Any]]:
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    return kernels.scale_by_const(z, x, 3.0), [z._tensor._storage, x._storage]


def _op(kind: str, kernels: ModuleType) -> tuple[Any, list[Any]]:
    """An op of ``kind`` over one or two launches, and the storages its launches hold."""
    first, stores = _launch(kernels)
    if kind == "launch":
        return first, stores
    if kind == "then":
        return first.then(lambda out: kernels.scale_by_const(out[0], tile.ones(f32, [N]), 2.0)), stores
    second, more = _launch(kernels)
    if kind == "zip":
        return aio.zip(first, second), stores + more
    return aio.collect([first, second]), stores + more


KINDS = ["launch", "then", "zip", "collect"]


def _pending(stores: list[Any]) -> list[int]:
    return [s.pending for s in stores]


async def _timed_out(op: Any, stream: HostStream) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(_await_on(op, stream), 0.05)


async def _await_on(op: Any, stream: HostStream) -> Any:
    return await op.schedule(SingleStream(stream))


# --- hole: the hand-back queued on a loop that never runs again -------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_loop_closed_with_the_hand_over_queued_still_hands_the_inputs_back(
    kernels: ModuleType, path: str, kind: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    op, stores = _op(kind, kernels)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_timed_out(op, stream))
        assert all(_pending(stores)), _pending(stores)  # the work may still run
        gate.set()
        _drained(stream)  # the completion ran while the loop was stopped (not closed): its hand-over is queued
    finally:
        loop.close()  # drops what was queued
    gc.collect()
    assert _pending(stores) == [0] * len(stores)  # before the fix: held for good


def test_a_loop_whose_thread_exits_without_closing_it_still_hands_the_inputs_back(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    op, stores = _launch(kernels)
    loop = asyncio.new_event_loop()

    def serve() -> None:  # an application thread running its own loop, leaving without closing it
        loop.run_until_complete(_timed_out(op, stream))

    t = threading.Thread(target=serve)
    t.start()
    t.join()
    try:
        assert _pending(stores) == [1, 1]
        gate.set()
        _drained(stream)  # the hand-over is queued on the loop nobody runs any more
        gc.collect()
        assert _pending(stores) == [0, 0]  # before the fix: held for as long as the loop lives (dropped: for good)
    finally:
        loop.close()  # the test's own tidiness (an unclosed loop warns when collected)


def test_an_interrupt_out_of_the_loop_while_awaiting_still_hands_back_after_the_work(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)

    def interrupt() -> None:
        raise KeyboardInterrupt("interrupted while the task awaits")

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.05, interrupt)
        await _await_on(launch, stream)

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt, match="while the task awaits"):
            loop.run_until_complete(main())
        assert _pending(stores) == [1, 1]
        gate.set()
        _drained(stream)
        assert _pending(stores) == [0, 0]  # before the fix: queued on the stopped loop (closed below: for good)
    finally:
        loop.close()


# --- hole: an interrupt between the claim and the wait ---------------------------------------------------------


@pytest.mark.parametrize("where", ["query", "record"])
def test_an_interrupt_before_the_await_waits_parks_the_run(
    kernels: ModuleType,
    path: str,
    where: str,
    gated: tuple[HostStream, threading.Event],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)
    real = getattr(HostStream, where)

    def interrupted(self: HostStream) -> Any:
        monkeypatch.setattr(HostStream, where, real)
        raise KeyboardInterrupt(f"interrupted in {where}()")

    monkeypatch.setattr(HostStream, where, interrupted)
    with pytest.raises(KeyboardInterrupt, match=where):
        asyncio.run(_await_on(launch, stream))
    assert _pending(stores) == [1, 1]  # the work may still run: nothing went back
    gate.set()
    _drained(stream)
    assert _pending(stores) == [0, 0]  # before the fix: held for good
    z = launch.sync_on(stream)[0]  # the parked run's output, handed out once
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))
    with pytest.raises(OpConsumedError, match=r"executed by \.sync_on\(\)"):
        launch.sync_on(stream)


# --- hole: await outside a running asyncio loop -------------------------------------------------------------------


def test_an_await_outside_an_asyncio_loop_is_refused_before_anything_runs(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)
    driven = launch.schedule(SingleStream(stream)).__await__()  # as another async framework would drive it
    with pytest.raises(EventLoopError, match=r"awaited outside a running asyncio event loop.*still usable"):
        driven.send(None)  # before the fix: RuntimeError after the claim and the enqueue, the inputs held for good
    assert not launch.consumed
    gate.set()
    z = launch.sync_on(stream)[0]
    assert _pending(stores) == [0, 0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


# --- what held ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["cancel", "wait_for"])
def test_a_cancelled_await_holds_the_inputs_until_the_work_is_done(
    kernels: ModuleType, path: str, kind: str, how: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    op, stores = _op(kind, kernels)

    async def main() -> None:
        if how == "wait_for":
            await _timed_out(op, stream)
        else:
            task = asyncio.ensure_future(_await_on(op, stream))
            await asyncio.sleep(0.02)  # the task is parked in the await
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert all(_pending(stores)), _pending(stores)
        gate.set()
        while any(_pending(stores)):  # the loop runs: the hand-over comes
            await asyncio.sleep(0.001)

    asyncio.run(main())
    assert _pending(stores) == [0] * len(stores)


def test_a_shielded_await_completes_after_the_outer_one_is_cancelled(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    op, stores = _op("then", kernels)

    async def main() -> Any:
        inner = asyncio.ensure_future(_await_on(op, stream))
        with pytest.raises(asyncio.TimeoutError, match=r"^$"):
            await asyncio.wait_for(asyncio.shield(inner), 0.05)
        assert all(_pending(stores)), _pending(stores)
        gate.set()
        return await inner

    z = asyncio.run(main())[0]
    assert _pending(stores) == [0, 0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2.0, np.float32))  # the second link's


def test_gather_returning_exceptions_gives_the_failure_and_the_other_output(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    other = HostStream(worker=True)
    try:
        launch, stores = _launch(kernels)

        def boom() -> None:
            raise BoomError("host function failed")

        async def main() -> tuple[Any, Any]:
            failing = _await_on(aio.host_call(boom), other)
            return await asyncio.gather(failing, _await_on(launch, stream), return_exceptions=True)

        gate.set()
        failure, out = asyncio.run(main())
        z = out[0]
        assert isinstance(failure, BoomError)
        assert _pending(stores) == [0, 0]
        np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))
    finally:
        other.close()


def test_asyncio_run_ending_with_a_pending_await_hands_back_after_the_work(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)
    left: list[asyncio.Future[Any]] = []

    async def main() -> None:
        left.append(asyncio.ensure_future(_await_on(launch, stream)))  # never awaited: asyncio.run cancels it
        await asyncio.sleep(0.02)

    asyncio.run(main())
    assert _pending(stores) == [1, 1]  # the loop is closed, the work not done
    gate.set()
    _drained(stream)
    assert _pending(stores) == [0, 0]


def test_one_op_awaited_from_two_loops_in_two_threads_runs_once(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)
    results: list[object] = []
    barrier = threading.Barrier(2)

    def serve() -> None:
        barrier.wait()
        try:
            results.append(asyncio.run(_await_on(launch, stream)))
        except OpConsumedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=serve) for _ in range(2)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert sorted(type(r).__name__ for r in results) == ["OpConsumedError", "tuple"], results
    assert _pending(stores) == [0, 0]


def test_an_await_after_another_threads_sync_is_refused(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    launch, stores = _launch(kernels)
    t = threading.Thread(target=launch.sync_on, args=(stream,))
    t.start()
    while not launch.consumed:
        t.join(0.001)
    with pytest.raises(OpConsumedError, match=r"executed by \.sync_on\(\)"):
        asyncio.run(_await_on(launch, stream))
    assert _pending(stores) == [1, 1]  # the refusal handed nothing back early
    gate.set()
    t.join()
    assert _pending(stores) == [0, 0]


@pytest.mark.parametrize("end", ["aclose", "collected"])
def test_an_async_generator_closed_before_awaiting_its_launch_hands_it_back(
    kernels: ModuleType, path: str, end: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, _gate = gated
    seen: list[list[Any]] = []

    async def launches() -> AsyncGenerator[Any, None]:
        launch, stores = _launch(kernels)
        seen.append(stores)
        yield launch
        yield await _await_on(launch, stream)  # never reached

    async def main() -> None:
        gen = launches()
        first = await gen.__anext__()
        assert not first.consumed
        del first
        if end == "aclose":
            await gen.aclose()
        del gen
        gc.collect()

    asyncio.run(main())
    gc.collect()
    assert _pending(seen[0]) == [0, 0]  # nothing was enqueued: the unclaimed launch's drop handed back


def test_a_then_function_raising_mid_chain_under_await_reports_after_the_work(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    first, stores = _launch(kernels)
    later: list[object] = []

    def fail(_out: Any) -> Any:
        raise BoomError("then function failed")

    def after(out: Any) -> Any:
        later.append(out)
        return aio.value(out)

    chain = first.then(fail).then(after)

    async def main() -> None:
        task = asyncio.ensure_future(_await_on(chain, stream))
        await asyncio.sleep(0.05)
        assert not task.done()  # the first link's work is still queued: the error waits for it
        assert _pending(stores) == [1, 1]
        gate.set()
        with pytest.raises(BoomError, match="then function failed"):
            await task

    asyncio.run(main())
    assert _pending(stores) == [0, 0]
    assert later == []


def test_then_functions_see_their_awaiting_tasks_context(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    var: contextvars.ContextVar[str] = contextvars.ContextVar("review41")
    seen: dict[str, str] = {}

    def noting(name: str) -> Callable[[Any], Any]:
        def note(out: Any) -> Any:
            seen[name] = var.get()
            return aio.value(out)

        return note

    async def one(name: str) -> Any:
        var.set(name)
        launch, _stores = _launch(kernels)
        return await _await_on(launch.then(noting(name)), stream)

    async def main() -> None:
        gate.set()
        await asyncio.gather(one("a"), one("b"))

    asyncio.run(main())
    assert seen == {"a": "a", "b": "b"}
