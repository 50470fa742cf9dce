"""Host streams: in-order work (inline and worker), completions, cross-stream waits, error containment."""

from __future__ import annotations

import functools
import pickle
import sys
import threading
from typing import Any

import pytest

from tile import aio


def fail() -> None:
    raise IndexError("host work failed")


@pytest.fixture(params=[False, True], ids=["inline", "worker"])
def stream(request: pytest.FixtureRequest) -> Any:
    s = aio.HostStream(worker=request.param)
    yield s
    s.close()


def test_work_runs_in_enqueue_order(stream: aio.HostStream) -> None:
    log: list[int] = []
    for i in range(100):
        stream.enqueue(functools.partial(log.append, i))
    stream.synchronize()
    assert log == list(range(100))
    assert stream.query()
    assert stream.device is aio.HOST


def test_a_failure_skips_later_work_up_to_the_next_completion(stream: aio.HostStream) -> None:
    log: list[str] = []

    def fail() -> None:
        raise OSError("disk on fire")

    stream.enqueue(fail)
    stream.enqueue(lambda: log.append("skipped"))
    done = stream.record()
    stream.enqueue(lambda: log.append("runs"))
    with pytest.raises(OSError, match="disk on fire"):
        done.wait()
    with pytest.raises(OSError, match="disk on fire"):
        done.query()  # a completion keeps its error
    stream.synchronize()  # the stream itself is clean again
    assert log == ["runs"]


def test_query_reports_and_clears_a_failure_once_idle() -> None:
    s = aio.HostStream()
    s.enqueue(fail)
    with pytest.raises(IndexError, match="host work failed"):  # the work's own exception, unchanged
        s.query()
    assert s.query()


def test_worker_work_is_pending_until_reached(worker: aio.HostStream, gate: threading.Event) -> None:
    worker.enqueue(gate.wait)
    done = worker.record()
    assert not done.query()
    assert not worker.query()
    gate.set()
    done.wait()
    assert done.query()
    assert worker.query()
    assert worker.is_worker


def test_wait_orders_one_stream_after_another(worker: aio.HostStream, gate: threading.Event) -> None:
    log: list[str] = []
    other = aio.HostStream(worker=True)
    try:
        worker.enqueue(gate.wait)
        worker.enqueue(lambda: log.append("first"))
        other.wait(worker.record())
        other.enqueue(lambda: log.append("second"))
        assert not other.record().query()
        gate.set()
        other.synchronize()
        assert log == ["first", "second"]
    finally:
        other.close()


def test_a_failure_travels_through_a_wait(worker: aio.HostStream) -> None:
    other = aio.HostStream()
    log: list[str] = []
    worker.enqueue(fail)
    other.wait(worker.record())
    other.enqueue(lambda: log.append("dependent work"))
    with pytest.raises(IndexError, match="host work failed"):  # the work's own exception, unchanged
        other.synchronize()
    assert log == []  # work that depended on the failed work did not run


def test_done_callbacks_run_once_with_the_error(worker: aio.HostStream, gate: threading.Event) -> None:
    seen: list[object] = []
    worker.enqueue(gate.wait)
    pending = worker.record()
    pending.add_done_callback(seen.append)
    assert seen == []
    gate.set()
    pending.wait()
    assert seen == [None]
    pending.add_done_callback(seen.append)  # already done: called at once
    assert seen == [None, None]

    worker.enqueue(fail)
    failed = worker.record()
    errors: list[object] = []
    failed.add_done_callback(errors.append)
    worker.synchronize()
    assert len(errors) == 1
    assert isinstance(errors[0], IndexError)


def test_a_raising_callback_goes_to_the_unraisable_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    done = aio.HostStream().record()

    def bad(_: object) -> None:
        raise RuntimeError("callback bug")

    done.add_done_callback(bad)
    assert len(reported) == 1
    assert isinstance(reported[0].exc_value, RuntimeError)
    assert "done-callback" in reported[0].err_msg


def test_close_finishes_the_work_and_refuses_more() -> None:
    log: list[int] = []
    s = aio.HostStream(worker=True, name="closing")
    s.enqueue(lambda: log.append(1))
    s.close()
    s.close()
    assert log == [1]
    with pytest.raises(aio.ClosedError, match=r"HostStream\('closing', worker\) is closed; make a new HostStream"):
        s.enqueue(lambda: None)


def test_host_work_runs_with_the_execution_lock() -> None:
    seen: list[bool] = []
    s = aio.HostStream()
    from tile.aio import _lock

    s.enqueue(lambda: seen.append(_lock.held()))
    assert seen == [True]
    assert not _lock.held()


def test_the_host_device_is_a_picklable_singleton() -> None:
    assert aio.HostDevice() is aio.HOST
    assert pickle.loads(pickle.dumps(aio.HOST)) is aio.HOST
    assert repr(aio.HOST) == "HOST"


def test_work_that_exits_does_not_kill_the_worker(worker: aio.HostStream) -> None:
    def leave() -> None:
        raise SystemExit(3)

    worker.enqueue(leave)
    with pytest.raises(SystemExit) as info:
        worker.synchronize()
    assert info.value.code == 3  # the exit code the work gave, unchanged
    log: list[int] = []
    worker.enqueue(functools.partial(log.append, 1))
    worker.synchronize()
    assert log == [1]


def test_a_completion_recorded_while_close_finishes_the_work_is_done_after_it() -> None:
    gate = threading.Event()
    s = aio.HostStream(worker=True, name="closing")
    s.enqueue(gate.wait)
    closer = threading.Thread(target=s.close)
    closer.start()
    closer.join(0.1)
    recorded, observed = s.record(), s._observe()  # a ClosedError here let a waiter release inputs early
    assert not recorded.query()
    assert not observed.query()
    gate.set()
    closer.join()
    recorded.wait()
    assert s.record().query()  # and once closed, at once
    with pytest.raises(aio.ClosedError, match=r"HostStream\('closing', worker\) is closed; make a new HostStream"):
        s.enqueue(lambda: None)
