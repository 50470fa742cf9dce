"""Graphs on host streams (the recorded-op-list emulation): capture, replay, update, ordering, refusals."""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
from typing import Any

import pytest

from tile import aio


def add_into(dst: bytearray, src: bytearray) -> None:
    for i, v in enumerate(src):
        dst[i] = (dst[i] + v) % 256


def test_capture_records_without_running_and_replays_in_order() -> None:
    log: list[int] = []
    ctx = aio.HostStream()
    op = aio.collect(aio.host_call(log.append, i) for i in range(3))
    graph = op.graph(ctx)
    assert graph.kind == "host"
    assert log == []  # nothing runs at capture
    assert graph.launch().sync_on(ctx) == [(0,), (1,), (2,)]
    assert graph.launch().sync() == [(0,), (1,), (2,)]  # on another context of the same device
    assert log == [0, 1, 2, 0, 1, 2]


def test_map_functions_run_once_at_capture() -> None:
    calls: list[int] = []

    def double(x: int) -> int:
        calls.append(x)
        return x * 2

    graph = aio.capture(aio.value(5).map(double), on=aio.HostStream())
    assert calls == [5]
    assert graph.output == 10
    assert [graph.launch().sync() for _ in range(3)] == [10, 10, 10]
    assert calls == [5]


def test_update_copies_into_captured_buffers() -> None:
    acc = bytearray(4)
    inp = bytearray([1, 2, 3, 4])
    with aio.capture(aio.host_call(add_into, acc, inp)) as graph:
        graph.launch().sync()
        assert list(acc) == [1, 2, 3, 4]
        graph.update(aio.copy(inp, bytearray([10, 10, 10, 10]))).then(lambda _: graph.launch()).sync()
        assert list(acc) == [11, 12, 13, 14]
        out_acc, out_inp = graph.output
        assert out_acc is acc
        assert out_inp is inp


def test_a_graph_knows_the_context_it_was_recorded_on() -> None:
    """What ops saw as their context during the capture is the graph's recorder: libraries that mark the values a
    capture took with that context can tell which graph owns them."""
    seen: list[aio.ExecutionContext] = []

    class Spy(aio.DeviceOp[None]):
        def _execute(self, ctx: aio.ExecutionContext) -> None:
            seen.append(ctx)

    ctx = aio.HostStream()
    graph, other = Spy().graph(ctx), Spy().graph(ctx)
    assert len(seen) == 2
    assert graph.recorded_on(seen[0])
    assert not graph.recorded_on(seen[1])  # another capture's
    assert not graph.recorded_on(ctx)  # the context it replays on is not the recorder
    assert not graph.recorded_on(None)
    before = graph.closed
    graph.close()
    assert (before, graph.closed) == (False, True)
    other.close()


def test_launches_on_different_contexts_are_ordered(gate: threading.Event) -> None:
    log: list[str] = []
    slow = aio.HostStream(worker=True)
    fast = aio.HostStream(worker=True)

    async def main() -> None:
        graph = aio.capture(aio.host_call(lambda: log.append("replay")), on=slow)
        slow.enqueue(gate.wait)  # the first replay queues behind held work
        first = asyncio.ensure_future(graph.launch().schedule(aio.SingleStream(slow)))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(graph.launch().schedule(aio.SingleStream(fast)))
        await asyncio.sleep(0.05)
        assert log == []  # the replay on the idle stream waits for the one before it
        gate.set()
        await asyncio.gather(first, second)
        assert log == ["replay", "replay"]

    try:
        asyncio.run(main())
    finally:
        gate.set()
        slow.close()
        fast.close()


def test_replays_in_sync_await_and_graph_modes_agree() -> None:
    def pipeline(acc: bytearray) -> aio.DeviceOp[Any]:
        ops = [aio.host_call(add_into, acc, bytearray([k % 7, k % 5, 1])) for k in range(200)]
        return aio.collect(ops)

    synced = bytearray(3)
    pipeline(synced).sync()

    awaited = bytearray(3)

    async def run() -> None:
        await pipeline(awaited)

    asyncio.run(run())

    graphed = bytearray(3)
    graph = pipeline(graphed).graph()
    graph.launch().sync()
    assert synced == awaited == graphed
    assert synced != bytearray(3)


@pytest.mark.parametrize(
    ("make", "culprit", "reason"),
    [
        (lambda: aio.alloc(16), r"alloc\(16\)", "it allocates memory"),
        (lambda: aio.value(1).then(lambda _: aio.free(bytearray(2))), None, "it frees memory"),
        (lambda: aio.zip(aio.value(1), aio.with_context(lambda c: c)), "WithContext", "with_context"),
    ],
)
def test_refused_ops_make_no_graph(make: Any, culprit: str | None, reason: str) -> None:
    op = make()
    with pytest.raises(aio.CaptureError, match=reason) as info:
        op.graph(aio.HostStream())
    if culprit is not None:
        assert culprit in str(info.value) or info.match(culprit)


