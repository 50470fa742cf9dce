"""Ownership rules: an op runs once, moved ops cannot be reused, inputs are held until the work is done
(also when the op fails), and the execution lock refuses nested blocking executions."""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import pytest

from tile import aio


class Resource:
    """A stand-in for a device buffer whose lifetime the tests watch through a weak reference."""

    def __init__(self, name: str = "r") -> None:
        self.name = name


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_an_op_executes_at_most_once() -> None:
    op = aio.value(1)
    assert op.sync() == 1
    assert op.consumed
    with pytest.raises(aio.OpConsumedError, match=r"Value op was already executed by \.sync\(\) at .*test_aio_own"):
        op.sync()


def test_a_moved_op_cannot_be_executed_or_moved_again() -> None:
    op = aio.value(1)
    mapped = op.map(str)
    with pytest.raises(aio.OpConsumedError, match=r"already moved into \.map\(\) at .*test_aio_ownership.py:\d+"):
        op.sync()
    with pytest.raises(aio.OpConsumedError, match=r"moved into \.map"):
        aio.zip(op)
    assert mapped.sync() == "1"


def test_then_moves_its_op_and_names_the_line_it_was_moved_at() -> None:
    """``.then`` claims inline with a fate cached per call site: the second move is refused at any site, naming the
    first move's line (not the cached one of another site), and the source is no longer executable."""
    ops = [aio.value(i) for i in range(2)]
    lines = []
    for op in ops:
        op.then(aio.value)
        lines.append(sys._getframe().f_lineno - 1)
    other = ops[0].then  # the same refusal through a bound method kept aside
    for op in ops:
        with pytest.raises(
            aio.OpConsumedError, match=rf"already moved into \.then\(\) at .*test_aio_ownership\.py:{lines[0]}\b"
        ):
            op.then(aio.value)
        with pytest.raises(aio.OpConsumedError, match=r"moved into \.then"):
            op.sync()
    with pytest.raises(aio.OpConsumedError, match=rf"test_aio_ownership\.py:{lines[0]}\b"):
        other(aio.value)
    moved_here = aio.value(5)
    chained = moved_here.then(aio.value)
    line = sys._getframe().f_lineno - 1
    with pytest.raises(aio.OpConsumedError, match=rf"test_aio_ownership\.py:{line}\b"):
        moved_here.then(aio.value)
    assert chained.sync() == 5


def test_a_shared_op_may_be_chained_by_then_any_number_of_times() -> None:
    shared = aio.value(3).shared()
    first = shared.then(lambda v: aio.value(v + 1))
    second = shared.then(lambda v: aio.value(v * 2))
    assert (first.sync(), second.sync()) == (4, 6)


def test_an_op_returned_by_then_is_claimed() -> None:
    inner = aio.value(2)
    assert aio.value(1).then(lambda _: inner).sync() == 2
    with pytest.raises(aio.OpConsumedError, match=r"returned by the \.then\(\) function"):
        inner.sync()


def test_awaiting_twice_raises() -> None:
    import asyncio

    op = aio.value(1)

    async def twice() -> None:
        assert await op == 1
        with pytest.raises(aio.OpConsumedError, match="executed by await"):
            await op

    asyncio.run(twice())


def test_inputs_are_released_once_the_work_is_done(worker: aio.HostStream, gate: threading.Event) -> None:
    res = Resource()
    ref = weakref.ref(res)
    op = aio.host_call(lambda r: gate.wait(), res).map(len)
    del res
    thread = threading.Thread(target=op.sync_on, args=(worker,))
    thread.start()
    wait_until(lambda: not worker.query())
    gc.collect()
    assert ref() is not None  # the work is pending: the op still owns its input
    gate.set()
    thread.join(timeout=5)
    gc.collect()
    assert ref() is None  # done: handed back, and nobody kept it
    assert op.consumed  # the op itself is still referenced here, but no longer holds its inputs


def test_the_output_is_handed_back_and_the_op_keeps_nothing() -> None:
    res = Resource()
    ref = weakref.ref(res)
    op = aio.value(res)
    del res
    out = op.sync()
    assert out is ref()
    del out
    gc.collect()
    assert ref() is None


