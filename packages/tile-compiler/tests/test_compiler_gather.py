"""``x.gather(i0, ..., padding=)`` in the type checker: the lowered IR is a masked ``load_ptr_tko`` whose address and
bounds mask are 64-bit, on the entry token; misuse is a compile error at the user's line (the CPU interpreter's
numerics are in tile-frontend's ``test_frontend_gather.py``)."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tile.compiler._diagnostics import CompileError
from tile.compiler._kir import Block, Op, Value
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import CompileOptions, Specialization, Target
from tile.compiler._typecheck import TypedKernel, typecheck
from tile.compiler._types import PtrType, TileType

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
kernels: Any = importlib.import_module("tc_corpus_gather")
bad: Any = importlib.import_module("tc_gather_bad")


def check(fn: Any, *, unchecked: bool = False, **consts: Any) -> TypedKernel:
    spec = Specialization.make(params={}, consts=consts, options=CompileOptions(unchecked=unchecked))
    return typecheck(resolve(parse(fn)), spec, Target("sm_90"))


def walk(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


def producers(t: TypedKernel) -> dict[int, Op]:
    return {r.id: op for op in walk(t.ir.body) for r in op.results}


def feeding(value: Value, made_by: dict[int, Op]) -> Iterator[Op]:
    """Every op whose result flows into ``value`` (its producer, transitively)."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        op = made_by.get(v.id)
        if op is None or id(op) in seen:
            continue
        seen.add(id(op))
        yield op
        for o in op.operands:
            todo += o if isinstance(o, list) else [o] if o is not None else []


def test_a_gather_is_a_masked_pointer_load_with_64_bit_bounds() -> None:
    t = check(kernels.gather_2d, B=16)
    made_by = producers(t)
    (load,) = [op for op in walk(t.ir.body) if op.name == "load_ptr_tko"]
    ptrs, mask, pad, token = load.operands
    assert isinstance(mask, Value)
    assert isinstance(pad, Value)
    assert mask.type == TileType(mask.type.elem, (16, 16))  # type: ignore[union-attr]  # a tile type
    compares = [op for op in feeding(mask, made_by) if op.name == "cmpi"]
    predicates = sorted(str(op.attrs["comparison_predicate"]) for op in compares)
    assert predicates == ["greater_than_or_equal"] * 2 + ["less_than"] * 2  # 0 <= i[d] < extent[d], two dims
    assert all(op.operands[0].type.elem.name == "i64" for op in compares)  # type: ignore[union-attr]  # tiles
    assert all(op.attrs["signedness"] == "signed" for op in compares)
    assert [op.name for op in feeding(mask, made_by)].count("andi") == 3  # two dims' ranges, then the two together
    assert made_by[pad.id].name in ("constant", "broadcast")
    (offset,) = [op for op in feeding(ptrs, made_by) if op.name == "offset"]  # type: ignore[arg-type]  # a Value
    assert offset.operands[1].type.elem.name == "i64"  # type: ignore[union-attr]  # a tile
    assert isinstance(offset.results[0].type.elem, PtrType)  # type: ignore[union-attr]  # a tile
    assert made_by[token.id].name == "make_token"  # type: ignore[union-attr]  # inputs read on the entry token
    assert load.attrs["memory_ordering_semantics"] == "weak"


def test_a_tuple_of_indices_and_an_int_index_broadcast() -> None:
    t = check(kernels.gather_tuple, B=8)
    (load,) = [op for op in walk(t.ir.body) if op.name == "load_ptr_tko"]
    assert load.results[0].type == TileType(load.results[0].type.elem, (8,))  # type: ignore[union-attr]  # tile
    assert load.operands[1] is not None  # masked


def test_the_callers_mask_narrows_the_bounds_mask() -> None:
    t = check(kernels.gather_masked, B=16)
    made_by = producers(t)
    (load,) = [op for op in walk(t.ir.body) if op.name == "load_ptr_tko"]
    mask = load.operands[1]
    assert isinstance(mask, Value)
    last = made_by[mask.id]
    assert last.name == "andi"  # bounds AND the caller's mask
    compares = [made_by[o.id].attrs.get("comparison_predicate") for o in last.operands if isinstance(o, Value)]
    assert "equal" in compares  # the caller's `i % 2 == 0`, ANDed last


def test_a_loop_that_only_gathers_from_an_input_carries_no_token() -> None:
    (loop,) = [op for op in check(kernels.window_sum, B=16).ir.body.ops if op.name == "for"]
    assert [str(r.type) for r in loop.results] == ["tile<16xf32>"]  # the sum only: inputs need no token chain
    (load,) = [op for op in walk(loop.regions[0]) if op.name == "load_ptr_tko"]
    assert load.operands[-1] not in loop.regions[0].args  # the entry token, from outside the loop


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ("float_index", "index 0 of x.gather() must be an integer tile, got f32 tile of shape (8,)"),
        ("bool_index", "index 0 of x.gather() must be an integer tile, got i1 tile of shape (8,)"),
        ("too_few", "x.gather() takes one index tile per dim of 'x' (2), got 1"),
        ("too_many", "x.gather() takes one index tile per dim of 'x' (1), got 2"),
        ("from_output", "'z' is a Mut output: other blocks may be writing any element of it"),
        ("float_padding_int", "padding= of x.gather() must be an int constant for a i32 tensor, got 0.5"),
        ("bool_padding", "padding= of x.gather() must be a float or int constant for a f32 tensor, got True"),
        ("tile_padding_dtype", "padding= of x.gather() must be a constant or a f32 tile"),
        ("no_broadcast", "the index tiles of x.gather() must broadcast together, got shapes (8,), (16,)"),
        ("bad_keyword", "x.gather() takes the index tiles, padding= and mask=, got the keyword 'latency'"),
        ("int_mask", "the mask must be a bool tile (a comparison)"),
        ("cutile_spelling", "in a safe kernel, read an input at index tiles with the checked x.gather(i0, ..."),
    ],
)
def test_gather_misuse_points_at_the_line(kernel: str, message: str) -> None:
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(getattr(bad, kernel), B=8)
    (number,) = [
        i
        for i, text in enumerate((CORPUS / "tc_gather_bad.py").read_text().splitlines(), 1)
        if text.endswith(f"# {kernel}")
    ]
    assert f"tc_gather_bad.py:{number}:" in str(info.value)


def test_an_output_gather_is_refused_in_unchecked_kernels_too() -> None:
    with pytest.raises(CompileError, match=re.escape("would race; outputs are read and written only through")):
        check(bad.from_output, unchecked=True, B=8)