def test_a_static_refusal_leaves_the_op_usable() -> None:
    op = aio.zip(aio.value(1), aio.alloc(2))
    with pytest.raises(aio.CaptureError, match="cannot be captured into a graph: it allocates memory"):
        aio.capture(op, on=aio.HostStream())
    assert not op.consumed
    one, buf = op.sync()
    assert one == 1
    assert buf == bytearray(2)


def test_a_refusal_found_during_capture_aborts_it_and_runs_nothing() -> None:
    log: list[str] = []
    op = aio.host_call(log.append, "x").then(lambda _: aio.alloc(8))
    with pytest.raises(aio.CaptureError, match="allocates"):
        aio.capture(op, on=aio.HostStream())
    assert log == []
    assert op.consumed


def test_with_context_marked_capturable_is_recorded() -> None:
    log: list[str] = []

    def enqueue(ctx: aio.ExecutionContext) -> str:
        ctx.enqueue(lambda: log.append("ran"))
        return "out"

    graph = aio.with_context(enqueue, capturable=True).graph(aio.HostStream())
    assert log == []
    assert graph.launch().sync() == "out"
    assert log == ["ran"]


def test_a_graph_launch_cannot_be_captured() -> None:
    graph = aio.empty().graph(aio.HostStream())
    with pytest.raises(aio.CaptureError, match="graph launch cannot be recorded into another graph"):
        graph.launch().graph(aio.HostStream())


def test_a_shared_op_cannot_first_run_inside_a_capture() -> None:
    shared = aio.value(3).shared()
    with pytest.raises(aio.CaptureError, match="shared op"):
        shared.map(str).graph(aio.HostStream())


def test_an_already_run_shared_op_is_captured_as_its_output() -> None:
    shared = aio.value(3).shared()
    assert shared.sync() == 3
    graph = shared.map(lambda x: x + 1).graph(aio.HostStream())
    assert graph.launch().sync() == 4


def test_waiting_and_synchronizing_inside_a_capture() -> None:
    def bad(ctx: aio.ExecutionContext) -> None:
        ctx.synchronize()

    with pytest.raises(aio.CaptureError, match="synchronizing"):
        aio.with_context(bad, capturable=True).graph(aio.HostStream())
    with pytest.raises(aio.CaptureError, match="recording a completion"):
        aio.with_context(lambda ctx: ctx.record(), capturable=True).graph(aio.HostStream())
    with pytest.raises(aio.CaptureError, match="querying"):
        aio.with_context(lambda ctx: ctx.query(), capturable=True).graph(aio.HostStream())


def test_a_closed_graph_refuses_launches_and_releases_its_op() -> None:
    graph = aio.value(bytearray(1)).graph(aio.HostStream())
    graph.launch().sync()
    graph.close()
    graph.close()
    with pytest.raises(aio.ClosedError, match="this graph is closed; capture the op again"):
        graph.launch().sync()


def test_capture_needs_a_host_or_cuda_context() -> None:
    class Foreign(aio.HostStream):
        pass

    class NotAStream(aio.ExecutionContext):
        device = aio.HOST

        def enqueue(self, fn: Any) -> None: ...
        def record(self) -> aio.Completion:
            raise NotImplementedError

        def wait(self, completion: aio.Completion) -> None: ...
        def synchronize(self) -> None: ...
        def query(self) -> bool:
            return True

    assert aio.empty().graph(Foreign()).kind == "host"
    with pytest.raises(aio.ContextMismatchError, match="graph capture needs a host stream or a CUDA stream"):
        aio.empty().graph(NotAStream())


def test_a_nested_capture_is_refused() -> None:
    op = aio.value(1).map(lambda _: aio.value(2).graph(aio.HostStream()))
    with pytest.raises(aio.ExecutionLockError, match=r"\.graph\(\)"):
        op.sync()


def test_an_update_may_launch_its_own_graph() -> None:
    log: list[str] = []
    graph = aio.host_call(log.append, "replay").graph(aio.HostStream())
    assert graph.update(graph.launch()).sync() == ("replay",)
    assert log == ["replay"]


def test_a_dropped_graph_releases_its_op_once_its_last_launch_is_done(
    worker: aio.HostStream, gate: threading.Event
) -> None:
    """The finalizer of a graph nobody closed releases the captured op as close() would, after the last launch's
    context is done (a replay may still run), never while it may run."""
    log: list[str] = []

    class Held(aio.DeviceOp[None]):
        def _execute(self, ctx: aio.ExecutionContext) -> None:
            ctx.enqueue(lambda: log.append("replay"))

        def _drop(self) -> None:
            log.append("released")

    graph = Held().graph(worker)
    worker.enqueue(gate.wait)
    graph._ordered(worker, functools.partial(graph._replay_on, worker))  # a replay whose run is gone
    del graph
    gc.collect()
    assert log == []  # the replay is still queued behind the gate
    gate.set()
    worker.record().wait()  # the replay, then the release's completion callback
    assert log == ["replay", "released"]
