"""Execution modes: sync, sync_on, await (fast poll and waiter paths), schedule, cancellation, errors."""

from __future__ import annotations

import asyncio
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
    pass


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


class Tag:
    def __init__(self, i: int) -> None:
        self.i = i

    def __call__(self, _: object) -> tuple[int]:
        return (self.i,)


class Scale:
    def __init__(self, k: int) -> None:
        self.k = k

    def __call__(self, x: int) -> int:
        return x * self.k


def where() -> aio.DeviceOp[aio.ExecutionContext]:
    return aio.with_context(lambda ctx: ctx)


def test_sync_runs_on_the_default_policy() -> None:
    pool = aio.default_policy()
    assert isinstance(pool, aio.RoundRobin)
    assert where().sync() in pool.contexts


def test_sync_on_runs_on_the_given_context() -> None:
    ctx = aio.HostStream()
    assert where().sync_on(ctx) is ctx


def test_sync_on_rejects_what_is_not_a_stream() -> None:
    with pytest.raises(aio.OpTypeError, match="stream argument gave str, expected an ExecutionContext"):
        aio.value(1).sync_on("stream 0")


def test_schedule_uses_the_policy_for_sync_and_await() -> None:
    ctx = aio.HostStream()
    policy = aio.SingleStream(ctx)
    scheduled = where().schedule(policy)
    assert scheduled.policy is policy
    assert scheduled.sync() is ctx

    async def main() -> aio.ExecutionContext:
        return await where().schedule(policy)

    assert asyncio.run(main()) is ctx


def test_await_returns_the_output() -> None:
    async def main() -> tuple[int, str]:
        return await aio.zip(aio.value(1), aio.value("a"))

    assert asyncio.run(main()) == (1, "a")


@pytest.mark.parametrize("spin_us", ["0", "20"])
def test_await_pending_work_resolves_through_the_callback(
    worker: aio.HostStream, gate: threading.Event, monkeypatch: pytest.MonkeyPatch, spin_us: str
) -> None:
    monkeypatch.setenv("TILE_AIO_SPIN_US", spin_us)
    log: list[str] = []

    async def main() -> tuple[Any, ...]:
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, gate.set)
        op = aio.host_call(gate.wait).then(lambda _: aio.host_call(log.append, "done"))
        result = await op.schedule(aio.SingleStream(worker))
        assert threading.current_thread() is threading.main_thread()  # resolved on the loop's thread
        return result

    assert asyncio.run(main()) == ("done",)
    assert log == ["done"]


def test_await_does_not_block_the_event_loop(worker: aio.HostStream, gate: threading.Event) -> None:
    ticks: list[int] = []

    async def ticker() -> None:
        for i in range(5):
            ticks.append(i)
            await asyncio.sleep(0)
        gate.set()

    async def main() -> None:
        op = aio.host_call(gate.wait).schedule(aio.SingleStream(worker))
        await asyncio.gather(op, ticker())

    asyncio.run(main())
    assert ticks == [0, 1, 2, 3, 4]


