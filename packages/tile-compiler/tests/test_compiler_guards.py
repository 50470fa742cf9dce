"""Host guards: how a launcher evaluates the index checks the compiler left to it (which ones it leaves:
``test_compiler_typecheck``)."""

from __future__ import annotations

import json

import pytest

from tile.compiler import Bound, HostGuard, KernelABI, failed_guard

SHAPES = {"x": (1000, 64), "z": (512, 512)}
GRID = (4, 2, 1)


@pytest.mark.parametrize(
    ("bound", "value"),
    [
        (Bound("count", "x", (128, 16), 0), 8),  # cdiv(1000, 128)
        (Bound("count", "x", (128, 16), 1), 4),
        (Bound("grid", dim=0), 4),
        (Bound("grid", dim=2), 1),
        (Bound("const", value=7), 7),
    ],
)
def test_bounds_evaluate_from_extents_and_grid(bound: Bound, value: int) -> None:
    assert bound.evaluate(SHAPES, GRID) == value
    assert Bound.from_json(json.loads(json.dumps(bound.to_json()))) == bound


def test_a_guard_holds_exactly_when_the_bound_fits_the_tile_count() -> None:
    fits = HostGuard(Bound("grid", dim=0), "x", (250, 64), 0, " at k.py:3:5")  # 4 blocks, cdiv(1000, 250) = 4 tiles
    too_many = HostGuard(Bound("grid", dim=0), "x", (334, 64), 0, " at k.py:3:5")  # 4 blocks, cdiv(1000, 334) = 3 tiles
    assert fits.holds(SHAPES, GRID)
    assert not too_many.holds(SHAPES, GRID)
    assert failed_guard([fits, too_many], SHAPES, GRID) is too_many
    assert failed_guard([fits], SHAPES, GRID) is None
    message = too_many.explain(SHAPES, GRID)
    assert "x.partition((334, 64)) along dim 0 at k.py:3:5" in message
    assert "tile indices up to 3 (the launch grid has 4 block(s) along x)" in message
    assert "x of shape (1000, 64) has only 3 tile(s) along dim 0" in message
    assert HostGuard.from_json(json.loads(json.dumps(too_many.to_json()))) == too_many


def test_abi_without_guards_reads_back_from_an_older_cache_entry() -> None:
    abi = KernelABI("k", ())
    data = abi.to_json()
    del data["guards"]
    assert KernelABI.from_json(data) == abi


def test_a_constant_index_guard_names_the_index() -> None:
    """A constant bound is one past the largest index used. Mutant killed (scripts/mutation.py): the message
    printing value + 1 (or value) instead of the index."""
    guard = HostGuard(Bound("const", value=9), "x", (128, 64), 0, " at k.py:4:9")  # index 8, cdiv(1000, 128) = 8
    assert not guard.holds(SHAPES, GRID)
    message = guard.explain(SHAPES, GRID)
    assert "the constant index is 8" in message
    assert "x of shape (1000, 64) has only 8 tile(s) along dim 0" in message


def test_a_grid_bound_past_a_short_grid_is_one_block() -> None:
    """A grid given with fewer than three axes has one block along each missing axis (as CUDA's launch does).
    Mutants killed (scripts/mutation.py): ``dim < len(grid)`` into ``<=`` (an IndexError) and the missing axis
    counted as 2 blocks."""
    assert Bound("grid", dim=1).evaluate(SHAPES, (4,)) == 1
    assert Bound("grid", dim=2).evaluate(SHAPES, (4, 2)) == 1
    assert Bound("grid", dim=0).evaluate(SHAPES, (4,)) == 4
