"""Review 22: an adversarial look, from safe code only, at the decisions cached across calls that were merged last:
tile.core's checked-launch plan (``tile.core._plan.LaunchPlan``), and tile.frontend's call sites cached by (code
object, ``f_lasti``) and its one-hold release of a ``.then()`` chain (``_fastlaunch.release_links``). Each hole's test
names it and failed before its fix.

Holes found and fixed:

- A planned launch whose scalars ``struct`` refused (an int out of its kind's range, the full path then raising
  `LaunchArgumentError`) had already packed the scalars before the bad one into the reusable block, and left the
  ids of the last planned launch's arguments remembered: relaunching those very objects matched the ids and sent the
  half-overwritten cells, values the user never passed for this launch (a length of the refused call: the simulated
  kernel wrote past its buffer). A refused pack now forgets the ids.
- A buffer freed explicitly (``free()`` or ``with``: safe code) by a finalizer the garbage collector ran at one of a
  launch's allocations after its checks (the plan's ``ids`` list, the full path's parameter block, event records)
  released the memory at once: the launch, its checks passed, then ran on freed memory, and its use, recorded after
  the free, ordered nothing (planned and full paths alike; the sim saw the free overtake the kernel). A free asked
  for while this thread already holds ``use_lock`` (inside another use's window) now marks the buffer freed and bumps
  the epoch at once, and releases the memory once the lock is let go, after that use is enqueued and recorded.
- Likewise a ``Stream.close()`` from such a finalizer destroyed the stream the launch then enqueued on (a destroyed
  handle, which the driver may give to a new stream). Refused now with `StateError` (the stream left open); a close
  before the launch's checks still makes them refuse the launch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import fire_at_collection

import tile.core as tc
from tile.core import _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver


def _floats(n: int, value: float = 0.0) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.full(n, value, np.float32))


# -- hole: a refused pack left the last launch's ids remembered over half-written cells ------------------------------


def test_a_pack_refused_midway_does_not_leave_its_cells_for_the_last_launchs_objects(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Hole: ``struct`` packs the cells in order, so a refused ``sz`` left the refused call's ``nz`` (128) in the
    block; the ids of the last planned launch's arguments were still remembered, so relaunching those objects sent
    nz=128 for a 32-element ``z`` (written past its end)."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
    args: list[Any] = [x, 32, 1, y, 32, 1, z, 32, 1]
    for _ in range(2):  # the full path remembers the pointers; the planned launch remembers the arguments' ids
        tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE)
    refused = [x, 32, 1, y, 32, 1, z, 128, 2**40]
    with pytest.raises(tc.LaunchArgumentError, match=r"does not fit an i32 parameter"):
        tc.launch(vec_add, 1, 1, refused, signature=VEC_ADD_SIGNATURE)
    seen: list[tuple[int, ...]] = []
    kernel = sim.kernels["vec_add"]
    body = kernel.body

    def spy(values: tuple[int, ...], grid: tuple[int, int, int]) -> Any:
        seen.append(values)
        return body(values, grid)

    kernel.body = spy
    try:
        tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE)
    finally:
        kernel.body = body
    assert [v[1:] for v in (seen[0][0:3], seen[0][3:6], seen[0][6:9])] == [(32, 1)] * 3
    out = np.zeros(32, np.float32)
    z.copy_to(out)
    assert (out == 3.0).all()
    for buffer in (x, y, z):
        buffer.free()


# -- hole: a free from a finalizer the collector ran between a launch's checks and its enqueue -----------------------


def _launch_at_allocation(n: int, launch: Callable[[], None], fire: Callable[[], None]) -> bool:
    """Run ``launch`` with ``fire`` run by a finalizer at its ``n``-th collection; whether ``launch`` was refused."""
    try:
        with fire_at_collection(n, fire):
            launch()
    except (tc.UseAfterFreeError, tc.StreamClosedError):
        return True
    return False


@pytest.mark.parametrize("planned", [True, False])
def test_a_free_by_a_finalizer_run_inside_a_launch_waits_for_the_launch(
    sim: SimDriver, vec_add: tc.Function, planned: bool
) -> None:
    """Hole: ``x.free()`` from a finalizer the collector ran after the launch's checks freed the memory before the
    kernel (enqueued next, on a stream the free did not wait for) ran on it. Each collection point of the launch is
    tried in turn; those after the checks must launch and free after the kernel."""
    other = tc.Stream()
    launched = 0
    for n in range(1, 60):
        x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
        args: list[Any] = [x, 32, 1, y, 32, 1, z, 32, 1]
        if planned:  # the plan remembers these pointers, then takes the launch
            for _ in range(2):
                tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)

        def launch(args: list[Any] = args) -> None:
            tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=other)

        refused = _launch_at_allocation(n, launch, x.free)
        if not x.closed:  # the launch made fewer collections: every point was tried
            x.free()
            break
        launched += not refused
        x.stream.synchronize()  # the free first where it was not ordered after the kernel
        other.synchronize()
        _reaper.drain()
        assert sim.bugs == [], f"collection {n}: {sim.bugs}"
        for buffer in (y, z):
            buffer.free()
    assert n > 5, "the finalizer never ran inside the launch"
    assert launched > 0, "no collection came after the launch's checks"


def test_a_close_by_a_finalizer_run_inside_a_launch_is_refused(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``stream.close()`` from a finalizer the collector ran after a launch's checks destroyed the stream the
    launch then enqueued on (a destroyed handle, which the driver may already have given to another stream). Such a
    close is refused now (`StateError`, the stream left open), or comes before the checks, which refuse the launch."""
    enqueue = sim.cuLaunchKernel
    on_destroyed: list[int] = []

    def checked_launch(*call: Any) -> Any:  # the driver's view: a launch onto a stream already destroyed
        if ("stream_destroy", int(call[8])) in sim.log:
            on_destroyed.append(int(call[8]))
        return enqueue(*call)

    sim.cuLaunchKernel = checked_launch  # type: ignore[method-assign,assignment]  # before the plan reads it
    launched, fired, refusals = 0, [0], []
    for n in range(1, 60):
        x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
        args: list[Any] = [x, 32, 1, y, 32, 1, z, 32, 1]
        stream = tc.Stream()
        for _ in range(2):
            tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=stream)

        def launch(args: list[Any] = args, stream: tc.Stream = stream) -> None:
            tc.launch(vec_add, 1, 1, args, signature=VEC_ADD_SIGNATURE, stream=stream)

        def close(stream: tc.Stream = stream) -> None:
            fired[0] += 1
            try:
                stream.close()
            except tc.StateError as error:
                refusals.append(str(error))

        before = fired[0]
        refused = _launch_at_allocation(n, launch, close)
        if fired[0] == before:  # the launch made fewer collections than n: every point was tried
            break
        assert on_destroyed == [], f"collection {n}: launched on a destroyed stream"
        launched += not refused
        stream.close()
        for buffer in (x, y, z):
            buffer.free()
    assert launched > 0, "no collection came after the launch's checks"
    assert refusals, "no close was made inside the launch"
    assert all("inside another use" in refusal for refusal in refusals), refusals
