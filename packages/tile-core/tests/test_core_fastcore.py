"""The compiled checked launch (tile.core._fastcore) against the pure-Python one (tile.core._launch.launch).

Each test runs on both: they must launch the same values and refuse the same misuse with the same typed error. The
compiled one is skipped where it is not built, unless ``TILE_REQUIRE_EXTENSION=1`` (then a missing build fails);
``TILE_PURE_PYTHON=1`` selects the pure one for ``tile.core.launch`` (checked here too). The probe kernel records the
values the driver read, so a launch packed from a stale plan shows as wrong values.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.bindings import _driver, check, driver
from tile.core import _compiled, _dlpack, _launch, _reaper
from tile.core._stream import invalidation, use_lock
from tile.core.testing import SimDriver, SimKernel, simulated, sm90_cubin

SIG = ("ptr", "i32", "i64")
Launch = Callable[..., None]


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated() as driver:
        yield driver


def _compiled_launch() -> Launch:
    """The compiled launch, or a skip (a failure under ``TILE_REQUIRE_EXTENSION=1`` unless the pure one is forced)."""
    if _compiled.compiled_launch is None:
        if os.environ.get("TILE_REQUIRE_EXTENSION") == "1" and not os.environ.get(_compiled.PURE_ENV):
            pytest.fail(f"the compiled launch is required: {_compiled.reason}")
        pytest.skip(_compiled.reason)
    return _compiled.compiled_launch


@pytest.fixture(params=["pure", "compiled"])
def launch(request: pytest.FixtureRequest) -> Launch:
    return _launch.launch if request.param == "pure" else _compiled_launch()


class Probe:
    """A simulated kernel taking ``SIG`` that records the values each launch passed."""

    def __init__(self, sim: SimDriver, launch: Launch) -> None:
        self.seen: list[tuple[Any, ...]] = []
        sim.add_kernel(SimKernel("probe_fast", list(SIG), self.body))
        self.function = tc.Module.from_cubin(sm90_cubin()).function("probe_fast")
        self.launch = launch

    def body(self, values: tuple[Any, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
        self.seen.append(values)
        return [], lambda: None

    def __call__(self, args: Any, stream: object = None, **kwargs: Any) -> None:
        self.launch(self.function, 1, 1, args, stream=stream, signature=SIG, **kwargs)


@pytest.fixture
def probe(sim: SimDriver, launch: Launch) -> Probe:
    return Probe(sim, launch)


@contextlib.contextmanager
def pure_calls(calls: list[object]) -> Iterator[None]:
    """Within: the compiled launch hands its other cases to a pure launch that appends each call's arguments to
    ``calls`` (so a test sees which launches the compiled code made itself)."""

    def counting(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        _launch.launch(*args, **kwargs)

    _compiled.bind(counting)
    try:
        yield
    finally:
        _compiled.bind(_launch.launch)


def _buffer(**kwargs: Any) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.zeros(64, np.float32), **kwargs)


def test_tile_core_launch_is_the_selected_one() -> None:
    """``tile.core.launch`` is the compiled launch when built and not switched off, else the pure-Python one."""
    expected = _compiled.compiled_launch or _launch.launch
    assert tc.launch is expected
    if os.environ.get(_compiled.PURE_ENV, "").strip() not in ("", "0"):
        assert _compiled.compiled_launch is None


def test_repeated_launches_pack_their_values(probe: Probe) -> None:
    """The same objects again (the compiled hit), then a changed item of the same list, then other objects."""
    x, y = _buffer(), _buffer()
    args = [x, 7, 2**40]
    for _ in range(3):
        probe(args, stream=x.stream)
    args[1] = 8  # the same list object, another scalar: packed anew
    probe(args, stream=x.stream)
    probe((y, 9, -1), stream=x.stream)
    assert probe.seen == [(x.ptr, 7, 2**40)] * 3 + [(x.ptr, 8, 2**40), (y.ptr, 9, -1)]


def test_the_compiled_launch_relaunches_without_the_pure_one(sim: SimDriver) -> None:
    """A repeat of the very same objects on the plan's stream is launched by the compiled code itself; anything else
    goes to the pure launch. Bug caught: the compiled path never taking its case (no speed-up, every test still
    passing through the fallback)."""
    compiled = _compiled_launch()
    calls: list[object] = []

    probe = Probe(sim, compiled)
    x = _buffer()
    args = [x, 1, 2]
    with pure_calls(calls):
        probe(args, stream=x.stream)  # the full path: makes the plan, remembers the pointer
        probe(args, stream=x.stream)  # the pure plan path: packs the scalars, remembers their objects
        probe(args, stream=x.stream)  # the compiled hit
        probe(args, stream=x.stream)
        probe([x, 1, 3], stream=x.stream)  # a new scalar object: the pure path packs it
    assert len(calls) == 3
    assert [seen[2] for seen in probe.seen] == [2, 2, 2, 2, 3]


def test_the_compiled_launch_relaunches_on_the_default_stream(sim: SimDriver) -> None:
    """No stream given: the device's default stream, which the compiled launch reads as ``as_stream`` would."""
    compiled = _compiled_launch()
    calls: list[object] = []

    probe = Probe(sim, compiled)
    x = _buffer()
    args = [x, 1, 2]
    with pure_calls(calls):
        for _ in range(4):
            probe(args)
    assert len(calls) == 2
    assert probe.seen == [(x.ptr, 1, 2)] * 4
    other = tc.Stream()
    probe(args, stream=other)  # the plan now remembers another stream: the default one takes the full path again
    probe(args)
    assert len(probe.seen) == 6


