"""Ownership under threads: a handle's checks and its move are one atomic step, so two threads can never both take
the same handle (two launches writing one output would be a data race written in safe code), and a failed call
leaves every handle as it was.

The races are made deterministic where possible: a barrier inside the step that moves the arguments holds the
first thread there until the second arrives (without the ownership lock both arrive and both launches are made; with
it the second waits, the barrier times out, and the second then finds the handles moved).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile.frontend import MovedError, f32
from tile.frontend._partition import Partition
from tile.frontend._plan import Plan
from tile.frontend._tensor import Tensor

N = 256
_WAIT_S = 0.3  # how long the first thread waits in the move for a second one (which the lock keeps out)


def _args() -> list[Any]:
    return [tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])]


def _race(call: Callable[[], Any]) -> list[Any]:
    """Run ``call`` in two threads at once; each result is its return value or the `MovedError` it raised."""
    start = threading.Barrier(2)
    results: list[Any] = []

    def run() -> None:
        start.wait()
        try:
            results.append(call())
        except MovedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _meet_in(monkeypatch: pytest.MonkeyPatch, cls: type[Any], name: str) -> list[int]:
    """Make ``cls.name`` wait (at most _WAIT_S) until two threads are inside it; return the ids of the objects it
    was called on, in call order (a handle moved twice shows up twice)."""
    inside = threading.Barrier(2)
    real = getattr(cls, name)
    seen: list[int] = []

    def meeting(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(id(self))
        with contextlib.suppress(threading.BrokenBarrierError):  # timed out: the lock kept the other thread out
            inside.wait(timeout=_WAIT_S)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, meeting)
    return seen


def _one_launch(results: list[Any]) -> Any:
    launches = [r for r in results if not isinstance(r, MovedError)]
    moved = [r for r in results if isinstance(r, MovedError)]
    assert len(launches) == 1, f"two threads both moved the same handles into launches: {results}"
    assert len(moved) == 1
    assert "moved into the launch of add" in str(moved[0])
    return launches[0]


def test_two_threads_cannot_both_launch_with_one_output_on_the_fast_path(
    k: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    z, x, y = k.add(*_args()).sync()  # the kernel now holds a plan: the calls below take `launch_again`
    z, x, y = k.add(z, x, y).sync()
    plans = _meet_in(monkeypatch, Plan, "hand_over")
    launch = _one_launch(_race(lambda: k.add(z, x, y)))
    assert len(plans) == 1  # the second call found the handles moved before it reached the move
    out, _, _ = launch.sync()
    assert (out.unpartition().to_numpy() == 2).all()


def test_two_threads_cannot_both_launch_with_one_output_on_the_first_call(
    k: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    z, x, y = (tile.zeros(f32, [N + 128]).partition([128]), tile.ones(f32, [N + 128]), tile.ones(f32, [N + 128]))
    # A new layout: the full path checks, compiles, then moves each handle.
    moved = _meet_in(monkeypatch, Partition, "_hand_over")
    launch = _one_launch(_race(lambda: k.add(z, x, y)))
    assert moved == [id(z)], "the output partition was moved twice"
    out, _, _ = launch.sync()
    assert (out.unpartition().to_numpy() == 2).all()


def test_two_threads_cannot_both_partition_one_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tile.zeros(f32, [N])
    moved = _meet_in(monkeypatch, Tensor, "_hand_over")
    results = _race(lambda: t.partition([128]))
    assert sum(not isinstance(r, MovedError) for r in results) == 1, results
    assert moved == [id(t)]
