"""The checked launch's plan (tile.core._plan): a repeated `tile.core.launch` reuses its packing and pointer checks,
and every refusal of the full path still happens once the plan is warm.

Each test first launches with valid arguments (so the function has a plan that remembers them), then makes the
misuse; the probe kernel records the values the driver read, so a launch packed from a stale plan shows as wrong
values. Removing any of the plan's guards (the epoch, the stream, the identity of the pointers, the exact scalar
types, ``struct``'s range check, the converters running first, the busy flag) fails a test here.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core import _plan
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, SimKernel, simulated, sm90_cubin

SIG = ("ptr", "i32", "f32")


class Probe:
    """A simulated kernel taking ``SIG`` that records the values each launch passed."""

    def __init__(self, sim: SimDriver, name: str = "probe", signature: tuple[str, ...] = SIG) -> None:
        self.seen: list[tuple[Any, ...]] = []
        self.at_launch: list[Callable[[], object]] = []  # asked at each launch, answers in `answers`
        self.answers: list[list[object]] = []
        self.signature = signature
        sim.add_kernel(SimKernel(name, list(signature), self.body))
        self.function = tc.Module.from_cubin(sm90_cubin()).function(name)

    def body(self, values: tuple[Any, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
        self.seen.append(values)
        self.answers.append([ask() for ask in self.at_launch])
        return [], lambda: None

    def launch(self, *args: object, stream: object = None, unchecked: bool = False) -> None:
        tc.launch(self.function, 1, 1, list(args), stream=stream, signature=self.signature, unchecked=unchecked)

    @property
    def plan(self) -> _plan.LaunchPlan:
        plan = _plan.plan_for(self.function, self.signature)
        assert plan is not None
        return plan


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated(2) as driver:
        yield driver


@pytest.fixture
def probe(sim: SimDriver) -> Probe:
    return Probe(sim)


def _buffer(**kwargs: Any) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.zeros(64, np.float32), **kwargs)


def test_a_repeated_launch_takes_the_plan_and_packs_the_new_scalars(probe: Probe) -> None:
    """The second launch of the same pointers is a plan hit; changed scalars are packed, not the remembered ones."""
    x = _buffer()
    probe.launch(x, 3, 1.5)
    assert probe.plan.epoch >= 0
    assert probe.plan.stream is not None
    assert probe.plan.stream() is x.stream
    probe.launch(x, 7, -2.25)
    probe.launch(x, -(2**31), 0.0)
    assert probe.seen == [(x.ptr, 3, 1.5), (x.ptr, 7, -2.25), (x.ptr, -(2**31), 0.0)]


def test_fresh_scalars_each_launch_are_packed_with_their_values(sim: SimDriver) -> None:
    """Ints made anew for each launch (freed after it, so the next may be made at the same address): each launch
    packs its own values. Bug caught: the plan not holding the last packed scalars, whose ids then matched new ints
    of other values, so the cells kept the old values."""
    probe = Probe(sim, "probe_ints", ("ptr", "i32", "i64"))
    x = _buffer()
    for value in range(1000, 1050):
        probe.launch(x, int(str(value)), int(str(-value)))
    assert [seen[1:] for seen in probe.seen] == [(v, -v) for v in range(1000, 1050)]
    # The scalars the plan compares by identity are objects it holds, so no other object can be at their address.
    last = probe.plan._last
    assert last is not None
    assert last == (1049, -1049)


def test_another_buffer_is_packed_with_its_own_address(probe: Probe) -> None:
    """Bug caught: the remembered address packed for a different buffer (pointers compared by anything but identity)."""
    x, y = _buffer(), _buffer()
    probe.launch(x, 1, 1.0)
    probe.launch(y, 1, 1.0)
    probe.launch(x.view(np.float32, (8,), offset=16), 1, 1.0)
    assert [seen[0] for seen in probe.seen] == [x.ptr, y.ptr, x.ptr + 16]


def test_a_collected_views_id_is_forgotten(probe: Probe) -> None:
    """The plan compares a pointer argument with the remembered object itself, through a weak reference: a view
    collected since (no free, so no epoch bump) is None there, so another object later made at its address cannot be
    taken for it. Bug caught: a test by id (a new view at the old address packed with the old view's address)."""
    x = _buffer()
    view = x.view(np.float32, (8,))
    probe.launch(view, 1, 1.0)
    probe.launch(view, 1, 1.0)  # a planned launch: its pointer is remembered
    (ref,) = probe.plan._refs
    assert ref() is view
    del view
    gc.collect()
    assert ref() is None
    other = x.view(np.float32, (8,), offset=32)
    probe.launch(other, 1, 1.0)
    probe.launch(other, 1, 1.0)
    assert [seen[0] for seen in probe.seen] == [x.ptr, x.ptr, x.ptr + 32, x.ptr + 32]


def test_a_buffer_freed_after_a_planned_launch_is_refused(probe: Probe) -> None:
    """Bug caught: the plan's epoch guard skipped: the freed address launched."""
    x = _buffer()
    probe.launch(x, 1, 1.0)
    probe.launch(x, 1, 1.0)
    x.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        probe.launch(x, 1, 1.0)
    assert len(probe.seen) == 2


def test_a_view_of_a_freed_buffer_is_refused(probe: Probe) -> None:
    x = _buffer()
    view = x.view(np.float32, (16,))
    probe.launch(view, 1, 1.0)
    x.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        probe.launch(view, 1, 1.0)
    assert len(probe.seen) == 1


def test_a_closed_stream_is_refused(probe: Probe) -> None:
    x, s = _buffer(), tc.Stream()
    probe.launch(x, 1, 1.0, stream=s)
    probe.launch(x, 1, 1.0, stream=s)
    s.close()
    with pytest.raises(tc.StreamClosedError, match="was closed"):
        probe.launch(x, 1, 1.0, stream=s)
    assert len(probe.seen) == 2


def test_another_stream_is_ordered_after_the_buffer_and_records_its_use(sim: SimDriver, probe: Probe) -> None:
    """Bug caught: the plan's stream guard skipped: a launch on a second stream neither waits for the buffer's home
    stream nor records the use its free must wait for."""
    x, s = _buffer(), tc.Stream()
    probe.launch(x, 1, 1.0)  # on x's home stream: nothing shared to record
    assert not probe.plan.shared
    sim.log.clear()
    probe.launch(x, 1, 1.0, stream=s)
    assert probe.plan.stream is not None
    assert probe.plan.stream() is s
    assert [ref() for ref in probe.plan.shared] == [x]
    assert x._uses.events
    assert x._uses.events[-1] is s._mark
    assert s.handle in x._ordered


def test_an_unloaded_module_is_refused(probe: Probe) -> None:
    x = _buffer()
    probe.launch(x, 1, 1.0)
    probe.function.module.unload()
    with pytest.raises(tc.UseAfterFreeError, match="unloaded"):
        probe.launch(x, 1, 1.0)


def test_a_buffer_of_another_device_is_refused(probe: Probe) -> None:
    x, there = _buffer(), tc.DeviceBuffer.allocate(256, device=tc.Device(1), ready=True)
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.WrongDeviceError, match="lives on device 1"):
        probe.launch(there, 1, 1.0)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (2**31, "does not fit an i32"),
        (-(2**31) - 1, "does not fit an i32"),
        (True, "expected an integer"),
        (1.0, "expected an integer"),
    ],
)
def test_a_bad_scalar_after_a_planned_launch_is_refused(probe: Probe, value: object, error: str) -> None:
    """Bugs caught: ``struct``'s range error not turned into the full path's (or an int packed wrapped), a bool or a
    float packed as an i32 (the exact-type test skipped)."""
    x = _buffer()
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match=error):
        probe.launch(x, value, 1.0)
    assert len(probe.seen) == 1


