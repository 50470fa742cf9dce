"""Scheduling policies, the default device and its resolution, and the knobs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tile import aio
from tile.aio import _policy


def test_round_robin_rotates_over_its_pool() -> None:
    pool = [aio.HostStream() for _ in range(3)]
    policy = aio.RoundRobin(pool)
    assert [policy.next_context() for _ in range(7)] == [*pool, *pool, pool[0]]
    assert policy.device is aio.HOST
    assert "3 contexts" in repr(policy)


def test_round_robin_needs_contexts_of_one_device() -> None:
    with pytest.raises(aio.OpTypeError, match="at least one execution context"):
        aio.RoundRobin([])

    class Elsewhere(aio.HostStream):
        @property
        def device(self) -> object:
            return "elsewhere"

    with pytest.raises(aio.OpTypeError, match="contexts of one device"):
        aio.RoundRobin([aio.HostStream(), Elsewhere()])


def test_single_stream_always_gives_its_context() -> None:
    ctx = aio.HostStream()
    policy = aio.SingleStream(ctx)
    assert {id(policy.next_context()) for _ in range(5)} == {id(ctx)}
    assert policy.device is aio.HOST


def test_stream_pool_size_defaults_to_the_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(aio.stream_pool("host").contexts) == 4
    monkeypatch.setenv("TILE_AIO_POOL_SIZE", "2")
    assert len(aio.stream_pool("host").contexts) == 2
    assert len(aio.stream_pool("host", size=6).contexts) == 6
    with pytest.raises(aio.OpTypeError, match="size >= 1"):
        aio.stream_pool("host", size=0)


def test_a_bad_pool_size_knob_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AIO_POOL_SIZE", "0")
    with pytest.raises(aio.KnobError, match="TILE_AIO_POOL_SIZE='0' is invalid: expected an integer >= 1"):
        aio.stream_pool("host")


def test_a_bad_spin_knob_is_reported_after_the_work_completes(
    monkeypatch: pytest.MonkeyPatch, worker: aio.HostStream, gate: threading.Event
) -> None:
    monkeypatch.setenv("TILE_AIO_SPIN_US", "soon")
    log: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.02, gate.set)
        op = aio.host_call(gate.wait).then(lambda _: aio.host_call(log.append, "work"))
        with pytest.raises(aio.KnobError, match="TILE_AIO_SPIN_US='soon' is invalid"):
            await op.schedule(aio.SingleStream(worker))
        assert log == ["work"]

    asyncio.run(main())


def test_the_default_policy_is_made_once_per_device() -> None:
    assert aio.default_policy() is aio.default_policy("host")
    assert aio.default_policy().device is aio.HOST


def test_set_default_policy_replaces_and_returns_the_previous() -> None:
    ctx = aio.HostStream()
    mine = aio.SingleStream(ctx)
    previous = aio.set_default_policy(mine)
    try:
        assert aio.with_context(lambda c: c).sync() is ctx
    finally:
        assert previous is not None
        aio.set_default_policy(previous)
    assert aio.default_policy() is previous


def test_device_resolution() -> None:
    assert aio.device("host") is aio.HOST
    assert aio.device(aio.HOST) is aio.HOST
    assert aio.device() is aio.HOST  # the fixture made it the default
    for bad in ["gpu", "cuda:x", True, 1.5]:
        with pytest.raises(aio.OpTypeError, match=r"tile\.aio\.device"):
            aio.device(bad)


def test_the_environment_chooses_the_default_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AIO_DEVICE", "host")
    token_free = asyncio.run(_default_in_fresh_context())
    assert token_free is aio.HOST


async def _default_in_fresh_context() -> object:
    import contextvars

    return contextvars.Context().run(aio.default_device)


def test_use_device_is_scoped_and_per_task() -> None:
    seen: dict[str, object] = {}

    async def task(name: str) -> None:
        aio.set_default_device("host")
        await asyncio.sleep(0)
        seen[name] = aio.default_device()

    async def main() -> None:
        await asyncio.gather(task("a"), task("b"))

    asyncio.run(main())
    assert seen == {"a": aio.HOST, "b": aio.HOST}
    with aio.use_device("host") as dev:
        assert dev is aio.HOST


def test_a_process_wide_default_reaches_new_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AIO_DEVICE", "cuda:0")
    seen: list[object] = []
    aio.set_default_device("host", process=True)
    try:
        thread = threading.Thread(target=lambda: seen.append(aio.with_context(lambda c: c.device).sync()))
        thread.start()
        thread.join(timeout=5)
    finally:
        aio.set_default_device(None, process=True)
    assert seen == [aio.HOST]
    fresh: list[object] = []
    thread = threading.Thread(target=lambda: fresh.append(_policy._process_default[:]))
    thread.start()
    thread.join(timeout=5)
    assert fresh == [[]]


class _Homed(aio.DeviceOp[str]):
    """An op bound to one context (as a launch is bound to its data's device): it records where it ran."""

    __slots__ = ("_home_policy", "ran_on")

    def __init__(self, home: aio.HostStream) -> None:
        super().__init__()
        self._home_policy = _policy.SingleStream(home)
        self.ran_on: list[object] = []

    def _home(self) -> _policy.SchedulingPolicy:
        return self._home_policy

    def _execute(self, ctx: aio.ExecutionContext) -> str:
        self.ran_on.append(ctx)
        return "out"


@pytest.mark.parametrize("how", ["sync", "await", "graph"])
def test_a_chain_runs_where_its_first_op_would(how: str) -> None:
    """A chain on a multi-GPU rank ran on the default device's stream instead of its data's (seen: an all-gather on
    GPU 1 refused the GPU 0 stream ``.sync()`` picked for the chain). A chain asks its first op where to run."""
    home = aio.HostStream()
    try:
        first = _Homed(home)
        chain = first.then(lambda out: aio.value(out + "!")).map(str.upper)
        if how == "sync":
            assert chain.sync() == "OUT!"
        elif how == "await":
            assert asyncio.run(_awaited(chain)) == "OUT!"
        else:
            graph = chain.graph()
            assert graph._context is home  # captured on the first op's context, its recorder stands in
            graph.close()
            return
        assert first.ran_on == [home]
    finally:
        home.close()


async def _awaited(op: aio.DeviceOp[str]) -> str:
    return await op
