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
- ``event.close()`` from a finalizer the collector ran inside ``stream.wait(event)``, ``event.record(stream)``,
  ``query``, ``synchronize`` or ``elapsed_ms``, after the use's open check (or from another thread at that moment:
  ``Event`` took no lock), destroyed the handle the use then passed to the driver: a wait on, or a record of, a
  destroyed event, whose handle the driver may have given to a new event (the stream then waits for another event:
  an ordering the caller relied on silently lost). A use now counts itself on the event before its open check and a
  close made meanwhile leaves the destroy to the last use (``_event.py``); each event is still destroyed once.
- The same class for streams: ``stream.close()`` from such a finalizer inside ``stream.wait``, ``event.record(stream)``,
  ``query``, ``synchronize``, ``is_capturing`` or ``priority`` (calls on the handle that take no ``use_lock``, so
  review 22's refusal of a close inside a use did not apply) destroyed the stream before the call's driver call (a
  record on a destroyed handle the driver may have reused marks another stream's work). Those calls count
  themselves on the stream too (``Stream._enter``); a close meanwhile still closes it (final event, epoch) but leaves
  ``cuStreamDestroy`` to the last of them, a call through a borrow of the stream (a ``__cuda_stream__`` wrapper of
  Tile's own stream, closed with it) included.

Bug fixed on the way (typed errors): ``MemoryPool.trim(keep_bytes)`` passed any value to the driver (-1, 2**64, a
float, a string: cuda-python's untyped errors; ``True`` trimmed to 1 byte). `WrongTypeError` now, before the driver.

Tried, and held (pinned below where cheap):

- the compiled and the pure launch, each given a misuse right after the plan holds the launch's objects (so the
  compiled path's own case is one check away), raise the same error with the same message, typed (a `TileError`,
  or the call's own ``TypeError`` for an unknown keyword): bad grid, block or shared memory, too few arguments,
  arguments that are no list or tuple, an i32 out of range, a float for an int, a raw address, a read-only view for
  a ``"ptr"``, a buffer freed, the stream closed, the module unloaded, an int stream, a list signature, and each of
  them (and a valid launch) inside a host function (`HostFunctionError`).
- a plan reused after one of its buffers was freed and the address handed to a new allocation: the free bumps the
  epoch (both paths' plans miss) and the pointers are matched by identity through weak references (the new buffer
  at the same address is another object), so neither the packed block nor the C path's slot read trusts the stale
  pointer; the compiled path's borrowed slot reads stay valid across its one allocation because the plan is claimed
  (``busy``) and ``remember`` leaves a busy plan alone (review 34), and it holds new references to the argument
  items, the call and the driver arguments while the driver runs (read in the source; not probed separately);
- a prepared launch after ``Module.unload`` (the epoch; review 11/15), on a closed stream, or of a freed buffer: typed
  errors; a plan on one stream relaunched on another takes the full path (the stream is matched by identity);
- ``tile.distributed`` was not exercised: it needs torch, which this environment lacks (see the report).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import fire_at_collection, spy_destroyed

import tile.core as tc
from tile.core import _compiled, _launch, _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, sm90_cubin

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


def _floats(value: float = 0.0, stream: tc.Stream | None = None) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.full(N, value, np.float32), stream=stream)


def _args(x: object, y: object, z: object) -> list[Any]:
    return [x, N, 1, y, N, 1, z, N, 1]


def _at_allocation(n: int, work: Callable[[], Any], fire: Callable[[], None]) -> Any:
    """``work()`` with ``fire`` run by a finalizer at its ``n``-th collection; None where ``work`` was refused."""
    try:
        with fire_at_collection(n, fire):
            return work()
    except tc.UseAfterFreeError:
        return None


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


# -- held: the compiled and the pure launch refuse every misuse with the same typed error ---------------------------


def _read_only(buffer: tc.DeviceBuffer) -> tc.DeviceView:
    return tc.DeviceView(
        buffer.ptr, np.dtype(np.float32), (N,), (4,), device=buffer.device, owner=buffer, buffer=buffer, readonly=True
    )


class _Case:
    """One misuse of a launch whose plan holds ``x, y, z`` on ``x``'s stream: what ``setup`` breaks, then the call."""

    def __init__(
        self, name: str, call: Callable[[dict[str, Any]], Any], setup: Callable[[dict[str, Any]], Any]
    ) -> None:
        self.name, self.call, self.setup = name, call, setup

    def __repr__(self) -> str:
        return self.name


def _planned(s: dict[str, Any], **change: Any) -> tuple[Any, ...]:
    """The planned launch's arguments with ``change`` applied (``args``, ``grid``, ``block`` or keywords)."""
    options = {"signature": VEC_ADD_SIGNATURE, "stream": s["stream"]} | change
    return s["function"], options.pop("grid", 1), options.pop("block", 1), options.pop("args", s["args"]), options


def _nothing(s: dict[str, Any]) -> None:
    return None


def _unload(s: dict[str, Any]) -> None:
    s["function"].module.unload()


def _free_z(s: dict[str, Any]) -> None:
    s["args"][6].free()


def _close(s: dict[str, Any]) -> None:
    s["stream"].close()


def _swap(s: dict[str, Any], at: int, value: Any) -> list[Any]:
    args = list(s["args"])
    args[at] = value
    return args


CASES = [
    _Case("none (launched but in a host function)", _planned, _nothing),
    _Case("grid 0", lambda s: _planned(s, grid=0), _nothing),
    _Case("grid 2**32", lambda s: _planned(s, grid=2**32), _nothing),
    _Case("grid True", lambda s: _planned(s, grid=True), _nothing),
    _Case("block -1", lambda s: _planned(s, block=-1), _nothing),
    _Case("shared_mem -1", lambda s: _planned(s, shared_mem=-1), _nothing),
    _Case("shared_mem 2**32", lambda s: _planned(s, shared_mem=2**32), _nothing),
    _Case("one argument short", lambda s: _planned(s, args=s["args"][:-1]), _nothing),
    _Case("args a set", lambda s: _planned(s, args={1}), _nothing),
    _Case("args None", lambda s: _planned(s, args=None), _nothing),
    _Case("i32 out of range", lambda s: _planned(s, args=_swap(s, 1, 2**31)), _nothing),
    _Case("float for i32", lambda s: _planned(s, args=_swap(s, 1, 32.0)), _nothing),
    _Case("raw address", lambda s: _planned(s, args=_swap(s, 0, s["args"][0].ptr)), _nothing),
    _Case("read-only view for ptr", lambda s: _planned(s, args=_swap(s, 6, _read_only(s["args"][6]))), _nothing),
    _Case("freed buffer", _planned, _free_z),
    _Case("closed stream", _planned, _close),
    _Case("unloaded module", _planned, _unload),
    _Case("unknown keyword", lambda s: _planned(s, streem=s["stream"]), _nothing),
    _Case("stream an int", lambda s: _planned(s, stream=int(s["stream"].handle)), _nothing),
    _Case("signature a list", lambda s: _planned(s, signature=list(VEC_ADD_SIGNATURE), args=s["args"][:-1]), _nothing),
]


def _outcome(launch: Launch, vec_add: tc.Function, case: _Case, in_host_function: bool) -> tuple[str, str]:
    """The error ``case`` raises through ``launch`` once the plan holds its arguments (type, message with addresses
    and ids blanked), or ("launched", "")."""
    stream = tc.Stream()  # the buffers' own: the compiled path takes no plan with buffers of other streams
    x, y, z = _floats(1.0, stream), _floats(2.0, stream), _floats(0.0, stream)
    s: dict[str, Any] = {"function": vec_add, "stream": stream, "args": _args(x, y, z)}
    fallen: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> None:
        fallen.append(1)
        _launch.launch(*args, **kwargs)

    _compiled.bind(counting)
    try:
        for _ in range(3):  # the plan, then its hit: the compiled path's own case
            launch(vec_add, 1, 1, s["args"], signature=VEC_ADD_SIGNATURE, stream=stream)
    finally:
        _compiled.bind(_launch.launch)
    assert len(fallen) == (2 if launch is _compiled.compiled_launch else 0), "the compiled launch missed its plan"
    case.setup(s)
    function, grid, block, args, options = case.call(s)
    try:
        if in_host_function:
            with tc.host_callback():
                launch(function, grid, block, args, **options)
        else:
            launch(function, grid, block, args, **options)
    except Exception as error:  # compared across the paths below
        return type(error).__name__, re.sub(r"0x[0-9a-f]+|\d{3,}", "#", str(error))
    finally:
        for buffer in (x, y, z):
            if not buffer.closed:
                buffer.free()
        if not stream.closed:
            stream.synchronize()
            stream.close()
    return "launched", ""


@pytest.mark.parametrize("in_host_function", [False, True], ids=["", "in a host function"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_both_launch_paths_refuse_each_misuse_with_the_same_typed_error(
    sim: SimDriver, case: _Case, in_host_function: bool
) -> None:
    """Held: for every misuse of a launch whose plan (and the compiled path's hit) holds its objects, the compiled and
    the pure launch raise the same error, with the same message, and a TileError where the pure path's is one."""
    if _compiled.compiled_launch is None:
        pytest.skip(_compiled.reason)
    outcomes = []
    for launch in (_launch.launch, _compiled.compiled_launch):
        function = tc.Module.from_cubin(sm90_cubin()).function("vec_add")
        outcomes.append(_outcome(launch, function, case, in_host_function))
    assert outcomes[0] == outcomes[1]
    kind = outcomes[0][0]
    assert kind != "launched" or (case is CASES[0] and not in_host_function)
    if kind == "launched":
        return
    assert kind == "TypeError" or issubclass(getattr(tc, kind), tc.TileError), outcomes[0]


# -- hole: an event closed by a finalizer (or another thread) in the middle of a use of its handle -------------------


@pytest.mark.parametrize("use", ["wait", "record", "query", "synchronize", "elapsed_ms"])
def test_an_event_closed_during_a_use_is_destroyed_after_the_use(sim: SimDriver, use: str) -> None:
    """Hole: ``event.close()`` from a finalizer the collector ran inside ``stream.wait(event)`` (or the event's
    ``record``, ...), after its open check, destroyed the handle the use then passed to the driver: a wait on a
    destroyed event (which the driver may have given to a new one: the stream waited for another event) or a record
    of it. Each collection point is tried: no driver call names a destroyed event, and each is destroyed once."""
    destroyed, on_destroyed = spy_destroyed(
        sim,
        "cuEventDestroy",
        [
            ("cuStreamWaitEvent", 1),
            ("cuEventRecord", 0),
            ("cuEventQuery", 0),
            ("cuEventSynchronize", 0),
            ("cuEventElapsedTime", 1),
        ],
    )
    a, b = tc.Stream(), tc.Stream()
    start = tc.Event(timing=True)
    start.record(a)
    fired_inside = 0
    for n in range(1, 60):
        event = tc.Event(timing=True)
        event.record(a)
        a.synchronize()  # (the simulator times completed records only)
        uses: dict[str, Callable[[], object]] = {
            "wait": partial(b.wait, event),
            "record": partial(event.record, b),
            "query": event.query,
            "synchronize": event.synchronize,
            "elapsed_ms": partial(event.elapsed_ms, start),
        }
        run = uses[use]
        _at_allocation(n, run, event.close)
        if not event._closed:  # the use made fewer collections than n: every point was tried
            event.close()
            break
        fired_inside += 1
    assert fired_inside > 0, "the finalizer never ran inside the use"
    assert on_destroyed == [], f"driver calls on destroyed events: {on_destroyed}"
    assert len(destroyed) == len(set(destroyed)), "an event destroyed twice"
    for stream in (a, b):
        stream.synchronize()
        stream.close()


class _Wrapper:
    """Another library's object for a Tile stream (as cuda.core's wrapper of it is): ``__cuda_stream__``."""

    def __init__(self, stream: tc.Stream) -> None:
        self.handle = stream.handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


@pytest.mark.parametrize(
    "use", ["wait", "record", "query", "synchronize", "is_capturing", "priority", "wait through a borrow"]
)
def test_a_stream_closed_during_a_call_on_its_handle_is_destroyed_after_the_call(sim: SimDriver, use: str) -> None:
    """Hole (the same class for streams): ``stream.close()`` from a finalizer the collector ran inside
    ``stream.wait(event)``, ``event.record(stream)``, ``stream.query()``... after the open check (these take no
    ``use_lock``, so the close was not refused as inside a use) destroyed the stream, and the call then passed the
    destroyed handle to the driver (which may have given it to a new stream: a record there marks another stream's
    work). Each collection point is tried: no driver call names a destroyed stream, and each is destroyed once."""
    calls = [("cuStreamWaitEvent", 0), ("cuEventRecord", 1), ("cuStreamQuery", 0)]
    calls += [("cuStreamSynchronize", 0), ("cuStreamIsCapturing", 0), ("cuStreamGetPriority", 0)]
    destroyed, on_destroyed = spy_destroyed(sim, "cuStreamDestroy", calls)
    other = tc.Stream()
    fired_inside = 0
    for n in range(1, 60):
        stream = tc.Stream()
        event = other.record()
        uses: dict[str, Callable[[], object]] = {
            "wait": partial(stream.wait, event),
            "record": partial(event.record, stream),
            "query": stream.query,
            "synchronize": stream.synchronize,
            "is_capturing": stream.is_capturing,
            "priority": lambda stream=stream: stream.priority,  # type: ignore[misc]  # (binds this loop's stream)
            # a wrapper of Tile's own stream (closed with it): a call through it holds off the owned one's destroy
            "wait through a borrow": partial(tc.Stream.borrow(_Wrapper(stream)).wait, event),
        }
        before = stream.record()  # work queued before the close
        try:
            _at_allocation(n, uses[use], stream.close)
        except tc.StreamClosedError:  # closed before the call's check: refused, as it should be
            # a synchronize refused so has still waited for the work queued before the close (review 35's rule)
            assert use != "synchronize" or before.query(), f"collection {n}: refused before the work was done"
        if not stream.closed:  # the call made fewer collections than n: every point was tried
            stream.close()
            break
        fired_inside += 1
    assert fired_inside > 0, "the finalizer never ran inside the call"
    assert on_destroyed == [], f"driver calls on destroyed streams: {on_destroyed}"
    assert len(destroyed) == len(set(destroyed)), "a stream destroyed twice"
    other.synchronize()
    other.close()


# -- bug: a memory pool trim's size reached the driver unchecked ------------------------------------------------------


@pytest.mark.parametrize("keep", [-1, 2**64, 1.5, "1", True, None])
def test_a_pool_trim_of_a_bad_size_is_a_typed_error_before_the_driver(sim: SimDriver, keep: object) -> None:
    """Bug (typed errors): ``pool.trim(keep_bytes)`` handed any value to ``cuMemPoolTrimTo`` (cuda-python's untyped
    ``OverflowError``/``TypeError``, or a bool taken as 1). Now `WrongTypeError` before the driver."""
    pool = tc.Device(0).memory_pool
    with pytest.raises(tc.WrongTypeError, match=r"keep_bytes="):
        pool.trim(keep)  # type: ignore[arg-type]
