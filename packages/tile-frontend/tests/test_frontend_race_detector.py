"""On the CPU backend the interpreter's race detector catches what an unchecked kernel lets through.

Issue #8: the unchecked permute-race kernel is flagged with both block ids and the source location, and the
detector stays silent on the corrected kernel and on every safe example (``test_frontend_examples.py`` runs
them on this backend with the detector on).
"""

from __future__ import annotations

import re
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f32, i32
from tile.ir.interp import DataRaceError

HEADS, SEQ, DIM, BS = 4, 64, 32, 16
GRID = (SEQ // BS, HEADS, 1)


def test_the_unchecked_permute_race_is_reported_with_both_blocks_and_the_line(k: ModuleType) -> None:
    x = tile.randn(f32, [HEADS, SEQ, DIM])
    with pytest.raises(DataRaceError) as caught:
        k.permute_heads_unchecked.grid(GRID)(tile.zeros(f32, [SEQ, HEADS, DIM]), x, BS=BS).sync()
    message = str(caught.value)
    blocks = re.findall(r"tile block \((\d+), (\d+), 0\)", message)
    assert len(blocks) == 2
    assert blocks[0] != blocks[1]
    assert blocks[0][0] == blocks[1][0], "the racing blocks share a sequence tile and differ in the head"
    assert "fe_kernels.py:" in message


def test_the_corrected_unchecked_permute_runs_clean_and_is_right(k: ModuleType) -> None:
    x = tile.randn(f32, [HEADS, SEQ, DIM])
    expected = x.to_numpy().transpose(1, 0, 2)
    out = k.permute_heads_unchecked_fixed.grid(GRID)(tile.zeros(f32, [SEQ, HEADS, DIM]), x, BS=BS).sync()[0]
    np.testing.assert_array_equal(out.to_numpy(), expected)


def test_one_root_catches_compile_errors_and_kernel_faults(k: ModuleType) -> None:
    x = tile.randn(f32, [HEADS, SEQ, DIM])
    with pytest.raises(tile.TileError) as caught:
        k.permute_heads_unchecked.grid(GRID)(tile.zeros(f32, [SEQ, HEADS, DIM]), x, BS=BS).sync()
    assert isinstance(caught.value, tile.KernelFaultError)
    assert isinstance(caught.value, DataRaceError)
    assert issubclass(tile.CompileError, tile.TileError)


def test_an_atomic_orders_partition_accesses_around_it(k: ModuleType) -> None:
    # acq_rel atomics join every token chain: block 0's store is released by its flag, block 1's load acquired.
    z, flag = k.publish_then_read(tile.zeros(f32, [32]).partition([16]), tile.zeros(i32, [1])).sync()
    np.testing.assert_array_equal(flag.to_numpy(), [1])
    np.testing.assert_array_equal(z.unpartition().to_numpy(), [7.0] * 16 + [8.0] * 16)
    with pytest.raises(DataRaceError, match=r"tile block \(0, 0, 0\).*tile block \(1, 0, 0\)"):
        k.read_then_take(tile.zeros(f32, [32]).partition([16]), tile.zeros(i32, [1])).sync()