def test_a_lying_int_is_packed_as_its_true_value(probe: Probe) -> None:
    """An int subclass whose comparisons lie takes the full path (not its exact type), which packs its value."""

    class Liar(int):
        def __lt__(self, other: object) -> bool:
            return True

        def __le__(self, other: object) -> bool:
            return True

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    x = _buffer()
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match="does not fit"):
        probe.launch(x, Liar(2**40 + 5), 1.0)
    probe.launch(x, Liar(9), 1.0)
    assert probe.seen[-1][1] == 9
    assert len(probe.seen) == 2


def test_a_type_whose_metaclass_lies_is_not_taken_for_an_argument_kind(probe: Probe) -> None:
    """Objects whose class claims to equal ``int`` and ``DeviceBuffer`` (a metaclass ``__eq__``), and whose own
    ``__eq__`` claims to equal anything: refused, as on the full path. Bug caught: the plan's type test by equality,
    which let such an object through as an i32 (its ``__index__`` packed) or as the remembered buffer."""

    class Liar(type):
        def __eq__(cls, other: object) -> bool:
            return True

        __hash__ = type.__hash__

    class Fake(metaclass=Liar):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

        def __index__(self) -> int:
            return 5

    x = _buffer()
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match="must be a DeviceBuffer"):
        probe.launch(Fake(), 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match="expected an integer"):
        probe.launch(x, Fake(), 1.0)
    assert len(probe.seen) == 1


def test_a_raw_address_still_needs_unchecked(probe: Probe) -> None:
    """A plan remembers Tile memory only: an int address after a planned launch is refused without ``unchecked``."""
    x = _buffer()
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match="raw address"):
        probe.launch(x.ptr, 1, 1.0)
    probe.launch(x.ptr, 1, 1.0, unchecked=True)
    assert probe.plan.epoch == -1  # not remembered
    with pytest.raises(tc.LaunchArgumentError, match="raw address"):
        probe.launch(x.ptr, 1, 1.0)


