"""Pointer tiles go only where the spec takes them: every op of the catalog is walked, every numeric tile operand
and result of its sample turned into a pointer tile one at a time, and the verifier must refuse the pointer unless
the op's side is in the spec's short list (pointer casts and accesses, data movement, control flow, assume, print).
An op added to the catalog without a sample fails here; one added without a `POINTERS` entry takes numbers only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_samples import SAMPLES, build_sample
from tile.ir import LATEST, Module, Operation, ScalarType, TileType, Value, f32, ptr, verify_problems
from tile.ir._verify_elements import POINTERS
from tile.ir.ops import CATALOG

# The ops whose spec signature takes a pointer tile (or any tile) somewhere, and where: kept apart from
# `POINTERS` so that widening the verifier's table is a visible decision here too.
SPEC_POINTER_SIDES = {
    "offset": {"ptr", "results"},
    "load_ptr_tko": {"source"},
    "store_ptr_tko": {"destination"},
    "atomic_rmw_tko": {"pointers"},
    "atomic_cas_tko": {"pointers"},
    "int_to_ptr": {"results"},
    "ptr_to_int": {"source"},
    "ptr_to_ptr": {"source", "results"},
    "get_global": {"results"},
    "alloca": {"results"},
    "make_tensor_view": {"base"},
    "assume": {"value", "results"},
    "select": {"val_if_true", "val_if_false", "results"},
    "broadcast": {"source", "results"},
    "reshape": {"source", "results"},
    "permute": {"source", "results"},
    "extract": {"source", "results"},
    "cat": {"lhs", "rhs", "results"},
    "insert": {"source", "destination", "results"},
    "print_tko": {"args"},
    **{name: {"operands", "initValues", "results"} for name in ("if", "for", "loop", "yield", "continue", "break")},
}


def test_the_verifiers_pointer_table_is_the_spec_list() -> None:
    assert {op: set(sides) for op, sides in POINTERS.items()} == SPEC_POINTER_SIDES


def test_every_op_of_the_catalog_has_a_sample_to_mutate() -> None:
    assert sorted(set(CATALOG) - set(SAMPLES)) == []


def _sides(op: Operation) -> Iterator[tuple[str, int]]:
    """(side, position) of each numeric tile value of `op`: operand groups by name, then results."""
    for index, spec in enumerate(CATALOG[op.name].operands):
        start = sum(op.segments[:index])
        for offset in range(op.segments[index]):
            yield spec.name, start + offset
    for position in range(len(op.results)):
        yield "results", position


def _value(op: Operation, side: str, position: int) -> Value:
    return op.results[position] if side == "results" else op.operands[position]


def _mutations() -> Iterator[tuple[str, str, int]]:
    for name in sorted(CATALOG):
        op = _target(build_sample(name, LATEST), name)
        for side, position in _sides(op):
            t = _value(op, side, position).type
            if isinstance(t, TileType) and isinstance(t.element, ScalarType):
                yield name, side, position


def _target(module: Module, name: str) -> Operation:
    return [op for fn in module.functions for op in fn.walk() if op.name == name][-1]


def _allowed(name: str, side: str) -> bool:
    sides = SPEC_POINTER_SIDES.get(name, set())
    return side in sides or (side != "results" and "operands" in sides)


MUTATIONS = list(_mutations())


def test_the_walk_reaches_every_op_with_a_numeric_tile() -> None:
    reached = {name for name, _, _ in MUTATIONS}
    assert {"addf", "bitcast", "reduce", "mmaf", "pack", "iota", "cmpi", "fpowi", "select", "offset"} <= reached
    assert len(reached) > 80


@pytest.mark.parametrize(("name", "side", "position"), MUTATIONS, ids=[f"{n}-{s}-{p}" for n, s, p in MUTATIONS])
def test_a_pointer_tile_verifies_only_where_the_spec_takes_one(name: str, side: str, position: int) -> None:
    module = build_sample(name, LATEST)
    op = _target(module, name)
    value = _value(op, side, position)
    assert isinstance(value.type, TileType)
    value.type = value.type.with_element(ptr(f32))
    what = "result" if side == "results" else f"operand '{side}'"
    refused = f"{name} does not take pointer tiles ({what} is {value.type})"
    problems = verify_problems(module, LATEST)
    if _allowed(name, side):
        assert not any(refused in p for p in problems), problems
    else:
        assert any(f"'{name}'" in p and refused in p for p in problems), problems