def test_a_buffer_freed_after_a_planned_launch_is_refused(probe: Probe) -> None:
    x = _buffer()
    args = [x, 1, 2]
    probe(args, stream=x.stream)
    probe(args, stream=x.stream)
    x.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        probe(args, stream=x.stream)
    assert len(probe.seen) == 2


def test_a_closed_stream_is_refused(probe: Probe) -> None:
    x, s = _buffer(), tc.Stream()
    args = [x, 1, 2]
    probe(args, stream=s)
    probe(args, stream=s)
    s.close()
    with pytest.raises(tc.StreamClosedError, match="was closed"):
        probe(args, stream=s)
    assert len(probe.seen) == 2


def test_a_collected_view_is_not_taken_for_a_new_one(probe: Probe) -> None:
    x = _buffer()
    view = x.view(np.float32, (8,))
    probe([view, 1, 2], stream=x.stream)
    probe([view, 1, 2], stream=x.stream)
    del view
    gc.collect()
    other = x.view(np.float32, (8,), offset=32)
    probe([other, 1, 2], stream=x.stream)
    probe([other, 1, 2], stream=x.stream)
    assert [seen[0] for seen in probe.seen] == [x.ptr, x.ptr, x.ptr + 32, x.ptr + 32]


@pytest.mark.parametrize(
    ("grid", "block", "shared_mem"), [(0, 1, 0), (2**32, 1, 0), (True, 1, 0), (1, 0, 0), (1, 1, -1), (1, 1, 2**32)]
)
def test_bad_extents_are_refused_after_a_planned_launch(probe: Probe, grid: Any, block: Any, shared_mem: Any) -> None:
    x = _buffer()
    args = [x, 1, 2]
    probe(args, stream=x.stream)
    probe(args, stream=x.stream)
    with pytest.raises(tc.LaunchArgumentError, match="invalid"):
        probe.launch(probe.function, grid, block, args, stream=x.stream, shared_mem=shared_mem, signature=SIG)
    assert len(probe.seen) == 2


def test_wrong_calls_raise_the_pure_launchs_errors(probe: Probe) -> None:
    x = _buffer()
    args = [x, 1, 2]
    probe(args, stream=x.stream)
    with pytest.raises(TypeError, match="colour"):
        probe(args, stream=x.stream, colour=1)
    with pytest.raises(TypeError, match="positional"):
        probe.launch(probe.function, 1, 1, args, x.stream)
    with pytest.raises(tc.LaunchArgumentError, match="does not fit"):
        probe([x, 2**31, 2], stream=x.stream)
    with pytest.raises(tc.LaunchArgumentError, match="arguments were given"):
        probe([x, 1], stream=x.stream)
    assert len(probe.seen) == 1


def test_a_planned_launch_inside_a_host_function_is_refused(probe: Probe) -> None:
    x = _buffer()
    args = [x, 1, 2]
    probe(args, stream=x.stream)
    probe(args, stream=x.stream)
    _reaper.RUNNING[0] += 1
    _reaper._THREAD.depth = 1
    try:
        with pytest.raises(tc.HostFunctionError, match="host function"):
            probe(args, stream=x.stream)
    finally:
        _reaper.RUNNING[0] -= 1
        _reaper._THREAD.depth = 0
    assert len(probe.seen) == 2


def test_a_failed_driver_launch_raises_its_cuda_error(sim: SimDriver, launch: Launch) -> None:
    probe = Probe(sim, launch)
    sim.cuLaunchKernel = lambda *args: (701,)  # type: ignore[method-assign]  # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    x = _buffer()
    args = [x, 1, 2]
    for _ in range(3):  # the full path, then the planned one
        with pytest.raises(tc.CudaError, match="cuLaunchKernel"):
            probe(args, stream=x.stream)