def test_a_wrong_argument_count_is_refused(probe: Probe) -> None:
    x = _buffer()
    probe.launch(x, 1, 1.0)
    with pytest.raises(tc.LaunchArgumentError, match="3 kinds but 2 arguments"):
        tc.launch(probe.function, 1, 1, [x, 1], signature=SIG)
    with pytest.raises(tc.LaunchArgumentError, match="3 kinds but 4 arguments"):
        tc.launch(probe.function, 1, 1, [x, 1, 1.0, 1], signature=SIG)


def test_a_mutable_signature_gets_no_plan(sim: SimDriver) -> None:
    """A list signature may name other kinds at the next launch: it is checked every time, never planned."""
    vec_add = tc.Module.from_cubin(sm90_cubin()).function("vec_add")
    x = _buffer()
    signature = list(VEC_ADD_SIGNATURE)
    tc.launch(vec_add, 1, 1, [x, 64, 1] * 3, signature=signature)
    assert _plan.plan_for(vec_add, signature) is None
    signature[1] = "i64"
    with pytest.raises(tc.LaunchArgumentError, match="argument 1 is i64"):
        tc.launch(vec_add, 1, 1, [x, 64, 1] * 3, signature=signature)


def test_a_value_freeing_memory_while_it_is_converted_is_caught(probe: Probe) -> None:
    """A float argument's own ``__float__`` frees the buffer passed before it: the launch is refused, on the plan's
    path (converters run before its guards) and on the full path (rechecked when the epoch moved)."""
    x = _buffer()
    probe.launch(x, 1, 1.0)

    class Freeing(int):
        def __float__(self) -> float:
            if not x.closed:
                x.free()
            return 1.0

    with pytest.raises(tc.UseAfterFreeError, match="freed"):
        probe.launch(x, 1, Freeing(1))
    assert len(probe.seen) == 1


def test_a_value_freeing_memory_on_the_full_path_is_caught(probe: Probe) -> None:
    """The same on the full path alone (a list signature gets no plan): the pointer was checked live before the
    float argument freed it. Bug caught: no recheck after the packing moved the epoch."""
    y = _buffer()

    class Freeing(int):
        def __float__(self) -> float:
            if not y.closed:
                y.free()
            return 1.0

    with pytest.raises(tc.UseAfterFreeError, match="freed while the launch's arguments were packed"):
        tc.launch(probe.function, 1, 1, [y, 1, Freeing(1)], signature=list(SIG))
    assert not probe.seen


@pytest.mark.parametrize("signature", [SIG, ("ptr", "i32")])
@pytest.mark.parametrize("frees_at", [1, 2])
def test_a_sequence_whose_items_free_memory_is_read_once(
    sim: SimDriver, signature: tuple[str, ...], frees_at: int
) -> None:
    """Arguments in a sequence of the user's own, whose item access frees the buffer on its first (or second) read
    of the pointer: the launch is refused (or launches the buffer read live), never launches a freed buffer. Bugs
    caught: the plan's path taken for any sequence (it read the items after its epoch guard), and the full path
    reading the arguments again to remember them (after its checks)."""
    probe = Probe(sim, "probe_" + "_".join(signature), signature)
    items = [1, 1.0][: len(signature) - 1]
    x = _buffer()
    probe.launch(x, *items)
    reads = [0]

    class Sneaky(Sequence[object]):
        def __len__(self) -> int:
            return len(signature)

        def __getitem__(self, index: Any) -> Any:
            if index == 0:
                reads[0] += 1
                if reads[0] == frees_at and not x.closed:
                    x.free()
            return [x, *items][index]

    probe.at_launch.append(lambda: x.closed)
    if frees_at == 1:
        with pytest.raises(tc.UseAfterFreeError, match="was freed"):
            tc.launch(probe.function, 1, 1, Sneaky(), signature=signature)
        assert probe.answers == [[]]
    else:
        tc.launch(probe.function, 1, 1, Sneaky(), signature=signature)
        assert probe.answers == [[], [False]]


def test_the_plan_keeps_no_buffer_or_stream_alive(probe: Probe) -> None:
    """The plan holds its pointers, buffers and stream weakly: a buffer and a stream dropped after a launch are
    collected (and freed, closed)."""
    x, s = _buffer(), tc.Stream()
    probe.launch(x, 1, 1.0, stream=s)
    gone, closed = weakref.ref(x), weakref.ref(s)
    del x, s
    gc.collect()
    assert gone() is None
    assert closed() is None


def test_a_launch_while_the_block_is_in_use_packs_its_own(probe: Probe) -> None:
    """Bug caught: the busy flag ignored: a launch made while the block is being launched (a finalizer's) would
    overwrite the cells the outer launch's driver call has not read yet."""
    x = _buffer()
    probe.launch(x, 1, 1.0)
    plan = probe.plan
    before = bytes(plan.block)
    plan.busy = True
    try:
        probe.launch(x, 5, 2.0)
    finally:
        plan.busy = False
    assert bytes(plan.block) == before
    assert probe.seen[-1] == (x.ptr, 5, 2.0)
