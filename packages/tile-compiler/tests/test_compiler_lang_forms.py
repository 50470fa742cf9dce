"""Forms the ports of peer kernels need (issue 14 item 5) and the ordering of atomics in ``while`` conditions: the
typed IR each form emits, and the compile errors for its misuse at the user's line. Numerics are in the corpus
(``corpus/tc_corpus_forms.py``), run by the interpreter and GPU corpus tests."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tile.compiler._diagnostics import CompileError
from tile.compiler._kir import Block, Op
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import CompileOptions, Specialization, Target
from tile.compiler._typecheck import TypedKernel, typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
forms: Any = importlib.import_module("tc_corpus_forms")
bad: Any = importlib.import_module("tc_forms_bad")


def check(fn: Any, *, unchecked: bool = False, **consts: Any) -> TypedKernel:
    spec = Specialization.make(params={}, consts=consts, options=CompileOptions(unchecked=unchecked))
    return typecheck(resolve(parse(fn)), spec, Target("sm_90"))


def walk(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


# -- an atomic in a while condition (issue 14, item 6a) -------------------------------------------------------------
def test_an_atomic_in_a_while_condition_orders_what_follows_the_loop() -> None:
    t = check(forms.spin_lock_sum, unchecked=True, B=128)
    ops = t.ir.body.ops
    loop = next(op for op in ops if op.name == "loop")
    cas = next(op for op in walk(loop.regions[0]) if op.name == "atomic_cas_tko")
    cas_token = cas.results[1]
    # The exit carries the tokens after the condition's atomic, not those the iteration started with ...
    (brk,) = [op for op in walk(loop.regions[0]) if op.name == "break"]
    carried = brk.operands[0]
    assert isinstance(carried, list)
    assert carried
    assert all(v is cas_token for v in carried)
    # ... and the read-modify-write after the loop continues from the loop's results (acquire), as does the release.
    after = ops[ops.index(loop) + 1 :]
    gather = next(op for op in after if op.name == "load_ptr_tko")
    assert gather.operands[-1] in loop.results
    release = next(op for op in after if op.name == "atomic_rmw_tko")
    joined = next(op for op in after if op.name == "join_tokens")
    assert release.operands[-1] is joined.results[0]
    joined_tokens = joined.operands[0]
    assert isinstance(joined_tokens, list)
    assert loop.results[0] in joined_tokens


# -- dtype comparisons ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "op"), [("f32", "exp"), ("f16", "negf")])
def test_dtype_equality_is_a_compile_time_bool(dtype: str, op: str) -> None:
    spec = Specialization.make(consts={"B": 64}, dtypes={"T": dtype})
    t = typecheck(resolve(parse(forms.generic_dtype_branch)), spec, Target("sm_90"))
    names = [o.name for o in walk(t.ir.body)]
    assert "if" not in names
    assert op in names
    assert ({"exp", "negf"} - {op}).isdisjoint(names)


@pytest.mark.parametrize(
    ("kernel", "message", "line"),
    [
        ("dtype_vs_tile", "cannot compare f32 tile of shape (64,) with dtype", "if t == tile.f32"),
        ("dtype_ordered", "can only be compared with '==' or '!='", "if t.dtype < tile.f32"),
        ("in_runtime", "'in' works on compile-time values only", "if tile.block_id()[0] in (0, 1)"),
    ],
)
def test_dtype_comparison_misuse_points_at_the_line(kernel: str, message: str, line: str) -> None:
    fn = getattr(bad, kernel)
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(fn, B=64)
    assert line in str(info.value)


# -- batch broadcasting in matmul / mma -------------------------------------------------------------------------------
def test_a_broadcast_batch_is_made_explicit_for_tile_ir() -> None:
    t = check(forms.batch_broadcast_matmul, BB=2, F=16, X=32)
    mmas = [op for op in walk(t.ir.body) if op.name == "mmaf"]
    assert len(mmas) == 2
    for op in mmas:
        shapes = [v.type.shape for v in op.operands]  # type: ignore[union-attr]
        assert shapes == [(2, 16, 16), (2, 16, 32), (2, 16, 32)]


@pytest.mark.parametrize(
    ("kernel", "message", "line"),
    [
        ("batch_clash", "the batch dims of a (2, 16, 16) and b (4, 16, 16) do not broadcast", "z.store(a @ b)"),
        ("vector_matmul", "reshape a vector to (1, K)", "z.store(a @ b)"),
        ("acc_batch_clash", "do not broadcast into acc batch ()", "z.store(tile.mma(a, b"),
        ("four_dims", "takes 2-D (M, K) or 3-D (batch, M, K) tiles", "z.store(a @ a)"),
    ],
)
def test_matmul_batch_misuse_points_at_the_line(kernel: str, message: str, line: str) -> None:
    fn = getattr(bad, kernel)
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(fn, B=16)
    assert line in str(info.value)


# -- tuples carried through loops and branches ------------------------------------------------------------------------
def test_a_carried_tuple_is_flattened_into_the_loop_values() -> None:
    t = check(forms.tuple_carried, BM=16, BN=32)
    loops = [op for op in t.ir.body.ops if op.name in ("for", "loop")]
    assert [op.name for op in loops] == ["for", "loop", "loop"]
    first, spin, broken = loops
    assert [str(r.type) for r in first.results] == ["tile<16xf32>", "tile<16xi32>"]
    assert [str(r.type) for r in spin.results] == ["tile<i32>", "tile<i32>"]
    assert [str(r.type) for r in broken.results] == ["tile<i32>", "tile<i32>", "tile<f32>"]  # iv, then the tuple


@pytest.mark.parametrize(
    ("kernel", "message", "line"),
    [
        ("tuple_to_single", "variable 's' is a tuple of 2 at the start of the loop or branch but", "s = s[0]"),
        (
            "tuple_grows",
            "is a tuple of 2 at the start of the loop or branch but a tuple of 3 here",
            "s = (s[0], s[1], 2.0)",
        ),
        ("tuple_with_a_tensor", "'s' is a tuple holding a tensor parameter and cannot be reassigned", "for _ in"),
        ("tuple_leaf_changes_type", "variable 's' changes type: it is tile<i32>", "s = (s[0], tile.zeros"),
        (
            "branches_disagree",
            "variable 's' is a tuple of 2 at the start of the loop or branch but a tuple of 3",
            "if tile.block_id()[0] == 0:",
        ),
    ],
)
def test_carried_tuple_misuse_points_at_the_line(kernel: str, message: str, line: str) -> None:
    fn = getattr(bad, kernel)
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(fn, B=16)
    assert line in str(info.value)


# -- tile.reduce / tile.scan over several tiles -----------------------------------------------------------------------
def test_a_reduce_over_a_tuple_is_one_reduce_op_with_one_region() -> None:
    t = check(forms.reduce_pairs, BM=16, N=64)
    (red,) = [op for op in walk(t.ir.body) if op.name == "reduce"]
    (scan,) = [op for op in walk(t.ir.body) if op.name == "scan"]
    for op, identities in ((red, [3.0e38, 2**31 - 1]), (scan, [-3.0e38, 2**31 - 1])):
        assert [str(r.type) for r in op.results][1:] in (["tile<16xi32>"], ["tile<16x64xi32>"])
        assert op.attrs["identities"] == identities
        (region,) = op.regions
        assert [str(a.type) for a in region.args] == ["tile<f32>", "tile<f32>", "tile<i32>", "tile<i32>"]
        assert region.ops[-1].name == "yield"
        assert len(region.ops[-1].operands[0]) == 2  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ("identity_too_short", "tile.reduce over 2 tiles needs an identity tuple of 2 compile-time numbers"),
        ("combiner_returns_one", "must return a tuple of 2 scalars (one per tile), got f32 scalar"),
        ("int_identity_fraction", "the identity 1.5 of tile.reduce is not a value of i32"),
        ("shapes_clash", "the tiles of tile.reduce must broadcast to one shape, got shapes (16,), (32,)"),
        ("combiner_not_a_function", "must be a @tile.function taking (elements, accumulators)"),
    ],
)
def test_reduce_over_tiles_misuse_points_at_the_line(kernel: str, message: str) -> None:
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(getattr(bad, kernel), B=16)
    assert "tile.reduce((t, tile.arange(" in str(info.value)
