"""Each combinator: what it outputs, the order its work runs in, and the context it runs on."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tile import aio


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def record(log: list[Any], item: Any) -> aio.DeviceOp[tuple[Any, ...]]:
    """An op whose host work appends ``item`` to ``log``."""
    return aio.host_call(log.append, item)


def test_value_and_empty() -> None:
    assert aio.value([1, 2]).sync() == [1, 2]
    assert aio.empty().sync() is None


def test_then_runs_in_order_on_one_context() -> None:
    log: list[Any] = []
    seen: list[aio.ExecutionContext] = []

    def note_ctx(tag: str) -> aio.DeviceOp[str]:
        def at_execution(ctx: aio.ExecutionContext) -> str:
            seen.append(ctx)
            log.append(tag)
            return tag

        return aio.with_context(at_execution, capturable=True)

    op = record(log, 1).then(lambda _: note_ctx("a")).then(lambda tag: record(log, tag + "b"))
    assert op.sync() == ("ab",)
    assert log == [1, "a", "ab"]
    assert len(seen) == 1


def test_then_function_receives_the_output() -> None:
    assert aio.value(20).then(lambda x: aio.value(x + 1)).sync() == 21


def test_then_function_must_return_an_op() -> None:
    op: aio.DeviceOp[Any] = aio.value(1).then(lambda x: x + 1)  # type: ignore[arg-type, return-value]  # misuse
    with pytest.raises(aio.OpTypeError, match=r"\.then\(\).*gave int, expected a DeviceOp"):
        op.sync()


def test_map_transforms_on_the_host() -> None:
    assert aio.value(3).map(lambda x: x * 7).map(str).sync() == "21"


def test_zip_runs_in_argument_order_and_outputs_a_tuple() -> None:
    log: list[Any] = []
    op = aio.zip(record(log, "x"), aio.value(2), record(log, "y"))
    assert op.sync() == (("x",), 2, ("y",))
    assert log == ["x", "y"]


def test_zip_rejects_non_ops() -> None:
    with pytest.raises(aio.OpTypeError, match="argument 1 of zip"):
        aio.zip(aio.value(1), 2)  # type: ignore[call-overload]  # the misuse under test


def test_collect_outputs_a_list_in_order() -> None:
    log: list[Any] = []
    out = aio.collect(record(log, i) for i in range(5)).sync()
    assert out == [(i,) for i in range(5)]
    assert log == list(range(5))


def test_unzip_splits_a_tuple_and_runs_the_work_once() -> None:
    calls: list[int] = []
    pair = aio.host_call(lambda: calls.append(1)).map(lambda _: ("left", "right"))
    left, right = pair.unzip(2)
    assert aio.zip(right, left).sync() == ("right", "left")
    assert calls == [1]


def test_unzip_checks_the_arity_when_it_runs() -> None:
    a, *_ = aio.value((1, 2)).unzip(3)
    with pytest.raises(aio.OpTypeError, match=r"unzip\(3\).*gave a 2-tuple"):
        a.sync()


@pytest.mark.parametrize("n", [0, -3, 2.5])
def test_unzip_refuses_a_length_that_is_no_int_of_at_least_one_and_keeps_the_op(n: Any) -> None:
    op = aio.value((1, 2))
    with pytest.raises(aio.OpTypeError, match=r"\.unzip\(n\) gave .*expected an int n >= 1"):
        op.unzip(n)
    assert op.sync() == (1, 2)


def test_zip_and_collect_claim_all_their_ops_or_none() -> None:
    good, used = aio.value(1), aio.value(2)
    used.sync()
    with pytest.raises(aio.OpConsumedError, match=r"executed by \.sync"):
        aio.zip(good, used)
    with pytest.raises(aio.OpConsumedError, match=r"moved into collect"):
        aio.collect([good, good])
    with pytest.raises(aio.OpTypeError, match=r"argument 1 of zip"):
        aio.zip(good, 3)  # type: ignore[call-overload]
    assert aio.zip(good).sync() == (1,)


def test_shared_runs_once_and_gives_every_use_the_same_output() -> None:
    calls: list[int] = []
    shared = aio.host_call(lambda: calls.append(1)).map(lambda _: object()).shared()
    first = shared.sync()
    second = shared.sync()
    both = aio.zip(shared.map(id), shared.map(id)).sync()
    assert first is second
    assert both == (id(first), id(first))
    assert calls == [1]


def test_shared_on_another_context_waits_for_the_first_run(worker: aio.HostStream, gate: threading.Event) -> None:
    log: list[str] = []
    results: dict[str, object] = {}
    shared = aio.host_call(gate.wait).then(lambda _: record(log, "first")).shared()
    first = shared.map(lambda _: "first done")
    follower = shared.then(lambda _: record(log, "second"))
    other = aio.HostStream(worker=True)
    threads = [
        threading.Thread(target=lambda: results.update(first=first.sync_on(worker))),
        threading.Thread(target=lambda: results.update(second=follower.sync_on(other))),
    ]
    try:
        threads[0].start()
        wait_until(lambda: not worker.query())  # the first run's work is enqueued (and held by the gate)
        threads[1].start()
        threads[1].join(timeout=0.2)
        assert log == []  # the follower's context is held until the first run's work is done
        assert threads[1].is_alive()
        gate.set()
        for t in threads:
            t.join(timeout=5)
        assert log == ["first", "second"]
        assert results == {"first": "first done", "second": ("second",)}
    finally:
        other.close()


def test_a_failed_shared_op_reports_its_error_at_every_use() -> None:
    def boom(_: object) -> int:
        raise KeyError("boom")

    shared = aio.value(1).map(boom).shared()
    for _ in range(2):
        with pytest.raises(KeyError, match="boom"):
            shared.sync()


def test_with_context_gets_the_executing_context() -> None:
    ctx = aio.HostStream()
    assert aio.with_context(lambda c: c).sync_on(ctx) is ctx


def test_host_call_hands_its_arguments_back_after_running() -> None:
    buf = bytearray(4)

    def fill(b: bytearray, value: int) -> None:
        b[:] = bytes([value]) * len(b)

    out, value = aio.host_call(fill, buf, 7).sync()
    assert out is buf
    assert value == 7
    assert bytes(buf) == b"\x07" * 4


def test_host_copy_alloc_free() -> None:
    src = bytearray(b"abcd")
    dst = aio.alloc(4).sync()
    assert aio.copy(dst, src).sync() is dst
    assert bytes(dst) == b"abcd"
    assert aio.free(dst).sync() is None


@pytest.mark.parametrize(
    ("dst", "src", "message"),
    [
        (bytearray(3), bytearray(4), "copy of 4 bytes into a 3-byte destination"),
        (bytes(4), bytearray(4), "destination is read-only"),
        (bytearray(4), 5, "source \\(int\\) is not a host buffer"),
    ],
)
def test_host_copy_refuses_bad_buffers(dst: Any, src: Any, message: str) -> None:
    with pytest.raises(aio.CopyError, match=message):
        aio.copy(dst, src).sync()


def test_launch_needs_a_cuda_context() -> None:
    with pytest.raises(aio.ContextMismatchError, match=r"launch of kernel 'k'.*needs a CUDA stream.*HostStream"):
        aio.launch("k", 1, ()).sync()


def test_deep_pipelines_do_not_recurse() -> None:
    depth = 5 * sys.getrecursionlimit()

    def deep() -> aio.DeviceOp[int]:
        op: aio.DeviceOp[int] = aio.value(0)
        for i in range(depth):
            op = op.then(lambda x: aio.value(x + 1)) if i % 2 else op.map(lambda x: x + 1)
        return op

    assert deep().sync() == depth
    assert deep().graph(aio.HostStream()).launch().sync() == depth
    graph = aio.collect([aio.host_call(int) for _ in range(depth)]).graph(aio.HostStream())
    assert len(graph.launch().sync()) == depth
