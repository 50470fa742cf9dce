"""The two launch paths (`_accel`): the compiled hot path (``_fastlaunch``) and the pure-Python one accept the same
calls, move the same handles and refuse every misuse with the same typed error and message; the compiled path
handles only the common case and leaves everything else, untouched, to the pure path.

The whole suite also runs on the pure path (``TILE_PURE_PYTHON=1``, ``nox -s tests-pure``); these tests compare the
two in one process. ``TILE_REQUIRE_EXTENSION=1`` (set by ``scripts/dev.sh test``) makes a missing extension fail.
"""

from __future__ import annotations

import gc
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile.aio import ExecutionLockError, HostStream, OpConsumedError
from tile.frontend import _accel, f32
from tile.frontend._errors import TileError

N = 512
BUILT = _accel.compiled() is not None


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every compiled kernel call (`_accel.call`): True when it handled the call (checked and moved), False when it left
    it."""
    seen: list[bool] = []
    # A foreign borrow an earlier test left to the collector (a failed launch's, kept by its traceback) would make the
    # compiled path leave every call to the pure one (its overlap check scans only when no foreign memory is borrowed).
    gc.collect()
    real = _accel.call
    if real is None:
        return seen

    def spy(*args: Any) -> Any:
        done = real(*args)
        seen.append(done is not None)
        return done

    monkeypatch.setattr(_accel, "call", spy)
    return seen


def _fresh() -> tuple[Any, Any, Any]:
    return tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.full(f32, [N], 2.0)


def _warm(k: ModuleType) -> tuple[Any, Any, Any]:
    z, x, y = k.add(*_fresh()).sync()
    z, x, y = k.add(z, x, y).sync()  # the kernel's latest plan now takes the calls below
    return z, x, y


def test_the_extension_is_built_where_ci_requires_it() -> None:
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))  # no stable ABI there: never built
    forced_pure = os.environ.get(_accel.PURE_ENV, "") not in ("", "0")
    if os.environ.get("TILE_REQUIRE_EXTENSION") == "1" and not forced_pure and not free_threaded:
        assert _accel.active() == "compiled", _accel.reason()
    assert _accel.active() in ("compiled", "pure")
    assert _accel.reason().startswith("compiled" if _accel.active() == "compiled" else "pure Python")


def test_a_stale_extension_is_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension built from older sources (an editable install after a pull) lacks functions this Python side
    calls: it is refused with the rebuild command, not loaded to fail with an AttributeError at the first launch."""
    stale = ModuleType("tile.frontend._fastlaunch")
    stale.__file__ = "/old/_fastlaunch.abi3.so"
    stale.call = stale.bind = lambda *a: None  # type: ignore[attr-defined]  # the functions an older build had
    monkeypatch.setitem(sys.modules, "tile.frontend._fastlaunch", stale)
    monkeypatch.setattr(tile, "_fastlaunch", stale, raising=False)  # `from tile.frontend import` reads it first
    monkeypatch.delenv(_accel.PURE_ENV, raising=False)
    module, why = _accel._load()
    assert module is None
    assert "stale" in why
    assert "bind_run" in why
    assert "hatch_build.py" in why


def test_use_refuses_an_unknown_path() -> None:
    with pytest.raises(ValueError, match="unknown launch path 'fast'"):
        _accel.use("fast")
    assert _accel.use(_accel.active()) == _accel.active()


@pytest.mark.skipif(BUILT, reason="the extension is built here")
def test_use_compiled_without_the_extension_says_why() -> None:
    with pytest.raises(ValueError, match="not available"):
        _accel.use("compiled")


@pytest.fixture
def add(k: ModuleType) -> Any:
    """``k.add`` as a kernel object of its own: the session's ``k.add`` holds the latest and recent plans of other
    tests, which the compiled call is offered (and leaves) first; this one's first call has no plan, so every later
    call is the compiled path's and ``all(moves)`` holds whatever ran before."""
    return tile.entry(k.add.fn)


def test_a_repeated_launch_takes_the_active_path(add: Any, path: str, moves: list[bool]) -> None:
    z, x, y = add(*_fresh()).sync()
    z, x, y = add(z, x, y).sync()
    warm = len(moves)
    for _ in range(3):
        z, x, y = add(z, x, y).sync()
    assert (z.unpartition().to_numpy() == 3).all()
    assert moves[warm:] == ([True] * 3 if path == "compiled" else [])
    assert all(moves)


