"""Review 19: an adversarial look, from safe code only, at tile.aio's combinators for review 18's class of hole (an op's
arguments handed back, or its memory freed, before the work using them is done) and at what review 18's fix changed.
Each hole's test names it, failed before its fix and asserts the behaviour.

Hole found and fixed:

- a host stream's error was taken by whoever recorded the next completion on it, and since review 18 a shared op
  records one right after its first run (and a second use on another stream, a launch ordered after a producer's
  stream, a graph launch after the previous one record on another tree's stream). The run whose work failed then
  reported success: ``zip(host_call(fail).shared(), later)`` ran ``later`` (the stream was no longer poisoned) and
  returned, and a tree whose host work failed returned its output (unfinished data, reported done) once another tree
  ordered itself after that stream. Those completions are now *observers* (``ExecutionContext._observe``: a host
  stream's leaves its error in place for the run's own next record; CUDA's errors are sticky, so ``record()``).

Tried and found solid (tests below where cheap, else reasoned):

- a cancelled ``await`` (``asyncio.wait_for`` timing out, a task cancelled) keeps the tree until the completion's
  callback, which releases it after the work (`tile.aio._run`); a ``.map()``/``.then()`` function raising after
  earlier links enqueued work is reported after ``synchronize()``; a zip whose one side failed on enqueue after the
  other enqueued likewise (the run's release follows its wait); a failed capture releases the tree, of which nothing
  ran (a shared op's first run is refused there; a later use's wait is a host-side wait at capture); the C chain
  runner and releaser release nothing on error paths. (asyncio has no ``race``/``select`` of ops: ``asyncio.wait``
  losers are awaits, whose runs hold their trees as a cancelled await does.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32


def _fail(*_: object) -> None:
    raise ZeroDivisionError("the host work failed")


def _shared(op: aio.DeviceOp[Any]) -> aio.DeviceOp[Any]:
    return op.shared()


def _unzipped(op: aio.DeviceOp[Any]) -> aio.DeviceOp[Any]:
    first, _ = op.unzip(2)
    return first


@pytest.mark.parametrize("worker", [False, True], ids=["inline", "worker"])
@pytest.mark.parametrize("share", [_shared, _unzipped], ids=["shared", "unzip"])
def test_a_shared_op_whose_first_run_failed_reports_it_and_later_work_is_skipped(
    share: Callable[[aio.DeviceOp[Any]], aio.DeviceOp[Any]], worker: bool
) -> None:
    stream = aio.HostStream(worker=worker)
    s = share(aio.host_call(_fail, 1, 2))
    ran: list[int] = []
    with pytest.raises(ZeroDivisionError, match="host work failed"):
        aio.zip(s, aio.host_call(ran.append, 1)).sync_on(stream)
    assert ran == [], "work after the failed shared op ran: its stream's error had been taken"
    assert stream.query(), "the run took its own error"
    stream.close()


def test_a_second_use_on_another_stream_does_not_take_the_first_runs_error() -> None:
    """A shared op's second use records the first run's completion on the first tree's stream: it took that tree's
    error (of work enqueued after the shared op), and the first tree returned its output as done."""
    first, other = aio.HostStream(worker=True), aio.HostStream(worker=True)
    gate, enqueued, recorded = threading.Event(), threading.Event(), threading.Event()
    s = aio.value(7).shared()

    def hold(out: Any) -> Any:  # the first tree, all enqueued, waits to record its own completion
        enqueued.set()
        recorded.wait()
        return out

    tail = aio.zip(aio.host_call(gate.wait), aio.host_call(_fail)).map(hold)
    outcome: list[BaseException | tuple[Any, ...]] = []
    second: list[BaseException | tuple[Any, ...]] = []

    def run_second() -> None:  # records its wait for the first run's work on the first stream
        try:
            second.append(aio.zip(s, aio.empty()).sync_on(other))
        except ZeroDivisionError as exc:
            second.append(exc)

    def run_first() -> None:
        try:
            outcome.append(aio.zip(s, tail).sync_on(first))
        except ZeroDivisionError as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run_first)
    runner.start()
    try:
        enqueued.wait()  # the first tree's failing work is queued behind the gate
        waiter = threading.Thread(target=run_second)
        waiter.start()
        while s._ready is None:  # until the second use recorded there
            gate.wait(0.001)
    finally:
        recorded.set()
        gate.set()
        runner.join()
        waiter.join()
    assert len(second) == 1
    assert isinstance(second[0], ZeroDivisionError), "the second use waited for failed work and reported it"
    assert len(outcome) == 1
    assert isinstance(outcome[0], ZeroDivisionError), f"the failed tree returned {outcome[0]!r}"
    first.close()
    other.close()


def test_a_tree_whose_host_work_failed_reports_it_when_a_launch_on_another_stream_orders_after_it(
    kernels: ModuleType, path: str
) -> None:
    """A launch taking an in-flight handle from a tree on another stream records a completion there: it took that
    tree's error, and the tree returned its output as done although its own work had failed."""
    first, other = aio.HostStream(worker=True), aio.HostStream(worker=True)
    gate, recorded = threading.Event(), threading.Event()
    stash: list[Any] = []

    def keep(out: Any) -> aio.DeviceOp[None]:
        stash.append(out[2][0])  # the partition, in flight
        recorded.wait()  # the first tree records its own completion only after the later launch ordered itself
        return aio.empty()

    z = tile.zeros(f32, [64]).partition([32])
    tree = aio.zip(aio.host_call(gate.wait), aio.host_call(_fail), kernels.scale_by_const(z, tile.ones(f32, [64]), 2.0))
    outcome: list[BaseException | object] = []

    def run_first() -> None:
        try:
            outcome.append(tree.then(keep).sync_on(first))
        except ZeroDivisionError as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run_first)
    runner.start()
    try:
        while not stash:
            gate.wait(0.001)
        later = kernels.scale_by_const(stash.pop(), tile.ones(f32, [64]), 3.0)
        with pytest.raises(ZeroDivisionError, match="host work failed"):
            asyncio.run(_after(recorded, gate, later.schedule(aio.SingleStream(other))))
    finally:
        recorded.set()
        gate.set()
        runner.join()
    assert len(outcome) == 1
    assert isinstance(outcome[0], ZeroDivisionError), f"the failed tree returned {outcome[0]!r}"
    first.close()
    other.close()


