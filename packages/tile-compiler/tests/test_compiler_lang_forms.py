"""Forms the ports of peer kernels need (issue 14 item 5) and the ordering of atomics in ``while`` conditions: the
typed IR each form emits, and the compile errors for its misuse at the user's line. Numerics are in the corpus
(``corpus/tc_corpus_forms.py``), run by the interpreter and GPU corpus tests."""

from __future__ import annotations

import importlib
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
