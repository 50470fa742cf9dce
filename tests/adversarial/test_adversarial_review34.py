"""Review 34: an adversarial look, from safe code only (no ``unchecked=True``), at what was merged on the day of
reviews 30-33: tile.core's compiled checked launch (``_fastcore.c``) and its generated plan launcher (``_plancode``),
on tile.core's simulator, and the compile-time globals of kernels (``tile.compiler._captures``), on the CPU
interpreter; each case on both launch paths (pure Python and compiled). Each hole's test names it and failed before
its fix.

Holes found and fixed:

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

- A compile-time enum global rebound to a member of another enum class of the same name (``MODE = Other.DOUBLE``,
  which ``MODE == Mode.DOUBLE`` tells apart in Python): the value key named a member by class name and member name
  only, so both launch paths adopted it as an equal value, and a recompile found the old kernel under the same cache
  key: the kernel kept the old branch. An adopted value must now hold the very same enum members, and the cache key
  numbers the enum classes a kernel reads (in read order: stable across processes, no module name). Not memory
  safety (the stale kernel is self-consistent, its checks from its own ABI), but the rule's promise that a changed
  value recompiles. Also: an ``IntEnum`` member is a number in a kernel, but its key lacked its value, so the class
  edited in another file keyed alike and a later process took the disk cache's kernel of the old value; the member's
  own value is in its key (and the source fingerprint) now.

Tried and found solid (read or probed, not kept as tests): the argument list mutated by another thread between the
C identity checks and the packing (the C code reads every item once, holding its own references, before anything
that allocates); int subclasses, bools and huge ints as scalars (``PyLong_CheckExact``/``type is int`` send them to
the full path, whose converters refuse or range-check them); a remembered pointer collected and its id reused (the
plan compares the weak reference's referent by identity, None once collected); a buffer freed by a finalizer inside
a launch's window (its release waits until this thread lets ``use_lock`` go: ``_reaper.inside_use``), and a stream
closed there (refused, StateError); a duck-typed function object whose ``_launch_plan`` is forged (private state, not
safe code). Keep-alive (``_keepalive``): the use mark is one event per stream re-recorded by every use, so a later
record only delays the release; captures record nothing and hold nothing (the graph's owner keeps its memory); a
failing query keeps the objects for good. PDL: every memory token chain starts at the entry's ``gdc_wait_tko``
(view loads and stores, the raw chain of unchecked kernels, helpers inlined into the same chains); the only memory
op not chained to it is a failed index guard's fault store to an address never mapped; ``print_tko`` touches no
kernel memory; the launcher passes ``pdl`` only for a kernel whose ABI says it waits. Compile-time values: str, int,
tuple and frozenset subclasses are refused (exact classes only), so no ``__eq__``/``__hash__`` of the user's runs in
the check. Left open (correctness, not memory safety): a global rebound by another thread between ``captures_of``
and the compile (the reads are recorded, then the compiler reads the globals again) could pair a kernel of the new
value with a record of the old one.
"""

from __future__ import annotations

import enum
import gc
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_source  # type: ignore[import-untyped, unused-ignore]  # a sibling module

import tile.core as tc
import tile.frontend as tile
from tile.compiler._captures import captures
from tile.compiler._fingerprint import source_fingerprint
from tile.core import _compiled, _launch
from tile.core._stream import use_lock
from tile.core.testing import SimDriver, SimKernel, sm90_cubin
from tile.frontend import f32

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
    theirs: list[Any] = [y, 5, 6] if other == "other buffer" else [x, 5, 6]
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


# -- hole: a compile-time enum global rebound to a member of another class of the same name ---------------------------

ENUM_SOURCE = """
import enum

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


class Mode(enum.Enum):
    DOUBLE = 1
    NEGATE = 2


MODE = Mode.DOUBLE
WIDTH = 3  # an IntEnum member in the tests: a number in the kernel


@tile.entry
def by_mode(z: Mut[Tensor[f32, ("BM",)]], x: Tensor[f32, (-1,)]):
    t = tile.load_tile_like(x, z)
    z.store(t * 2.0 if MODE == Mode.DOUBLE else -t)


@tile.entry
def fill_width(z: Mut[Tensor[f32, ("BM",)]]):
    z.store(tile.full((BM,), WIDTH, f32))
"""


@pytest.fixture
def enums(tmp_path: Path) -> Any:
    tile.set_backend("cpu")
    module: Any = load_source("review34_enums", ENUM_SOURCE, tmp_path)
    return module


def _run(kernel: Any, *inputs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = tile.zeros(f32, [16]).partition([8])
    host: np.ndarray[Any, Any] = kernel(out, *(tile.from_numpy(x) for x in inputs)).sync()[0].unpartition().to_numpy()
    return host


def test_an_enum_global_rebound_to_another_classs_member_recompiles(enums: Any, path: str) -> None:
    """``MODE = Other.DOUBLE``, a member of another enum class named ``Mode`` (``MODE == Mode.DOUBLE`` is False in
    Python): both launch paths adopted it as an equal value (same key text ``eMode.DOUBLE``) and, recompiled, the
    compile cache's key was the same too: the kernel went on doubling. Now the member must be the very same object
    to be adopted, and the key numbers the enum classes a kernel reads."""
    x = np.arange(16, dtype=np.float32) + 0.25
    np.testing.assert_array_equal(_run(enums.by_mode, x), 2 * x)
    np.testing.assert_array_equal(_run(enums.by_mode, x), 2 * x)  # the plan's path
    other: Any = enum.Enum("Mode", ["DOUBLE", "NEGATE"])  # type: ignore[misc]  # another class of the same name
    assert other.DOUBLE != enums.Mode.DOUBLE
    enums.MODE = other.DOUBLE
    np.testing.assert_array_equal(_run(enums.by_mode, x), -x)
    np.testing.assert_array_equal(_run(enums.by_mode, x), -x)
    enums.MODE = enums.Mode.DOUBLE
    np.testing.assert_array_equal(_run(enums.by_mode, x), 2 * x)


def test_an_enum_members_value_is_in_the_compile_cache_key(enums: Any) -> None:
    """An ``IntEnum`` member is a number in the kernel, but the cache key (and the source fingerprint) named it by
    class and member only: the class edited in another file (``A = 3`` to ``A = 5``) keyed alike, so a later process
    took the disk cache's kernel of the old value. The member's own value is in its key now."""
    before: Any = enum.IntEnum("Width", {"A": 3})  # type: ignore[misc]  # named as the class
    after: Any = enum.IntEnum("Width", {"A": 5})  # type: ignore[misc]  # the class as edited
    keys, prints = [], []
    for width in (before.A, after.A):
        enums.WIDTH = width
        keys.append(captures(enums.fill_width.fn).key())
        prints.append(source_fingerprint(enums.fill_width.fn))
        assert _run(enums.fill_width)[0] == int(width)
    assert keys[0] != keys[1]
    assert prints[0] != prints[1]