def test_cancelled_await_releases_inputs_only_when_the_work_completes(
    worker: aio.HostStream, gate: threading.Event
) -> None:
    res = Resource()
    ref = weakref.ref(res)
    log: list[str] = []

    def work(_: Resource) -> None:
        gate.wait()
        log.append("work done")

    op = aio.host_call(work, res)
    del res

    async def main() -> None:
        task = asyncio.ensure_future(op.schedule(aio.SingleStream(worker)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gc.collect()
        assert ref() is not None  # cancelled, but the work still runs and owns its input
        assert log == []
        gate.set()
        deadline = time.monotonic() + 5
        while ref() is not None:  # released on the loop's thread once the work is done
            assert time.monotonic() < deadline
            await asyncio.sleep(0.001)
            gc.collect()
        assert log == ["work done"]

    asyncio.run(main())


def test_inputs_are_released_even_when_the_loop_closed_before_the_work_completed(
    worker: aio.HostStream, gate: threading.Event
) -> None:
    res = Resource()
    ref = weakref.ref(res)
    op = aio.host_call(lambda r: gate.wait(), res)
    del res

    async def main() -> None:
        task = asyncio.ensure_future(op.schedule(aio.SingleStream(worker)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert ref() is not None
    gate.set()
    worker.synchronize()
    gc.collect()
    assert ref() is None


def test_an_error_in_host_work_is_raised_by_sync_and_await(worker: aio.HostStream) -> None:
    def fail() -> None:
        raise ZeroDivisionError("in host work")

    with pytest.raises(ZeroDivisionError, match="in host work"):
        aio.host_call(fail).sync()
    with pytest.raises(ZeroDivisionError, match="in host work"):
        aio.host_call(fail).sync_on(worker)

    async def main() -> None:
        with pytest.raises(ZeroDivisionError, match="in host work"):
            await aio.host_call(fail).schedule(aio.SingleStream(worker))

    asyncio.run(main())
    assert aio.value("clean").sync_on(worker) == "clean"  # the failure did not outlive its op


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are new in Python 3.11")
def test_a_failure_of_the_work_names_the_op_that_was_waited_for(worker: aio.HostStream) -> None:
    # A GPU fault surfaces at the next wait with no kernel named; the note says which op the wait was for.
    def fail() -> None:
        raise ZeroDivisionError("in host work")

    op = aio.host_call(fail)
    expected = f"reported while waiting for {op._describe()}; CUDA reports a kernel fault at the next wait"
    with pytest.raises(ZeroDivisionError) as caught:
        op.sync_on(worker)
    assert any(note.startswith(expected) for note in getattr(caught.value, "__notes__", []))

    async def main() -> None:
        op = aio.host_call(fail)
        described = op._describe()  # before the run releases the op's fields
        with pytest.raises(ZeroDivisionError) as caught:
            await op.schedule(aio.SingleStream(worker))
        assert any(f"waiting for {described}" in note for note in getattr(caught.value, "__notes__", []))

    asyncio.run(main())


def test_an_exception_in_map_is_raised_by_await_after_the_work(worker: aio.HostStream, gate: threading.Event) -> None:
    log: list[str] = []

    def boom(_: object) -> None:
        raise LookupError("map failed")

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.02, gate.set)

        def work() -> None:
            gate.wait()
            log.append("work")

        op = aio.host_call(work).map(boom)
        with pytest.raises(LookupError, match="map failed"):
            await op.schedule(aio.SingleStream(worker))
        assert log == ["work"]

    asyncio.run(main())


def test_many_concurrent_awaits_on_a_worker_pool() -> None:
    streams = [aio.HostStream(worker=True) for _ in range(3)]
    policy = aio.RoundRobin(streams)
    try:

        async def main() -> list[tuple[Any, ...]]:
            ops = [aio.host_call(time.sleep, 0.001).map(Tag(i)) for i in range(40)]
            return await asyncio.gather(*(op.schedule(policy) for op in ops))

        assert asyncio.run(main()) == [(i,) for i in range(40)]
    finally:
        for s in streams:
            s.close()


def test_threads_execute_concurrently_without_interference() -> None:
    errors: list[BaseException] = []
    results: list[int] = []

    def body(k: int) -> None:
        try:
            with aio.use_device("host"):
                for i in range(50):
                    results.append(aio.value(i).map(Scale(k)).sync())
        except BaseException as exc:  # collected and asserted in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert errors == []
    assert sorted(results) == sorted(i * k for k in range(4) for i in range(50))


class NoEvents(aio.HostStream):
    """A worker stream whose record() fails once, as an event creation can fail on a device."""

    def __init__(self) -> None:
        super().__init__(worker=True)
        self.fail_next = True

    def record(self) -> aio.Completion:
        if self.fail_next:
            self.fail_next = False
            raise MemoryError("no event available")
        return super().record()


def test_a_failed_record_still_waits_for_the_work_before_releasing(gate: threading.Event) -> None:
    ctx = NoEvents()
    res = Resource()
    ref = weakref.ref(res)
    log: list[str] = []

    def work(_: Resource) -> None:
        gate.wait()
        log.append("work")

    op = aio.host_call(work, res)
    del res
    threading.Timer(0.05, gate.set).start()

    async def main() -> None:
        with pytest.raises(MemoryError, match="no event available"):
            await op.schedule(aio.SingleStream(ctx))
        assert log == ["work"]  # the error came only after the work finished
        gc.collect()
        assert ref() is None

    try:
        asyncio.run(main())
    finally:
        gate.set()
        ctx.close()
