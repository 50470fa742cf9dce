"""Adversarial review 39 of tile.core used alone (and tile.distributed's borrowing of tensors), from safe code only:
launch plans, prepared launches, the compiled launch (``_fastcore.c``) against the pure one, finalizers running
inside a launch, frees and address reuse. Run on tile.core's strict simulator (``sim``: nothing runs before something
waits for it; a kernel or copy touching memory outside every live allocation, or a free overtaking queued work, is a
bug it reports). Each hole's test names it and failed before its fix; the launch tests run on both launch paths.

Holes found and fixed:

- A launch plan (and a `PreparedLaunch`) vouched for a buffer freed after its checks. The full path took the plan's
  invalidation epoch *after* it had checked the pointers, ordered the streams (event records), built the parameter
  block and the plan (allocations, where the collector runs finalizers); ``prepare`` likewise at the end of
  ``_setup``. A finalizer run at one of those allocations that frees an argument (``x.free()``: a ``__del__`` of an
  object sharing ``x``) marks ``x`` freed, bumps the epoch and releases the memory once this launch is enqueued
  (review 22); the epoch taken after it then matched, so the next launch of the same objects hit the plan (pure
  and compiled paths alike) and the next call of the prepared launch passed its guard: the kernel ran on freed memory
  (which the pool hands to the next allocation: same address, another object). The epoch is now read before the
  checks, under the lock, and kept as is: anything freed, closed or unloaded after it makes the next launch check
  again (the full path refuses the freed buffer with `UseAfterFreeError`).
- ``tc.launch`` and ``tc.prepare`` took any object as the function: they read its ``cu_function``, ``param_layout``
  and ``module``. A look-alike (not a `Function`: review 15 made ``tc.Function(...)`` a `FactoryError`, but nothing
  checked the launches' argument) carrying the real kernel's handle and a one-parameter layout had one argument
  checked and packed, and the driver read the kernel's nine parameters from a one-entry ``kernelParams`` array (the
  memory after it taken as pointers). The compiled launch also relaunched a look-alike that carried the real
  function's plan, where the pure path then refused it. Both paths now take an exact `Function` only
  (`WrongTypeError`; ``_fastcore`` is bound to the class and leaves anything else to the pure path's error).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core import _compiled, _launch, _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver

Launch = Callable[..., None]
N = 32


@pytest.fixture(params=["pure", "compiled"])
def launch(request: pytest.FixtureRequest) -> Launch:
    """``tile.core.launch`` on each path: the pure-Python one and the compiled one (``_fastcore``) where built."""
    if request.param == "pure":
        return _launch.launch
    if _compiled.compiled_launch is None:
        pytest.skip(_compiled.reason)
    return _compiled.compiled_launch


def _floats(value: float = 0.0) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.full(N, value, np.float32))


def _args(x: object, y: object, z: object) -> list[Any]:
    return [x, N, 1, y, N, 1, z, N, 1]


class _Bomb:
    """Cyclic garbage whose finalizer, on the ``countdown``-th collection that finds it, runs ``fire`` (each earlier
    one leaves a new bomb): with the collector run at every allocation, ``fire`` runs at a chosen allocation."""

    countdown = -1
    fire: Callable[[], None] = staticmethod(lambda: None)

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        if _Bomb.countdown <= 0:
            return
        _Bomb.countdown -= 1
        if _Bomb.countdown == 0:
            _Bomb.fire()
        else:
            _Bomb()


def _at_allocation(n: int, work: Callable[[], Any], fire: Callable[[], None]) -> Any:
    """``work()`` with ``fire`` run by a finalizer at its ``n``-th collection; None where ``work`` was refused."""
    gc.collect()
    threshold = gc.get_threshold()
    _Bomb.countdown, _Bomb.fire = n, fire
    _Bomb()
    gc.set_threshold(1)
    try:
        return work()
    except tc.UseAfterFreeError:
        return None
    finally:
        gc.set_threshold(*threshold)
        _Bomb.countdown = -1


# -- hole: the plan's (and a prepared launch's) epoch taken after a finalizer freed an argument ----------------------


@pytest.mark.parametrize("how", ["planned", "prepared"])
def test_a_buffer_freed_by_a_finalizer_inside_a_launch_is_refused_by_the_next_launch(
    sim: SimDriver, vec_add: tc.Function, launch: Launch, how: str
) -> None:
    """Hole: ``x.free()`` from a finalizer the collector ran after a launch's (or ``prepare``'s) checks left the plan
    (the prepared launch) with the epoch of after the free: relaunching the same objects passed the guard and the
    kernel ran on ``x``'s released memory. Each collection point is tried; the next launch must refuse ``x``."""
    other = tc.Stream()
    relaunched, fired_inside = [], 0
    for n in range(1, 120):
        x, y, z = _floats(1.0), _floats(2.0), _floats()
        args = _args(x, y, z)

        def first(args: list[Any] = args) -> Any:
            if how == "prepared":
                return tc.prepare(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)
            return launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)

        prepared = _at_allocation(n, first, x.free)
        if not x.closed:  # the first launch made fewer collections than n: every point was tried
            x.free()
            break
        fired_inside += 1
        for stream in (x.stream, other):  # the first launch (if any) runs, then x's free: its memory is gone
            stream.synchronize()
        _reaper.drain()
        x.stream.synchronize()
        try:
            if how == "prepared":
                if prepared is not None:
                    prepared()
                    relaunched.append(n)
            else:
                launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)
                relaunched.append(n)
        except tc.UseAfterFreeError:
            pass
        other.synchronize()
        for buffer in (y, z):
            buffer.free()
    assert fired_inside > 5, "the finalizer never ran inside the launch"
    assert relaunched == [], f"relaunched a freed buffer after collections {relaunched}: {sim.bugs[:1]}"
    assert sim.bugs == []


