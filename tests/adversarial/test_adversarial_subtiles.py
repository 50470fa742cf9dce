"""Safe kernels that try to reach another block's output tile through sub-tiles (``z.subtiles``), each stopped by a
typed error: a `CompileError` at the line where the index or shape is known to be wrong, or, for indices known only at
run time, an in-kernel check that traps (`KernelAssertionError` on the CPU interpreter) before anything is written
outside the block's own tile. The race detector watches every launch that runs.

The kernels are kernel-language source (shape strings are const generics, not Python names), so they are written to
a file and imported from there: error messages point at that file's lines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

from tile.compiler import CompileError
from tile.frontend import f32
from tile.ir.interp import KernelAssertionError

SOURCE = """
import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32, i16, i32, i64, u32


@tile.entry
def next_blocks_subtile(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.zeros((BM // 2, BN), f32), (2, 0))  # CONST-NEXT


@tile.entry
def previous_blocks_subtile(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.zeros((BM // 2, BN), f32), (-1, 0))  # CONST-PREV


@tile.entry
def reads_next_blocks_subtile(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM // 2, BN))
    z.store(tile.cat(zs.load((1, 0)), zs.load((2, 0)), 0))  # CONST-READ


@tile.entry
def subtile_spans_two_tiles(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((2 * BM, BN))  # SPAN
    zs.store(tile.zeros((2 * BM, BN), f32), (0, 0))


@tile.entry
def partition_by_subtile_shape(z: Mut[Tensor[f32, ("BM", "BN")]]):
    p = z.partition((BM // 2, BN))
    z.store(tile.cat(p.load((0, 0)), p.load((1, 0)), 0))  # PARTITION-READ


@tile.entry
def walk_at_shifted_index(z: Mut[Tensor[f32, ("BM", "BN")]]):
    for idx in z.tiles():
        m, n = idx
        zs = z.subtiles((BM, BN), at=(m + 1, n))  # SHIFTED-AT
        zs.store(tile.zeros((BM, BN), f32), (0, 0))


@tile.function
def fill(zs, j):
    zs.store(tile.full(zs.tile_shape, 1.0, f32), (j, 0))  # HELPER-STORE


@tile.entry
def neighbour_through_helper(z: Mut[Tensor[f32, ("BM", "BN")]]):
    fill(z.subtiles((BM // 2, BN)), tile.block_id()[0] + 2)


@tile.entry
def loop_one_past_the_count(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM // 2, BN))
    for i in range(zs.num_tiles[0] + 1):
        zs.store(tile.full((BM // 2, BN), 1.0, f32), (i, 0))  # ONE-PAST


@tile.entry
def loop_to_a_larger_partition_count(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    zs = z.subtiles((BM // 2, BN))
    px = x.partition((BM // 2, BN))
    for i in range(px.num_tiles[0]):
        zs.store(px.load((i, 0)), (i, 0))  # OTHER-COUNT


@tile.entry
def wrapping_index(z: Mut[Tensor[f32, ("BM", "BN")]], j: i32):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.full((BM // 2, BN), 1.0, f32), (j + 2147483647, 0))  # WRAP


@tile.entry
def wide_index(z: Mut[Tensor[f32, ("BM", "BN")]], j: i64):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.full((BM // 2, BN), 1.0, f32), (j, 0))  # WIDE


@tile.entry
def unsigned_index(z: Mut[Tensor[f32, ("BM", "BN")]], j: u32):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.full((BM // 2, BN), 1.0, f32), (j, 0))  # UNSIGNED


@tile.entry(unchecked=True)
def unsigned_index_unchecked(z: Mut[Tensor[f32, ("BM", "BN")]], j: u32):
    zs = z.subtiles((BM // 2, BN))
    zs.store(tile.full((BM // 2, BN), 1.0, f32), (j, 0))


@tile.entry
def narrow_index(z: Mut[Tensor[f32, ("BM", "BN")]], j: i16):
    zs = z.subtiles((1, BN))
    zs.store(tile.full((1, BN), 1.0, f32), (j, 0))  # NARROW


@tile.entry
def backwards_loop(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    zs = z.subtiles((BM // 2, BN))
    bm = tile.block_id()[0]
    px = x.partition((BM // 2, BN), padding="zero")
    for k in range(zs.num_tiles[0]):
        i = zs.num_tiles[0] - 1 - k  # not a loop variable: checked in the kernel
        zs.store(px.load((bm * 2 + i, 0)) * 3.0, (i, 0))


@tile.entry
def whole_tile_loop(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, BN))  # ratio 1: the count must stop at this block's one tile, not run to the tensor's end
    for i in range(zs.num_tiles[0]):
        zs.store(zs.load((i, 0)) + 1.0, (i, 0))


@tile.entry
def runtime_choice_of_subtiles(z: Mut[Tensor[f32, ("BM", "BN")]], c: i32):
    if c > 0:
        zs = z.subtiles((BM // 2, BN))
    else:
        zs = z.subtiles((BM // 4, BN))  # CHOICE
    zs.store(tile.zeros(zs.tile_shape, f32), (0, 0))


@tile.entry
def subtiles_reassigned_in_loop(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM // 2, BN))
    for i in range(2):  # LOOP-REASSIGN
        zs.store(tile.zeros((BM // 2, BN), f32), (0, 0))
        zs = z.subtiles((BM // 2, BN))
"""

M, BM, BN = 64, 16, 32


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_subtile_kernels", SOURCE, tmp_path_factory.mktemp("adversarial_subtiles"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    (number,) = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.endswith(f"# {marker}")]
    return f"adversarial_subtile_kernels.py:{number}:"


def _out(host: np.ndarray | None = None) -> tile.Partition:
    if host is None:
        return tile.zeros(f32, [M, BN]).partition([BM, BN])
    return tile.from_dlpack(host).partition([BM, BN])


@pytest.mark.parametrize(
    ("kernel", "marker", "message"),
    [
        ("next_blocks_subtile", "CONST-NEXT", "sub-tile index 2 along dim 0 is outside the tile"),
        ("previous_blocks_subtile", "CONST-PREV", "sub-tile index -1 along dim 0 is outside the tile"),
        ("reads_next_blocks_subtile", "CONST-READ", "sub-tile index 2 along dim 0 is outside the tile"),
        ("subtile_spans_two_tiles", "SPAN", r"must divide the tile \(16, 32\) this block owns"),
        ("partition_by_subtile_shape", "PARTITION-READ", r"z\.subtiles\(shape\)\.load\(index\)"),
        ("walk_at_shifted_index", "SHIFTED-AT", r"must be the variable of a 'for idx in z\.tiles\(\)' loop"),
        ("subtiles_reassigned_in_loop", "LOOP-REASSIGN", "sub-tile view and cannot be reassigned"),
    ],
)
def test_reaching_another_tile_at_compile_time_is_a_compile_error(
    kernels: ModuleType, kernel: str, marker: str, message: str
) -> None:
    z = _out()
    with pytest.raises(CompileError, match=message) as info:
        getattr(kernels, kernel)(z)
    assert line_of(marker) in str(info.value)
    assert not z.moved


def test_a_run_time_choice_between_subtile_shapes_is_a_compile_error(kernels: ModuleType) -> None:
    with pytest.raises(CompileError) as info:
        kernels.runtime_choice_of_subtiles(_out(), 1)
    assert "adversarial_subtile_kernels.py:" in str(info.value)


@pytest.mark.parametrize(
    ("kernel", "marker", "args"),
    [
        ("neighbour_through_helper", "HELPER-STORE", ()),
        ("loop_one_past_the_count", "ONE-PAST", ()),
        ("wrapping_index", "WRAP", (1,)),
        ("wide_index", "WIDE", (2**32,)),
        ("wide_index", "WIDE", (-(2**32) + 1,)),
        ("unsigned_index", "UNSIGNED", (2**32 - 1,)),  # -1 if read as signed 32 bits
        ("unsigned_index", "UNSIGNED", (2,)),
    ],
)
def test_reaching_another_tile_at_run_time_traps_before_writing(
    kernels: ModuleType, kernel: str, marker: str, args: tuple[int, ...]
) -> None:
    host = np.full((M, BN), -1.0, np.float32)
    with pytest.raises(KernelAssertionError, match=r"sub-tile index out of range for z\.subtiles\(\(8, 32\)\)") as info:
        getattr(kernels, kernel)(_out(host), *args).sync()
    assert line_of(marker).rstrip(":") in str(info.value)
    assert (host[BM:] == -1.0).all()  # block 0 trapped: no row outside its own tile was written


def test_a_loop_to_another_partitions_count_traps_when_it_is_larger(kernels: ModuleType) -> None:
    x = tile.from_numpy(np.ones((2 * M, BN), np.float32))  # x has twice z's rows: i runs past the own tile
    with pytest.raises(KernelAssertionError, match="sub-tile index out of range") as info:
        kernels.loop_to_a_larger_partition_count(_out(), x).sync()
    assert line_of("OTHER-COUNT").rstrip(":") in str(info.value)
    small = tile.from_numpy(np.ones((BM // 2, BN), np.float32))  # one sub-tile row: in range for every block
    (z, _) = kernels.loop_to_a_larger_partition_count(_out(), small).sync()
    out = z.unpartition().to_numpy().reshape(M // BM, BM, BN)
    np.testing.assert_array_equal(out[:, : BM // 2], 1.0)
    np.testing.assert_array_equal(out[:, BM // 2 :], 0.0)


def test_an_unproven_but_correct_loop_runs_clean(kernels: ModuleType) -> None:
    xn = np.random.default_rng(9).standard_normal((M - 5, BN)).astype(np.float32)
    host = np.full((M - 5, BN), -1.0, np.float32)
    kernels.backwards_loop(tile.from_dlpack(host).partition([BM, BN]), tile.from_numpy(xn)).sync()
    np.testing.assert_array_equal(host, 3 * xn)  # the race detector is on: no block touched another's tile


def test_a_sub_tile_as_large_as_the_tile_counts_one_per_block(kernels: ModuleType) -> None:
    (z,) = kernels.whole_tile_loop(_out()).sync()  # the race detector is on: block 0 must not reach block 1's tile
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 1.0)


def test_narrow_and_unsigned_indices_inside_the_own_tile_work(kernels: ModuleType) -> None:
    (z, _) = kernels.unsigned_index(_out(), 1).sync()
    out = z.unpartition().to_numpy().reshape(M // BM, BM, BN)
    np.testing.assert_array_equal(out[:, BM // 2 :], 1.0)
    np.testing.assert_array_equal(out[:, : BM // 2], 0.0)
    (z, _) = kernels.unsigned_index_unchecked(_out(), 1).sync()  # an unsigned index compiles unchecked too
    np.testing.assert_array_equal(z.unpartition().to_numpy(), out.reshape(M, BN))
    (z, _) = kernels.narrow_index(_out(), BM - 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy().reshape(M // BM, BM, BN)[:, BM - 1], 1.0)
    with pytest.raises(KernelAssertionError, match="sub-tile index out of range") as info:
        kernels.narrow_index(_out(), BM).sync()
    assert line_of("NARROW").rstrip(":") in str(info.value)
