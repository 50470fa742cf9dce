"""Sub-tiles of an owned output tile at the typecheck level: which accesses carry checks (none in a loop over
``zs.num_tiles``; a check plus a clamp for any other index), the launch-time checks they leave, and that the GPU
lowering verifies (numerics: the ``tc_corpus_subtiles`` cases on the interpreter and the GPU tier)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from tile.compiler._guards import Bound
from tile.compiler._spec import CompileOptions, Target

CORPUS = Path(__file__).parent / "corpus"
for folder in (CORPUS, Path(__file__).parent):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
c: Any = importlib.import_module("tc_corpus_subtiles")
from test_compiler_typecheck import _asserts, check, names  # noqa: E402  # a sibling test module

RMS = {"BM": 8, "NT": 256, "BN": 64}


@pytest.mark.parametrize("target", ["cpu", "sm_90"])
def test_a_loop_over_num_tiles_needs_no_check_in_the_kernel(target: str) -> None:
    t = check(c.rmsnorm_chunked, target, **RMS)
    assert _asserts(t) == []
    # x's column index runs below z's sub-tile count, which the host knows: the launcher checks it fits x.
    bounds = {(g.bound, g.param, g.dim) for g in t.abi.guards}
    assert (Bound("count", "z", (8, 64), 1), "x", 1) in bounds
    assert (Bound("grid", dim=0), "x", 0) in bounds


def test_other_indices_are_checked_and_clamped() -> None:
    cpu = check(c.subtile_at_scalar, "cpu", BM=8, BN=32, SN=8)
    messages = [m for _, m in _asserts(cpu)]
    assert len(messages) == 3  # the run-time j, and the constant 1 read and written (the tensor may end before it)
    assert all(m.startswith("sub-tile index out of range for z.subtiles((8, 8)) at ") for m in messages)
    gpu = check(c.subtile_at_scalar, "sm_90", BM=8, BN=32, SN=8)
    assert len(_asserts(gpu)) == 3
    assert "assert" not in names(gpu)  # a fault, no vprintf (see _fault_unless)
    assert names(gpu).count("maxi") == 3  # each checked index is clamped into the own tile before the access


def test_unchecked_kernels_get_neither_check_nor_clamp() -> None:
    t = check(c.subtile_at_scalar, "sm_90", BM=8, BN=32, SN=8, options=CompileOptions(unchecked=True))
    assert _asserts(t) == []
    assert "maxi" not in names(t)


@pytest.mark.parametrize("kernel", ["rmsnorm_chunked", "subtile_grid_readback", "walked_subtiles", "subtile_at_scalar"])
def test_the_gpu_lowering_verifies(kernel: str) -> None:
    from tile import ir
    from tile.compiler._lower import lower

    case = next(k for k in c.CASES if k.name == kernel)
    module = lower(check(case.kernel, "sm_90", **case.consts), Target("sm_90")).module
    ir.verify(module)
    assert "store_view_tko" in ir.print_module(module)  # the sub-tile stores made it into the module
