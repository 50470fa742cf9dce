"""The waiter pool that turns blocking completions (CUDA events) into callbacks: every wait is answered,
with the work's error, and the thread accounting stays consistent past the thread cap."""

from __future__ import annotations

import threading
import time

import pytest

from tile import aio
from tile.aio import _waiter


class Blocking(aio.Completion):
    """A completion whose wait blocks until the test releases it (like cuEventSynchronize)."""

    def __init__(self, gate: threading.Event, error: BaseException | None = None) -> None:
        self.gate = gate
        self.error = error

    def query(self) -> bool:
        return self.gate.is_set()

    def wait(self) -> None:
        assert self.gate.wait(timeout=10)
        if self.error is not None:
            raise self.error

    def add_done_callback(self, fn: aio.DoneCallback) -> None:
        _waiter.submit(self, fn)


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> _waiter._Pool:
    fresh = _waiter._Pool()
    monkeypatch.setattr(_waiter, "_pool", fresh)
    monkeypatch.setattr(_waiter, "MAX_THREADS", 3)
    return fresh


def test_every_wait_is_answered_beyond_the_thread_cap(pool: _waiter._Pool, gate: threading.Event) -> None:
    answers: list[object] = []
    lock = threading.Lock()

    def answer(error: BaseException | None) -> None:
        with lock:
            answers.append(error)

    failure = LookupError("device fault")
    for i in range(10):
        Blocking(gate, failure if i == 0 else None).add_done_callback(answer)
    time.sleep(0.05)
    assert answers == []
    assert pool.threads == 3  # capped
    gate.set()
    deadline = time.monotonic() + 10
    while len(answers) < 10:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert answers.count(None) == 9
    assert failure in answers
    time.sleep(0.05)
    with pool.mutex:
        assert pool.backlog == 0
        assert pool.idle == pool.threads  # every thread is free again, none lost


def test_idle_threads_are_reused(pool: _waiter._Pool, gate: threading.Event) -> None:
    gate.set()
    done = threading.Event()
    Blocking(gate).add_done_callback(lambda _: done.set())
    assert done.wait(timeout=5)
    time.sleep(0.05)
    again = threading.Event()
    Blocking(gate).add_done_callback(lambda _: again.set())
    assert again.wait(timeout=5)
    assert pool.threads == 1
