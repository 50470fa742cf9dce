"""Ownership under threads: a handle's checks and its move are one atomic step, so two threads can never both take
the same handle (two launches writing one output would be a data race written in safe code), and a failed call
leaves every handle as it was.

The races are deterministic: the root conftest's ``race`` fixture puts a meeting point inside the step that moves
the arguments, so without the ownership lock both threads arrive and both launches are made; with it the second
thread waits, the meeting times out, and the second then finds the handles moved.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import tile.frontend as tile
from tile.frontend import MovedError, _accel, f32
from tile.frontend._partition import Partition
from tile.frontend._plan import Plan
from tile.frontend._tensor import Tensor

N = 256


def _args() -> list[Any]:
    return [tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])]


def _one_launch(results: list[Any]) -> Any:
    launches = [r for r in results if not isinstance(r, MovedError)]
    moved = [r for r in results if isinstance(r, MovedError)]
    assert len(launches) == 1, f"two threads both moved the same handles into launches: {results}"
    assert len(moved) == 1
    assert "moved into the launch of add" in str(moved[0])
    return launches[0]


def test_two_threads_cannot_both_launch_with_one_output_on_the_fast_path(k: ModuleType, race: Any) -> None:
    z, x, y = k.add(*_args()).sync()  # the kernel now holds a plan: the calls below take `launch_again`
    z, x, y = k.add(z, x, y).sync()
    if _accel.active() == "compiled":  # the check and the move are one C call: both threads reach it, in turn
        latest = k.add._last
        plans = race.meet_in(_accel, "call")
        launch = _one_launch(race.run(lambda: k.add(z, x, y)))
        # The second found the handles moved (not handled), tried the kernel's other recent layouts (no match), and
        # the keyed path raised.
        assert plans[:2] == [latest, latest]
        assert latest not in plans[2:]
    else:
        plans = race.meet_in(Plan, "hand_over")
        launch = _one_launch(race.run(lambda: k.add(z, x, y)))
        assert len(plans) == 1  # the second call found the handles moved before it reached the move
    out, _, _ = launch.sync()
    assert (out.unpartition().to_numpy() == 2).all()


def test_two_threads_cannot_both_launch_with_one_output_on_the_first_call(k: ModuleType, race: Any) -> None:
    z, x, y = (tile.zeros(f32, [N + 128]).partition([128]), tile.ones(f32, [N + 128]), tile.ones(f32, [N + 128]))
    # A new layout: the full path checks, compiles, then moves each handle.
    moved = race.meet_in(Partition, "_hand_over")
    launch = _one_launch(race.run(lambda: k.add(z, x, y)))
    assert len(moved) == 1, "the output partition was moved twice"
    assert moved[0] is z
    out, _, _ = launch.sync()
    assert (out.unpartition().to_numpy() == 2).all()


def test_two_threads_cannot_both_partition_one_tensor(race: Any) -> None:
    t = tile.zeros(f32, [N])
    moved = race.meet_in(Tensor, "_hand_over")
    results = race.run(lambda: t.partition([128]))
    assert sum(not isinstance(r, MovedError) for r in results) == 1, results
    assert len(moved) == 1
    assert moved[0] is t


def test_a_claim_waits_for_a_thread_that_holds_the_claiming_lock(k: ModuleType, path: str) -> None:
    """Taking an op (`DeviceOp._claim`, the compiled ``claim``) waits while another thread is inside its own test and
    take: the compiled claim skips the lock's round trip only when no thread holds it, never when one does."""
    import threading
    import time

    from tile.aio import _op

    order: list[str] = []
    inside, done = threading.Event(), threading.Event()

    def holder() -> None:
        with _op._CLAIMING:  # another thread mid-claim: it tested the op's state and has not taken it yet
            inside.set()
            time.sleep(0.2)
            order.append("holder released")
        done.set()

    op = k.add(*_args())
    thread = threading.Thread(target=holder)
    thread.start()
    assert inside.wait(5)
    chained = op.then(lambda out: k.add(*out))  # claims `op`: must wait for the holder
    order.append("claimed")
    thread.join()
    assert done.is_set()
    assert order == ["holder released", "claimed"]
    z, _, _ = chained.sync()
    assert (z.unpartition().to_numpy() == 2).all()  # z = x + y, twice
