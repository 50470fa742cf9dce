"""Sub-tiles of a block's own output tile (``z.subtiles(shape)``) on the CPU interpreter: numerics against numpy
float64 (edge tiles included), the race detector silent on safe kernels, and every way to reach another block's tile
refused (compile error, or an in-kernel check that traps)."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f16, f32
from tile.ir.interp import DataRaceError, KernelAssertionError

KERNELS = Path(__file__).parent / "kernels" / "subtile_kernels.py"


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    lines = KERNELS.read_text().splitlines()
    (number,) = [i for i, text in enumerate(lines, 1) if text.endswith(f"# {marker}")]
    return f"subtile_kernels.py:{number}:"


def rmsnorm_ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out: np.ndarray = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w64
    return out


@pytest.mark.parametrize(
    ("shape", "bm", "nt", "bn"),
    [
        ((64, 256), 8, 256, 64),  # everything divides
        ((37, 200), 8, 256, 64),  # rows not a multiple of BM, cols not of BN, the tile wider than the tensor
        ((5, 100), 8, 512, 32),  # one partial row block; only 4 of 16 sub-tiles touch the tensor
        ((16, 48), 4, 64, 64),  # the sub-tile is the whole tile
    ],
)
def test_chunked_rmsnorm_matches_numpy(sk: ModuleType, shape: tuple[int, int], bm: int, nt: int, bn: int) -> None:
    rows, cols = shape
    rng = np.random.default_rng(rows * cols)
    xn = rng.standard_normal((rows, cols)).astype(np.float32)
    wn = rng.random(cols).astype(np.float32)
    host = np.full((rows, cols), -7.0, np.float32)
    out = tile.from_dlpack(host).partition([bm, nt])
    sk.rmsnorm_chunked(out, tile.from_numpy(xn), tile.from_numpy(wn), 1e-5, BN=bn).sync()
    np.testing.assert_allclose(host, rmsnorm_ref(xn, wn, 1e-5), rtol=1e-5, atol=1e-5)


def test_chunked_rmsnorm_in_f16_and_unchecked_agree(sk: ModuleType) -> None:
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((40, 300)).astype(np.float16)
    wn = rng.random(300).astype(np.float16)
    ref = rmsnorm_ref(xn, wn, 1e-5)
    results = []
    for kernel in (sk.rmsnorm_chunked, sk.rmsnorm_chunked_unchecked):
        z, *_ = kernel(
            tile.empty(f16, [40, 300]).partition([16, 512]), tile.from_numpy(xn), tile.from_numpy(wn), 1e-5, BN=128
        ).sync()
        results.append(z.unpartition().to_numpy())
        np.testing.assert_allclose(results[-1].astype(np.float64), ref, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize(("rows", "cols"), [(64, 64), (50, 41)])
@pytest.mark.parametrize("sub", [(4, 8), (16, 8), (4, 32), (16, 32)])  # a dim whose sub-tile is the whole tile too
def test_two_dimensional_subtiles_store_and_read_back(
    sk: ModuleType, rows: int, cols: int, sub: tuple[int, int]
) -> None:
    xn = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float32)
    host = np.full((rows, cols), -1.0, np.float32)
    out = tile.from_dlpack(host).partition([16, 32])
    sk.store_then_read_back(out, tile.from_numpy(xn), SM=sub[0], SN=sub[1]).sync()
    np.testing.assert_array_equal(host, 2 * xn)  # the reads see the kernel's own earlier stores (token order)


def test_subtiles_of_walked_tiles(sk: ModuleType) -> None:
    xn = np.random.default_rng(6).standard_normal((40, 70)).astype(np.float32)
    out = tile.empty(f32, [40, 70]).partition([16, 32])  # 3 x 3 tiles walked by 4 blocks
    z, *_ = sk.walked_subtiles.grid((4,))(out, tile.from_numpy(xn), SN=8).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), xn + 1.0)


def test_a_loop_to_the_constant_count_is_checked_and_passes(sk: ModuleType) -> None:
    z, *_ = sk.constant_bound_loop(tile.empty(f32, [16, 64]).partition([8, 32]), SN=8).sync()
    expected = np.tile(np.repeat(np.arange(1.0, 5.0), 8), 2)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(expected, (16, 1)))


def test_an_edge_tile_with_fewer_subtiles_traps_the_constant_count_loop(sk: ModuleType) -> None:
    # 40 columns: the second block's tile has one sub-tile in the tensor, and range(4) names sub-tiles past it.
    out = tile.empty(f32, [16, 40]).partition([8, 32])
    with pytest.raises(KernelAssertionError, match=r"sub-tile index out of range for z\.subtiles\(\(8, 8\)\)"):
        sk.constant_bound_loop(out, SN=8).sync()


def test_a_run_time_index_inside_the_own_tile_works(sk: ModuleType) -> None:
    z, *_ = sk.at_runtime_index(tile.empty(f32, [8, 64]).partition([8, 32]), 2, SN=8).sync()
    row = np.zeros(64, np.float32)
    row[16:24] = row[48:56] = 5.0
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(row, (8, 1)))


@pytest.mark.parametrize("j", [4, -1, 2**31 - 1])
def test_a_run_time_index_outside_the_own_tile_traps(sk: ModuleType, j: int) -> None:
    host = np.full((8, 64), -1.0, np.float32)
    with pytest.raises(KernelAssertionError, match="sub-tile index out of range"):
        sk.at_runtime_index(tile.from_dlpack(host).partition([8, 32]), j, SN=8).sync()


def test_a_constant_index_inside_the_own_tile_works(sk: ModuleType) -> None:
    z, *_ = sk.at_constant_index(tile.empty(f32, [8, 32]).partition([8, 32]), SN=8, J=3).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_array_equal(out[:, 24:], 5.0)
    np.testing.assert_array_equal(out[:, :24], 0.0)


@pytest.mark.parametrize("j", [4, 5, -1])
def test_a_constant_index_outside_the_own_tile_is_a_compile_error(sk: ModuleType, j: int) -> None:
    out = tile.empty(f32, [8, 64]).partition([8, 32])
    with pytest.raises(tile.CompileError, match=f"sub-tile index {j} along dim 1 is outside the tile") as info:
        sk.at_constant_index(out, SN=8, J=j)
    assert "another block's tile" in str(info.value)
    assert not out.moved


def test_naming_the_neighbours_subtile_traps_and_unchecked_it_races(sk: ModuleType) -> None:
    with pytest.raises(KernelAssertionError, match="sub-tile index out of range") as info:
        sk.at_neighbours_subtile(tile.zeros(f32, [32, 16]).partition([16, 16]), SM=8).sync()
    assert line_of("NEIGHBOUR") in str(info.value)
    # The same kernel without its checks: the detector sees blocks 0 and 1 write one sub-tile.
    with pytest.raises(DataRaceError, match=r"tile block \(0, 0, 0\).*tile block \(1, 0, 0\)"):
        sk.at_neighbours_subtile_unchecked(tile.zeros(f32, [32, 16]).partition([16, 16]), SM=8).sync()


@pytest.mark.parametrize(
    ("kernel", "marker", "message"),
    [
        ("sub_larger_than_tile", "SUB-LARGER", r"must divide the tile \(8, 32\) this block owns"),
        ("sub_wrong_rank", "SUB-RANK", r"must have one dim per output dim \(2\)"),
        ("sub_not_pow2", "SUB-POW2", "powers of two"),
        ("subtiles_then_walk", "SUB-SCHEME", "use one scheme per output"),
        ("sub_store_wrong_dtype", "SUB-DTYPE", r"convert it with \.astype\(tile\.f32\)"),
        ("sub_store_wrong_shape", "SUB-SHAPE", r"sub-tiles have shape \(8, 16\)"),
        ("sub_index_arity", "SUB-ARITY", "needs 2 coordinates"),
    ],
)
def test_misuse_is_a_compile_error_at_its_line(sk: ModuleType, kernel: str, marker: str, message: str) -> None:
    out = tile.empty(f32, [16, 64]).partition([8, 32])
    with pytest.raises(tile.CompileError, match=message) as info:
        getattr(sk, kernel)(out)
    assert line_of(marker) in str(info.value)
    assert not out.moved


def test_subtiles_of_an_input_are_refused(sk: ModuleType) -> None:
    with pytest.raises(tile.CompileError, match=r"'x' is an input") as info:
        sk.subtiles_of_input(tile.empty(f32, [16, 64]).partition([8, 32]), tile.zeros(f32, [16, 64]))
    assert "x.partition(shape).load(index)" in str(info.value)
    assert line_of("SUB-INPUT") in str(info.value)


def test_subtiles_at_another_outputs_tile_are_refused(sk: ModuleType) -> None:
    z, w = (tile.empty(f32, [16, 64]).partition([8, 32]) for _ in range(2))
    with pytest.raises(tile.CompileError, match=re.escape("'z.subtiles(..., at=idx)' must be the variable")) as info:
        sk.subtiles_at_other_outputs_tile(z, w)
    assert line_of("SUB-OTHER-AT") in str(info.value)


def test_an_input_narrower_than_the_output_fails_at_the_launch(sk: ModuleType) -> None:
    # x's chunk index runs below z's sub-tile count: the launcher checks z's count against x's, the kernel does not.
    out = tile.empty(f32, [16, 200]).partition([8, 256])
    with pytest.raises(tile.ArgumentError, match=r"x\.partition\(\(8, 64\)\) along dim 1") as info:
        sk.rmsnorm_chunked(out, tile.zeros(f32, [16, 100]), tile.zeros(f32, [200]), 1e-5, BN=64)
    assert "z.partition((8, 64)) has 4 tile(s) along dim 1" in str(info.value)
    assert not out.moved