# -- hole: a look-alike of a Function chose the kernel and the layout the arguments were checked against -------------


class _LookAlike:
    """Not a `tile.core.Function`, but with its attributes: the real kernel handle and module, a layout of its own."""

    def __init__(self, real: tc.Function, plan: object = None) -> None:
        self.cu_function, self.module, self.name, self._closed = real.cu_function, real.module, "fake", False
        self.param_layout = ((0, 4),)  # one i32 for a kernel of nine parameters
        self._launch_plan = plan


@pytest.mark.parametrize("how", ["launch", "prepare", "with the real plan"])
def test_an_object_that_is_not_a_function_is_not_launched(
    sim: SimDriver, vec_add: tc.Function, launch: Launch, how: str
) -> None:
    """Hole: ``launch``/``prepare`` read ``cu_function``, ``param_layout`` and ``module`` from whatever they were
    given: a look-alike with the real kernel's handle and a one-parameter layout had its one argument checked against
    that layout and launched, and the driver read the kernel's nine parameters from a one-entry ``kernelParams``
    array (whatever memory follows it as pointers). Also (the compiled path): a look-alike carrying the real function's
    plan relaunched it where the pure path refuses. Now `WrongTypeError` on both paths, nothing enqueued."""
    calls: list[tuple[Any, ...]] = []
    enqueue = sim.cuLaunchKernel

    def counted(*call: Any) -> Any:
        calls.append(call)
        return enqueue(*call)

    sim.cuLaunchKernel = counted  # type: ignore[method-assign,assignment]  # before the plan reads it
    x, y, z = _floats(1.0), _floats(2.0), _floats()
    args = _args(x, y, z)
    for _ in range(3):  # the plan remembers them, then relaunches them (the compiled path's own case)
        launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=x.stream)
    fake: Any = _LookAlike(vec_add)  # (typed Any: what a caller of the untyped API may pass)
    fake_args: list[Any] = [5]
    signature: tuple[str, ...] = ("i32",)
    if how == "with the real plan":
        fake, fake_args, signature = _LookAlike(vec_add, vec_add._launch_plan), args, VEC_ADD_SIGNATURE
    go: Callable[..., Any] = tc.prepare if how == "prepare" else launch
    with pytest.raises(tc.WrongTypeError, match=r"_LookAlike is not a tile.core.Function"):
        go(fake, 1, 1, fake_args, signature=signature, stream=x.stream)
    assert len(calls) == 3
    x.stream.synchronize()
    for buffer in (x, y, z):
        buffer.free()