def test_an_exception_in_map_propagates_after_the_work_completes(worker: aio.HostStream, gate: threading.Event) -> None:
    res = Resource()
    ref = weakref.ref(res)
    done: list[str] = []

    def boom(_: object) -> int:
        raise ValueError("bad map")

    def work(_: Resource) -> None:
        gate.wait()
        done.append("work")

    op = aio.host_call(work, res).map(boom)
    del res
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.sync_on(worker)
        except ValueError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=0.2)
    assert thread.is_alive()  # map already raised, but the sync waits for the enqueued work
    gc.collect()
    assert ref() is not None
    gate.set()
    thread.join(timeout=5)
    assert [str(e) for e in errors] == ["bad map"]
    assert done == ["work"]
    errors.clear()  # the traceback holds boom's frame, whose argument held the resource
    gc.collect()
    assert ref() is None


def test_work_after_a_failing_map_in_the_same_op_is_not_enqueued() -> None:
    log: list[str] = []

    def boom(_: object) -> aio.DeviceOp[object]:
        raise RuntimeError("stop")

    op = aio.host_call(log.append, "before").then(boom).then(lambda _: aio.host_call(log.append, "after"))
    with pytest.raises(RuntimeError, match="stop"):
        op.sync()
    assert log == ["before"]


def nested_sync(_: object = None) -> int:
    return aio.value(1).sync()


@pytest.mark.parametrize(
    "make",
    [
        lambda: aio.value(0).map(nested_sync),
        lambda: aio.value(0).then(lambda _: aio.value(nested_sync())),
        lambda: aio.with_context(nested_sync),
        lambda: aio.host_call(nested_sync),
    ],
    ids=["map", "then", "with_context", "host_call"],
)
def test_a_nested_sync_raises_instead_of_deadlocking(make: Callable[[], aio.DeviceOp[object]]) -> None:
    with pytest.raises(aio.ExecutionLockError, match=r"\.sync\(\) was called while this thread is executing"):
        make().sync()
    assert aio.value(2).sync() == 2  # the lock was given back


def test_a_nested_sync_in_worker_host_work_raises(worker: aio.HostStream) -> None:
    with pytest.raises(
        aio.ExecutionLockError, match=r"\.sync\(\) was called while.*Return a DeviceOp from \.then\(\) instead"
    ):
        aio.host_call(nested_sync).sync_on(worker)
    assert aio.value(3).sync_on(worker) == 3


def test_the_lock_is_per_thread(worker: aio.HostStream, gate: threading.Event) -> None:
    entered = threading.Event()

    def hold() -> None:
        entered.set()
        gate.wait()

    thread = threading.Thread(target=aio.host_call(hold).sync_on, args=(worker,))
    thread.start()
    entered.wait(timeout=5)
    assert aio.value(4).sync() == 4  # another thread executing is not a nested execution
    gate.set()
    thread.join(timeout=5)


def test_sites_skip_frames_of_tile_packages() -> None:
    namespace: dict[str, object] = {"__name__": "tile.frontend._fake"}
    exec("def launcher_sync(op):\n    return op.sync()\n", namespace)  # a wrapper living in a Tile package
    op = aio.value(1)
    namespace["launcher_sync"](op)  # type: ignore[operator]  # defined by exec just above
    with pytest.raises(aio.OpConsumedError, match=r"test_aio_ownership\.py:\d+"):
        op.sync()


_FATE: Any = aio.DeviceOp.__dict__["_fate"]  # the slot the claim checks and sets (a member descriptor)


class _MeetingOp(aio.DeviceOp[int]):
    """An op whose claim, between reading its state and taking it, waits (at most 0.3 s) for a second thread to read
    it too: without an atomic claim both threads see it fresh and both execute it."""

    __slots__ = ("_inside", "runs")

    def __init__(self) -> None:
        self._inside = threading.Barrier(2)
        self.runs = 0
        super().__init__()

    def _read_fate(self) -> object:
        fate = _FATE.__get__(self)
        if fate is None and threading.current_thread() is not threading.main_thread():
            with contextlib.suppress(threading.BrokenBarrierError):  # timed out: the claim kept the other out
                self._inside.wait(timeout=0.3)
        return fate

    _fate = property(_read_fate, _FATE.__set__)  # the slot, with a meeting point

    def _execute(self, ctx: aio.ExecutionContext) -> int:
        self.runs += 1
        return self.runs


def test_two_threads_cannot_both_execute_one_op(race: Any) -> None:
    op, stream = _MeetingOp(), aio.HostStream()
    results = race.run(lambda: op.sync_on(stream))
    assert op.runs == 1, f"both threads executed the op: {results}"
    assert sorted(type(r).__name__ for r in results) == ["OpConsumedError", "int"]