class _Producer:
    """Another library's array over device memory, offered through DLPack as torch offers it: its view is untied."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __dlpack__(self, *, stream: object = None, max_version: tuple[int, int] | None = None, **_: object) -> object:
        versioned = _dlpack.wants_versioned(max_version)
        return _dlpack.export_capsule(
            self.ptr, np.dtype(np.float32), (8,), (4,), device=(2, 0), owner=self, versioned=versioned
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


def test_a_planned_launch_of_a_borrowed_view_goes_where_the_view_is_held(sim: SimDriver) -> None:
    """A launch reading a borrowed view must hold it (its producer) until the kernel completes (review 30): the
    compiled hit does not hold anything, so every such launch takes the pure path, which does. Bug caught: the
    compiled code relaunching a plan whose ``views`` it ignored (the producer could free the memory under the
    kernel)."""
    compiled = _compiled_launch()
    calls: list[object] = []

    probe = Probe(sim, compiled)
    x = _buffer()
    view = tc.borrow(_Producer(x.view(np.float32, (8,)).ptr))
    args = [view, 1, 2]
    with pure_calls(calls):
        for _ in range(4):
            probe(args, stream=x.stream)
    assert len(calls) == 4
    assert [seen[2] for seen in probe.seen] == [2, 2, 2, 2]


def test_none_for_a_collected_pointer_argument_is_refused(probe: Probe) -> None:
    """A collected view's weak reference reads None: None passed in its place is no match, and the full path refuses
    it. Bug caught: ``a is not ref()`` taking None for the remembered view (launching its stale address)."""
    x = _buffer()
    view = x.view(np.float32, (8,))
    probe([view, 1, 2], stream=x.stream)
    probe([view, 1, 2], stream=x.stream)
    del view
    gc.collect()
    with pytest.raises(tc.LaunchArgumentError, match="got None"):
        probe([None, 1, 2], stream=x.stream)
    assert len(probe.seen) == 2


class _OtherDriver:
    """The simulator behind another driver object, whose launches are counted (as a driver swap makes it)."""

    def __init__(self, sim: SimDriver) -> None:
        self.sim, self.launches = sim, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sim, name)

    def cuLaunchKernel(self, *args: Any) -> Any:  # noqa: N802  # the driver's name
        self.launches += 1
        return self.sim.cuLaunchKernel(*args)


def test_a_swapped_driver_is_the_one_launched(probe: Probe, sim: SimDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planned launch reads the current driver (``tile.bindings.driver()``) at every launch. Bug caught: the
    compiled launch calling the ``cuLaunchKernel`` of a driver that is no longer the current one."""
    x = _buffer()
    args = [x, 1, 2]
    for _ in range(3):
        probe(args, stream=x.stream)
    other = _OtherDriver(sim)
    monkeypatch.setattr(_driver._state, "module", other)
    current: object = driver()  # a stand-in for the module
    assert current is other
    for _ in range(3):
        probe(args, stream=x.stream)
    assert other.launches == 3
    monkeypatch.undo()
    probe(args, stream=x.stream)
    assert other.launches == 3
    assert len(probe.seen) == 7


class _NoSlots:
    """A class without LaunchPlan's slots."""


def test_bind_refuses_a_plan_class_without_the_slots_and_keeps_its_binding(probe: Probe) -> None:
    """The compiled launch reads LaunchPlan's slots by offset, found at bind: a class without them is refused and the
    bound offsets stay. Bug caught: a failed probe leaving offsets of nothing (reads of the object header)."""
    compiled = _compiled_launch()
    from tile.core import _fastcore  # type: ignore[attr-defined, unused-ignore]  # built: checked above

    x = _buffer()
    args = [x, 1, 2]
    probe(args, stream=x.stream)
    with pytest.raises(TypeError, match=r"is not a slot"):
        _fastcore.bind(
            _launch.launch, use_lock, invalidation, _reaper.RUNNING, _driver._state, check, _NoSlots, tc.Function
        )
    for _ in range(3):
        compiled(probe.function, 1, 1, args, stream=x.stream, signature=SIG)
    assert [seen[2] for seen in probe.seen] == [2] * 4


def test_a_planned_launch_of_other_extents_or_stream_launches_those(sim: SimDriver, launch: Launch) -> None:
    """The compiled launch keeps its last driver arguments and reuses them only for the very same objects. Bug
    caught: a kept argument tuple launched with the previous grid, block, shared memory size or stream."""
    calls: list[tuple[Any, ...]] = []
    real = sim.cuLaunchKernel

    def recording(*args: Any) -> Any:
        calls.append((args[1], args[4], args[7], int(args[8])))
        return real(*args)

    probe = Probe(sim, launch)
    sim.cuLaunchKernel = recording  # type: ignore[method-assign, assignment]
    x, other = _buffer(), tc.Stream()
    args = [x, 1, 2]
    given = [(1, 1, 0, x.stream)] * 4 + [(3, 1, 0, x.stream)] * 2 + [(2**20, 1, 0, x.stream), (1, 2, 0, x.stream)]
    given += [(1, 2, 16, x.stream)] * 3 + [(1, 2, 16, other)] * 3 + [(1, 1, 0, x.stream)] * 3
    for grid, block, shared_mem, stream in given:
        probe.launch(probe.function, grid, block, args, stream=stream, signature=SIG, shared_mem=shared_mem)
    assert calls == [(g, b, m, s.handle) for g, b, m, s in given]
