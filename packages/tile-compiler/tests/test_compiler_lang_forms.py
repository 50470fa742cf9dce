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

import tile.compiler.lang as tile

from tile.compiler._diagnostics import CompileError
from tile.compiler._kir import Block, Op
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import CompileOptions, Specialization, Target
from tile.compiler._typecheck import TypedKernel, typecheck
from tile.compiler.lang import Mut, Tensor, f32

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
forms: Any = importlib.import_module("tc_corpus_forms")


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
    assert carried and all(v is cas_token for v in carried)
    # ... and the read-modify-write after the loop continues from the loop's results (acquire), as does the release.
    after = ops[ops.index(loop) + 1 :]
    gather = next(op for op in after if op.name == "load_ptr_tko")
    assert gather.operands[-1] in loop.results
    release = next(op for op in after if op.name == "atomic_rmw_tko")
    joined = next(op for op in after if op.name == "join_tokens")
    assert release.operands[-1] is joined.results[0]
    assert set(map(id, joined.operands[0])) >= {id(v) for v in loop.results[:1]}  # type: ignore[union-attr]


# -- dtype comparisons ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "op"), [("f32", "exp"), ("f16", "negf")])
def test_dtype_equality_is_a_compile_time_bool(dtype: str, op: str) -> None:
    spec = Specialization.make(consts={"B": 64}, dtypes={"T": dtype})
    t = typecheck(resolve(parse(forms.generic_dtype_branch)), spec, Target("sm_90"))
    names = [o.name for o in walk(t.ir.body)]
    assert "if" not in names
    assert op in names
    assert ({"exp", "negf"} - {op}).isdisjoint(names)


def _dtype_vs_tile(z: Any, x: Any) -> None:
    t = tile.load_tile_like(x, z)
    if t == tile.f32:  # a tile compared with a dtype
        z.store(t)


def _dtype_ordered(z: Any, x: Any) -> None:
    t = tile.load_tile_like(x, z)
    if t.dtype < tile.f32:
        z.store(t)


def _in_runtime(z: Any, x: Any) -> None:
    t = tile.load_tile_like(x, z)
    if tile.block_id()[0] in (0, 1):
        z.store(t)


@pytest.mark.parametrize(
    ("kernel", "message", "line"),
    [
        ("_dtype_vs_tile", "cannot compare f32 tile of shape (64,) with dtype", "if t == tile.f32"),
        ("_dtype_ordered", "can only be compared with '==' or '!='", "if t.dtype < tile.f32"),
        ("_in_runtime", "'in' works on compile-time values only", "if tile.block_id()[0] in (0, 1)"),
    ],
)
def test_dtype_comparison_misuse_points_at_the_line(kernel: str, message: str, line: str) -> None:
    fn = globals()[kernel]
    fn.__annotations__ = {"z": Mut[Tensor[f32, "B"]], "x": Tensor[f32, -1]}
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


def _batch_clash(z: Any, x: Any) -> None:
    a = tile.zeros((2, 16, 16), tile.f16)
    b = tile.zeros((4, 16, 16), tile.f16)
    z.store(a @ b)


def _vector_matmul(z: Any, x: Any) -> None:
    a = tile.zeros((16,), tile.f16)
    b = tile.zeros((16, 16), tile.f16)
    z.store(a @ b)


def _acc_batch_clash(z: Any, x: Any) -> None:
    a = tile.zeros((2, 16, 16), tile.f16)
    b = tile.zeros((16, 16), tile.f16)
    z.store(tile.mma(a, b, tile.zeros((16, 16), tile.f32)))


def _four_dims(z: Any, x: Any) -> None:
    a = tile.zeros((2, 2, 16, 16), tile.f16)
    z.store(a @ a)


@pytest.mark.parametrize(
    ("kernel", "message", "line"),
    [
        ("_batch_clash", "the batch dims of a (2, 16, 16) and b (4, 16, 16) do not broadcast", "z.store(a @ b)"),
        ("_vector_matmul", "reshape a vector to (1, K)", "z.store(a @ b)"),
        ("_acc_batch_clash", "do not broadcast into acc batch ()", "z.store(tile.mma(a, b"),
        ("_four_dims", "takes 2-D (M, K) or 3-D (batch, M, K) tiles", "z.store(a @ a)"),
    ],
)
def test_matmul_batch_misuse_points_at_the_line(kernel: str, message: str, line: str) -> None:
    fn = globals()[kernel]
    fn.__annotations__ = {"z": Mut[Tensor[f32, ("B", "B")]], "x": Tensor[f32, -1]}
    with pytest.raises(CompileError, match=re.escape(message)) as info:
        check(fn, B=16)
    assert line in str(info.value)
