"""Host guards: which partition index checks the compiler leaves to the launcher, and how a launcher evaluates them."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tile.compiler import Bound, HostGuard, KernelABI, Specialization, Target, failed_guard
from tile.compiler._kir import Block
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._typecheck import TypedKernel, typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
k: Any = importlib.import_module("tc_unit_kernels")

SHAPES = {"x": (1000, 64), "z": (512, 512)}
GRID = (4, 2, 1)


def check(fn: Any, **consts: Any) -> TypedKernel:
    return typecheck(resolve(parse(fn)), Specialization.make(consts=consts), Target("sm_90"))


def in_kernel_guards(block: Block) -> int:
    """Guard branches (a faulting store in the else region) anywhere in ``block``."""
    found = 0
    for op in block.ops:
        if op.name == "if" and any(inner.name == "store_ptr_tko" for inner in op.regions[1].ops):
            found += 1
        found += sum(in_kernel_guards(region) for region in op.regions)
    return found


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


def test_constant_index_is_checked_by_the_launcher() -> None:
    t = check(k.const_index, B=16)
    assert in_kernel_guards(t.ir.body) == 0
    (guard,) = t.abi.guards
    assert guard.bound == Bound("const", value=4)  # index 3: four tiles needed
    assert not guard.holds({"x": (48,)}, (1, 1, 1))
    assert guard.holds({"x": (49,)}, (1, 1, 1))


def test_loop_up_to_a_constant_is_checked_by_the_launcher() -> None:
    t = check(k.loop_to_const, B=16)
    assert in_kernel_guards(t.ir.body) == 0
    (guard,) = t.abi.guards
    assert guard.bound == Bound("const", value=4)


def test_loop_up_to_a_run_time_scalar_keeps_its_guard_in_the_kernel() -> None:
    t = check(k.loop_to_scalar, B=16)
    assert t.abi.guards == ()
    assert in_kernel_guards(t.ir.body) == 1


def test_unchecked_kernels_get_no_guards_at_all() -> None:
    k.k_loop.__tile_unchecked__ = True
    try:
        t = check(k.k_loop, B=16)
    finally:
        del k.k_loop.__tile_unchecked__
    assert t.abi.guards == ()
    assert in_kernel_guards(t.ir.body) == 0
