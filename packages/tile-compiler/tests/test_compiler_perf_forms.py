"""The forms the performance passes emit, pinned: products fused into ``fma`` (``_contract``) and stores that take
the pre-loop token when they are the loop's only access to a distinct tile per iteration (``_store_scope``).

Both were found comparing Tile's and cuTile Python's bytecode for the same kernels (an online softmax's
``s * scale - m`` was an FMUL and an FADD per element; a chunked rmsnorm's chained sub-tile stores put a block-wide
barrier in every iteration of its store loop). Numerics of every kernel here run on the interpreter (and the GPU
tier) as ``tc_corpus_fused`` cases.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from tile import ir
from tile.compiler._kir import Op, Value
from tile.compiler._lower import lower
from tile.compiler._spec import CompileOptions, Target
from tile.compiler._typecheck import TypedKernel

CORPUS = Path(__file__).parent / "corpus"
for folder in (CORPUS, Path(__file__).parent):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
f: Any = importlib.import_module("tc_corpus_fused")
from test_compiler_typecheck import check, names, walk  # noqa: E402  # a sibling test module

CHUNKS = {"BM": 4, "NT": 128, "BN": 32}


def _one(t: TypedKernel, name: str) -> list[Op]:
    return [op for op in walk(t.ir.body) if op.name == name]


def _modes(op: Op) -> tuple[str, bool]:
    return op.attrs.get("rounding_mode", "nearest_even"), bool(op.attrs.get("flush_to_zero", False))


def _defined_by(t: TypedKernel) -> dict[int, Op]:
    return {r.id: op for op in walk(t.ir.body) for r in op.results}


# -- contraction ------------------------------------------------------------------------------------------------
def test_a_product_plus_a_value_is_one_fma() -> None:
    t = check(f.madd, B=16)
    assert "mulf" not in names(t)
    assert "addf" not in names(t)
    (fma,) = _one(t, "fma")
    assert _modes(fma) == ("nearest_even", False)


def test_subtractions_negate_the_right_operand() -> None:
    t = check(f.msub_both, B=16)
    assert "subf" not in names(t)
    assert "mulf" not in names(t)
    made = _defined_by(t)
    first, second = _one(t, "fma")
    x_times_s_minus_m, m_minus_x_times_s = first.flat_operands(), second.flat_operands()
    assert made[x_times_s_minus_m[2].id].name == "negf"  # fma(x, s, -m)
    assert made[x_times_s_minus_m[0].id].name != "negf"
    assert made[m_minus_x_times_s[0].id].name == "negf"  # fma(-x, s, m)
    assert made[m_minus_x_times_s[2].id].name != "negf"


def test_a_product_with_another_use_is_kept() -> None:
    t = check(f.product_used_twice, B=16)
    assert "fma" not in names(t)
    assert names(t).count("mulf") == 1
    assert "addf" in names(t)


def test_modes_must_agree_and_round_to_nearest() -> None:
    t = check(f.modes_differ, B=16)
    (fma,) = _one(t, "fma")  # only the store of v: both ops flush, default rounding
    assert _modes(fma) == ("nearest_even", True)
    assert [_modes(op) for op in _one(t, "addf")] == [("zero", False), ("nearest_even", False)]


def test_a_product_outside_a_loop_is_not_pulled_into_it() -> None:
    t = check(f.product_outside_loop, B=16, N=3)
    assert "fma" not in names(t)
    assert "mulf" in [op.name for op in t.ir.body.ops]


def test_fp_contract_false_keeps_every_product() -> None:
    t = check(f.madd, B=16, options=CompileOptions(fp_contract=False))
    assert "fma" not in names(t)
    assert [n for n in names(t) if n in ("mulf", "addf", "fma")] == ["mulf", "addf"]


def test_fp_contract_is_part_of_the_cache_key() -> None:
    from tile.compiler._spec import Specialization

    on, off = (Specialization.make(options=CompileOptions(fp_contract=v)) for v in (True, False))
    assert on.key() != off.key()


# -- loop-parallel stores ---------------------------------------------------------------------------------------
def _store_tokens(t: TypedKernel) -> list[tuple[str, Op]]:
    """Each store's token: 'before' (defined outside its loop, i.e. the pre-loop token) or 'chained'."""
    out: list[tuple[str, Op]] = []
    for loop in (op for op in walk(t.ir.body) if op.name == "for"):
        inside = {v.id for v in loop.regions[0].args} | {r.id for op in walk(loop.regions[0]) for r in op.results}
        for store in (op for op in loop.regions[0].ops if op.name == "store_view_tko"):
            token = store.operands[3]
            assert isinstance(token, Value)
            out.append(("chained" if token.id in inside else "before", store))
    return out


@pytest.mark.parametrize(
    ("kernel", "consts"),
    [("chunks_stored", CHUNKS), ("chunks_stored_unchecked", CHUNKS), ("walked_stores", {"BM": 8, "BN": 16})],
)
def test_a_distinct_tile_per_iteration_takes_the_pre_loop_token(kernel: str, consts: dict[str, int]) -> None:
    case = next(c for c in f.CASES if c.name == kernel)
    t = check(case.kernel, "sm_90", options=case.options, **consts)
    ((where, store),) = _store_tokens(t)
    assert where == "before"
    (loop,) = [op for op in walk(t.ir.body) if op.name == "for"]
    body = loop.regions[0]
    joins = [op for op in body.ops if op.name == "join_tokens"]
    assert len(joins) == 1  # the store's token joins the carried chain, which the loop hands on
    assert store.results[0] in joins[0].flat_operands()
    assert joins[0].results[0] in body.ops[-1].flat_operands()


@pytest.mark.parametrize(
    ("kernel", "consts"),
    [
        ("chunks_stored_twice", CHUNKS),
        ("chunks_reversed", CHUNKS),
        ("chunks_stepped_unchecked", CHUNKS),
        ("chunk_read_then_stored", CHUNKS),
        ("own_tile_stored_each_iteration", {"B": 16, "N": 3}),
    ],
)
def test_other_stores_stay_chained(kernel: str, consts: dict[str, int]) -> None:
    case = next(c for c in f.CASES if c.name == kernel)
    t = check(case.kernel, "sm_90", options=case.options, **consts)
    tokens = _store_tokens(t)
    assert tokens
    assert {where for where, _ in tokens} == {"chained"}


@pytest.mark.parametrize("kernel", ["chunks_stored", "walked_stores", "msub_both", "chunks_stored_twice"])
def test_the_rewritten_kernels_lower_and_verify(kernel: str) -> None:
    case = next(c for c in f.CASES if c.name == kernel)
    t = check(case.kernel, "sm_90", options=case.options, **case.consts)
    module = lower(t, Target("sm_90")).module
    ir.verify(module)
    again = ir.read_bytecode(ir.write_bytecode(module, ir.V13_3))
    ir.verify(again)
    assert ir.print_module(again) == ir.print_module(module)  # the bytecode round trip keeps every op