def test_a_then_chain_takes_in_flight_handles_on_both_paths(add: Any, path: str, moves: list[bool]) -> None:
    z, x, y = add(*_fresh()).sync()
    z, x, y = add(z, x, y).sync()
    warm = len(moves)
    op = add(z, x, y)
    for _ in range(4):
        op = op.then(lambda out: add(*out))
    z, x, y = op.sync()
    assert (z.unpartition().to_numpy() == 3).all()
    assert moves[warm:] == ([True] * 5 if path == "compiled" else [])
    assert all(moves)


def _error(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(TileError) as caught:
        call()
    return type(caught.value), str(caught.value)


def _misuses(k: ModuleType) -> dict[str, tuple[type[BaseException], str]]:
    """Each misuse of a warm plan, made the same way (same lines) whichever path is active."""
    errors = {}
    z, x, y = _warm(k)
    k.add(z, x, y)  # moved, not run
    errors["moved"] = _error(lambda: k.add(z, x, y))
    z, x, y = _warm(k)
    x.free()
    errors["freed"] = _error(lambda: k.add(z, x, y))
    z, x, y = _warm(k)
    inner = z.unpartition()
    errors["moved into a partition"] = _error(lambda: k.add(inner.partition([128]), inner, y))
    z, x, y = _warm(k)
    errors["output as an input"] = _error(lambda: k.add(z, z, y))
    z, x, _ = _warm(k)
    z, x, _ = k.scale_int(z, x, 3).sync()
    errors["scalar out of range"] = _error(lambda: k.scale_int(z, x, 2**40))
    z, x, y = _warm(k)
    op = k.add(z, x, y)
    errors["in flight"] = _error(lambda: op.then(lambda out: out[1].to_numpy()).sync())
    z, x, y = _warm(k)
    op = k.add(z, x, y)
    z, x, y = op.sync()
    errors["synced twice"] = _error(op.sync)  # names the line of the first .sync() (`_fastlaunch.sync`)
    errors["synced on twice"] = _error(lambda: op.sync_on(HostStream()))
    op = k.add(z, x, y)
    errors["sync inside .then"] = _error(lambda: k.add(*_fresh()).then(lambda out: op.sync()).sync())
    z, x, y = op.sync()
    errors["foreign context"] = _error(lambda: k.add(z, x, y).sync_on(_Foreign()))
    assert x._storage.pending == 0  # the refused run handed its arguments back
    z, x, y = _warm(k)
    inner = k.add(z, x, y)
    twice = k.add(*_fresh()).then(lambda out: inner).then(lambda out: inner)  # `_fastlaunch.claim_run` refuses it
    errors["returned by .then twice"] = _error(twice.sync)
    assert x._storage.pending == 0  # released once, by the link that took it
    z, x, y = _warm(k)
    errors["not an op from .then"] = _error(lambda: k.add(z, x, y).then(_not_an_op).sync())  # `Then._take` refuses it
    assert x._storage.pending == 0  # the chain's release (`_fastlaunch.release_links`) handed the launch back
    z, x, y = _warm(k)
    op = k.add(z, x, y)
    op.then(_not_an_op)  # moved (`_fastlaunch.then`), the link dropped unrun
    errors["moved into .then twice"] = _error(lambda: op.then(_not_an_op))
    z, x, y = _warm(k)
    errors["not a stream"] = _error(lambda: k.add(z, x, y).sync_on("stream"))
    return errors


def _not_an_op(out: object) -> int:
    """A ``.then()`` function returning no op (one function object: the message's repr is the same on both paths)."""
    return 42


class _Foreign(HostStream):
    """A context tile.aio did not make (a subclass of a builtin one): a launch refuses to run on it."""


def test_every_misuse_raises_the_same_error_on_both_paths(k: ModuleType) -> None:
    if not BUILT:
        pytest.skip(_accel.reason())
    found = {}
    for which in ("pure", "compiled"):
        previous = _accel.use(which)
        try:
            found[which] = _misuses(k)
        finally:
            _accel.use(previous)
    assert found["pure"] == found["compiled"]
    kinds = {name: error.__name__ for name, (error, _) in found["pure"].items()}
    assert kinds == {
        "moved": "MovedError",
        "freed": "FreedError",
        "moved into a partition": "MovedError",
        "output as an input": "ArgumentError",
        "scalar out of range": "ArgumentError",
        "in flight": "InFlightError",
        "synced twice": "OpConsumedError",
        "synced on twice": "OpConsumedError",
        "sync inside .then": "ExecutionLockError",
        "foreign context": "BackendError",
        "not a stream": "OpTypeError",
        "not an op from .then": "OpTypeError",
        "moved into .then twice": "OpConsumedError",
        "returned by .then twice": "OpConsumedError",
    }
    assert f"executed by .sync() at {__file__}:" in found["pure"]["synced twice"][1]
    assert f"returned by the .then() function at {__file__}:" in found["pure"]["returned by .then twice"][1]
    assert f"moved into .then() at {__file__}:" in found["pure"]["moved into .then twice"][1]


@pytest.mark.skipif(not BUILT, reason=_accel.reason())
def test_a_call_the_compiled_path_leaves_changes_nothing(k: ModuleType) -> None:
    fast = _accel.compiled()
    assert fast is not None
    z, x, y = _warm(k)
    plan, fate = k.add._last, ("launch", "moved into the launch of add at here")

    def admit(*args: Any) -> Any:
        return fast.admit_move(plan, args, {}, None, k.add.unchecked, k.add._check_scalar, fate)

    x.free()
    assert admit(z, x, y) is None  # a freed input
    assert z._fate is None
    assert y._fate is None
    x = tile.ones(f32, [N])
    assert admit(z, y, tile.ones(f32, [N]).partition([128])) is None  # another layout
    assert admit(z, x, y, 1) is None  # another argument count
    assert z._fate is None
    assert x._fate is None
    assert y._fate is None


@pytest.mark.skipif(not BUILT, reason=_accel.reason())
def test_an_output_sharing_its_storage_takes_the_pure_path_and_launches(k: ModuleType, moves: list[bool]) -> None:
    _warm(k)
    warm = len(moves)
    whole = tile.zeros(f32, [2 * N])
    low, high = whole[:N], whole[N:]  # disjoint views: the output's storage holds another live handle
    del whole
    z, _x, _y = k.add(low.partition([128]), tile.ones(f32, [N]), tile.full(f32, [N], 2.0)).sync()
    # The compiled path left it (it does not search the registry), for the latest plan and the kernel's other recent
    # ones alike; the pure path found no overlap.
    assert moves[warm:]
    assert not any(moves[warm:])
    assert (z.unpartition().to_numpy() == 3).all()
    assert (high.to_numpy() == 0).all()


@pytest.mark.skipif(not BUILT, reason=_accel.reason())
def test_the_compiled_call_turns_another_layout_away_and_takes_its_own(k: ModuleType) -> None:
    """``_accel.call`` of a plan with another layout's arguments (a kernel trying its recent plans) returns None before
    anything changes, and with its own layout's arguments makes the launch (the layout pre-test only turns calls away
    early: the checks under the lock follow it). Seen to catch: a pre-test turning the plan's own layout away."""
    fast = _accel.compiled()
    assert fast is not None
    z, x, y = _warm(k)
    plan = k.add._last
    other = (tile.zeros(f32, [2 * N]).partition([128]), tile.ones(f32, [2 * N]), tile.ones(f32, [2 * N]))
    assert fast.call(plan, k.add, other, {}) is None
    assert fast.call(plan, k.add, (z, x), {}) is None  # another argument count
    assert all(a._fate is None for a in (*other, z, x, y))
    launch = fast.call(plan, k.add, (z, x, y), {})
    assert launch is not None
    assert z._fate is not None
    out, _, _ = launch.sync()
    assert (out.unpartition().to_numpy() == 3).all()


@pytest.mark.skipif(not BUILT, reason=_accel.reason())
def test_the_compiled_move_keeps_the_registry_and_fates(k: ModuleType) -> None:
    from tile.frontend._launch import Launch

    fast = _accel.compiled()
    assert fast is not None
    z, x, y = _warm(k)
    plan = k.add._last
    fate = ("launch", "moved into the launch of add at here")
    storage = x._storage
    done = fast.admit_move(plan, (z, x, y), {}, None, k.add.unchecked, k.add._check_scalar, fate)
    assert done is not None
    (nz, nx, _ny), after = done
    assert after is None
    assert z._fate is fate
    assert x._fate is fate
    assert y._fate is fate
    assert nz._fate is None
    assert nz._tensor is z._tensor
    assert nz.tile_shape == z.tile_shape
    assert nx._fate is None
    assert nx.shape == x.shape
    assert nx._range == x._range
    assert nx._layout is x._layout
    assert id(x) not in storage._handles
    assert storage._handles[id(nx)]() is nx
    z, x, y = Launch("add", plan, done[0], "here", after).sync()
    assert (z.unpartition().to_numpy() == 3).all()


def test_one_launch_synced_from_two_threads_runs_once(k: ModuleType, path: str) -> None:
    """The claim of `_fastlaunch.sync` takes tile.aio's claiming lock like every claim: one thread runs the launch, the
    other gets OpConsumedError; the arguments come back once."""
    for _ in range(20):
        z, x, y = _warm(k)
        op = k.add(z, x, y)
        start = threading.Barrier(2)
        outcomes: list[object] = []

        def run(op: Any, start: threading.Barrier, outcomes: list[object]) -> None:
            start.wait()
            try:
                outcomes.append(op.sync())
            except OpConsumedError as error:
                outcomes.append(error)

        threads = [threading.Thread(target=run, args=(op, start, outcomes)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(type(o).__name__ for o in outcomes) == ["OpConsumedError", "tuple"]
        z, x, y = next(o for o in outcomes if isinstance(o, tuple))
        assert (z.unpartition().to_numpy() == 3).all()
        assert x._storage.pending == 0


def test_a_sync_is_one_compiled_step(k: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the compiled path a plain launch's ``.sync()``/``.sync_on()`` is handled by `_fastlaunch.sync` (not left to
    the generic run); inside a ``.then`` function it is left (the lock is held) and refused there."""
    if not BUILT:
        pytest.skip(_accel.reason())
    previous = _accel.use("compiled")
    handled: list[bool] = []
    real = _accel.sync

    def spy(*args: Any) -> Any:
        done = real(*args)
        handled.append(done is not NotImplemented)
        return done

    monkeypatch.setattr(_accel, "sync", spy)
    try:
        z, x, y = _warm(k)
        z, x, y = k.add(z, x, y).sync_on(HostStream())
        assert handled == [True, True, True]
        with pytest.raises(ExecutionLockError, match=r"\.sync\(\) was called while .* Return a DeviceOp from \.then"):
            k.add(z, x, y).then(lambda out: k.add(*_fresh()).sync()).sync()
        assert handled == [True, True, True]  # the chain runs generically; the inner .sync() is refused before it
    finally:
        _accel.use(previous)


def test_a_mixed_chain_runs_and_hands_back_on_both_paths(
    k: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of launches, ``.map()`` links and a ``.then()`` returning a non-launch op runs in order and hands every
    argument back once; on the compiled path `_fastlaunch.run_links`/`release_links` run it (tile.aio's hooks)."""
    from tile.aio import _combinators, value

    ran: list[str] = []

    def spy(hook: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def called(*args: Any) -> Any:
            ran.append(hook)
            return real(*args)

        return called

    for hook in ("_run_links", "_release_links"):
        real = getattr(_combinators, hook)
        if real is not None:
            monkeypatch.setattr(_combinators, hook, spy(hook, real))
    z, x, y = _warm(k)
    op = k.add(z, x, y).map(lambda out: out).then(lambda out: k.add(*out)).then(value).then(lambda out: k.add(*out))
    z, x, y = op.sync()
    assert (z.unpartition().to_numpy() == 3).all()
    assert x._storage.pending == 0
    assert y._storage.pending == 0
    assert z._tensor._storage.pending == 0
    assert ran == (["_run_links", "_release_links"] if path == "compiled" else [])
    assert op.consumed


def test_a_then_names_its_own_line_on_both_paths(k: ModuleType, path: str) -> None:
    """The fate of an op moved into ``.then()`` names the line of that call, also right after another ``.then()`` of the
    same function on another line (`_fastlaunch.then` keeps the last (code, line)'s fate)."""
    z, x, y = _warm(k)
    first = k.add(z, x, y)
    second, line_a = first.then(_not_an_op), sys._getframe().f_lineno
    _third, line_b = second.then(_not_an_op), sys._getframe().f_lineno
    for op, line in ((first, line_a), (second, line_b)):
        with pytest.raises(OpConsumedError) as caught:
            op.then(_not_an_op)
        assert f"moved into .then() at {__file__}:{line}" in str(caught.value)
