"""Review 34: an adversarial look, from safe code only (no ``unchecked=True``), at what was merged on the day of
reviews 30-33: tile.core's compiled checked launch (``_fastcore.c``) and its generated plan launcher (``_plancode``),
on tile.core's simulator, each case on both launch paths (pure Python and compiled). Each hole's test names it and
failed before its fix.

Hole found and fixed:

- A launch plan's parameter block rewritten under a launch between its checks and its driver call. The compiled hit
  (``_fastcore.c``) checked the plan (epoch, stream, not ``busy``, each pointer the remembered object, each scalar
  the remembered object) and only then allocated (the driver's argument tuple) and called Python (``driver()``) before
  it set ``busy`` for the driver call. A garbage collection at that allocation runs finalizers on this thread, and
  ``use_lock`` is re-entrant: a finalizer's launch of the same function with other buffers took the full path, whose
  ``remember`` wrote its own pointers into the plan's block (the plan was not busy), and the outer launch then ran
  with the finalizer's buffer in place of its own (a kernel writing memory its arguments did not name, with no use
  recorded for it); a finalizer's launch of the same buffers with other scalars packed them into the cells, and the
  outer launch ran with those. The plan is now claimed (``busy``) from its guard to the driver call on both paths
  (the generated code sets it right after the guard, the C code right after testing it), so a launch made in that
  window takes the full path with its own block and ``remember`` leaves a busy plan's block alone. (The pure path's
  generated code had the same gap, between its guard and ``busy``, but allocated there only for a tuple of new scalar
  objects, which the tuple free list served without a collection in every probe: it is closed the same way.)

Tried and found solid (read or probed, not kept as tests): the argument list mutated by another thread between the
C identity checks and the packing (the C code reads every item once, holding its own references, before anything
that allocates); int subclasses, bools and huge ints as scalars (``PyLong_CheckExact``/``type is int`` send them to
the full path, whose converters refuse or range-check them); a remembered pointer collected and its id reused (the
plan compares the weak reference's referent by identity, None once collected); a buffer freed by a finalizer inside
a launch's window (its release waits until this thread lets ``use_lock`` go: ``_reaper.inside_use``).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core import _compiled, _launch
from tile.core._stream import use_lock
from tile.core.testing import SimDriver, SimKernel, sm90_cubin

SIG = ("ptr", "i32", "i64")
Launch = Callable[..., None]


@pytest.fixture(params=["pure", "compiled"])
def launch(request: pytest.FixtureRequest) -> Launch:
    if request.param == "pure":
        return _launch.launch
    if _compiled.compiled_launch is None:
        if os.environ.get("TILE_REQUIRE_EXTENSION") == "1" and not os.environ.get(_compiled.PURE_ENV):
            pytest.fail(f"the compiled launch is required: {_compiled.reason}")
        pytest.skip(_compiled.reason)
    return _compiled.compiled_launch


class _Bomb:
    """Cyclic garbage whose finalizer launches ``run`` (as any finalizer may launch: tile.core allows it)."""

    def __init__(self, run: Callable[[], None], inside: list[bool]) -> None:
        self.run, self.inside, self.me = run, inside, self

    def __del__(self) -> None:
        self.inside.append(bool(use_lock._is_owned()))  # type: ignore[attr-defined]  # RLock's own test
        self.run()


@pytest.mark.parametrize("other", ["other buffer", "other scalars"])
def test_a_finalizers_launch_does_not_rewrite_the_block_of_a_launch_in_its_window(
    sim: SimDriver, launch: Launch, other: str
) -> None:
    """A collection at an allocation between a plan launch's checks and its driver call runs a finalizer that
    launches the same function (other buffer, or same buffer with other scalars): each launch runs its own values.
    The collection's place is swept with the collector's threshold, so some run lands in the window."""
    seen: list[tuple[Any, ...]] = []

    def body(values: tuple[Any, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
        seen.append(values)
        return [], lambda: None

    sim.add_kernel(SimKernel("probe_r34", list(SIG), body))
    function = tc.Module.from_cubin(sm90_cubin()).function("probe_r34")
    x = tc.DeviceBuffer.from_host(np.zeros(64, np.float32))
    y = tc.DeviceBuffer.from_host(np.zeros(64, np.float32), stream=x.stream)
    stream = x.stream
    theirs = [y, 5, 6] if other == "other buffer" else [x, 5, 6]
    inside: list[bool] = []
    old = gc.get_threshold()
    for threshold in range(1, 12):
        ours = [x, 1, 2**40 + threshold]  # planned by the first two launches: the third is the plan's hit
        launch(function, 1, 1, [x, 1, 2], stream=stream, signature=SIG)
        launch(function, 1, 1, ours, stream=stream, signature=SIG)
        stream.synchronize()
        seen.clear()
        gc.collect()
        _Bomb(lambda: launch(function, 1, 1, theirs, stream=stream, signature=SIG), inside)
        gc.set_threshold(threshold)
        try:
            launch(function, 1, 1, ours, stream=stream, signature=SIG)
        finally:
            gc.set_threshold(*old)
        gc.collect()
        stream.synchronize()
        assert sorted(seen) == sorted([(x.ptr, 1, 2**40 + threshold), (theirs[0].ptr, 5, 6)]), threshold
    assert any(inside), "no collection landed inside a launch: the sweep does not test the window"
    x.free()
    y.free()