async def _after(recorded: threading.Event, gate: threading.Event, scheduled: aio.Scheduled[Any]) -> Any:
    """Await ``scheduled`` (enqueued at once), letting the first tree go on only after that."""
    task = asyncio.ensure_future(_await(scheduled))
    await asyncio.sleep(0)
    recorded.set()
    gate.set()
    return await task


async def _await(scheduled: aio.Scheduled[Any]) -> Any:
    return await scheduled


def test_a_cancelled_await_keeps_the_inputs_until_the_work_is_done(kernels: ModuleType, path: str) -> None:
    """A timed-out (cancelled) await of a launch queued behind gated work: the read input's memory stays pending and
    a free through another handle is deferred until the work ran."""
    stream = aio.HostStream(worker=True)
    gate = threading.Event()
    x = tile.ones(f32, [64])
    keep = x[0:32]
    storage = x._storage
    z = tile.zeros(f32, [64]).partition([32])
    op = aio.zip(aio.host_call(gate.wait), kernels.scale_by_const(z, x, 2.0))
    del x

    async def timed_out() -> bool:
        try:
            await asyncio.wait_for(_await(op.schedule(aio.SingleStream(stream))), 0.01)
        except asyncio.TimeoutError:
            return True
        return False

    assert asyncio.run(timed_out()), "the await did not time out (the work was gated)"
    assert storage.pending == 1, "the cancelled await handed the launch back while it was queued"
    keep.free()
    assert not storage.dropped, "the memory was freed under the queued kernel"
    gate.set()
    stream.synchronize()
    stream.close()
    assert storage.pending == 0
    assert storage.dropped, "the deferred free ran once the work was done"
