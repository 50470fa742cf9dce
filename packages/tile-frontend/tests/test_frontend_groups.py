"""Tuple parameters (``tuple[Tensor[...], ...]``, ``tuple[Mut[Tensor[...]], ...]``) on the CPU interpreter: a grouped
GEMM with groups of different shapes against numpy float64, the arguments handed back grouped, every element checked
and moved like a lone argument, and each misuse refused before anything is moved."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.compiler import CompileError
from tile.frontend import f32

KERNELS = Path(__file__).parent / "kernels" / "group_kernels.py"
SHAPES = [(40, 24, 56), (16, 16, 16), (70, 33, 20)]  # (M, N, K) per group: none a multiple of every tile


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    lines = KERNELS.read_text().splitlines()
    (number,) = [i for i, text in enumerate(lines, 1) if text.endswith(f"# {marker}")]
    return f"group_kernels.py:{number}:"


def _groups(seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    a = [rng.standard_normal((m, k)).astype(np.float16) for m, _, k in SHAPES]
    b = [rng.standard_normal((k, n)).astype(np.float16) for _, n, k in SHAPES]
    return a, b


def _vectors(n: int = 3) -> tuple[tile.Tensor, ...]:
    return tuple(tile.from_numpy(np.arange(64, dtype=np.float32) * (i + 1)) for i in range(n))


@pytest.mark.parametrize("grid", [1, 3, 64])  # fewer blocks than tiles, some, more than every group has
def test_grouped_gemm_matches_numpy(gk: ModuleType, grid: int) -> None:
    a, b = _groups(grid)
    hosts = [np.full((m, n), -7.0, np.float32) for m, n, _ in SHAPES]
    cs = tuple(tile.from_dlpack(h).partition([16, 16]) for h in hosts)
    xa, xb = tuple(map(tile.from_numpy, a)), tuple(map(tile.from_numpy, b))
    got_c, got_a, got_b, bk = gk.grouped_gemm.grid((grid,))(cs, xa, xb, BK=16).sync()
    for h, x, y in zip(hosts, a, b, strict=True):
        np.testing.assert_allclose(h, x.astype(np.float64) @ y.astype(np.float64), rtol=1e-5, atol=1e-4)
    # Handed back grouped as passed, each element a fresh handle; what was passed is moved.
    assert [type(g) for g in (got_c, got_a, got_b)] == [tuple] * 3
    assert bk == 16
    assert [len(g) for g in (got_c, got_a, got_b)] == [3, 3, 3]
    assert all(isinstance(c, tile.Partition) for c in got_c)
    assert all(c.moved for c in cs)
    assert all(x.moved for x in xa)
    assert not any(x.moved for x in got_a)


def test_relaunch_with_returned_groups_reuses_the_plan(gk: ModuleType) -> None:
    a, b = _groups(5)
    cs = tuple(tile.zeros(f32, [m, n]).partition([16, 16]) for m, n, _ in SHAPES)
    args = (cs, tuple(map(tile.from_numpy, a)), tuple(map(tile.from_numpy, b)))
    kernel = gk.grouped_gemm.grid((4,))
    for _ in range(3):
        *args, _bk = kernel(*args, BK=16).sync()
    for c, x, y in zip(args[0], a, b, strict=True):
        np.testing.assert_allclose(c._tensor.to_numpy(), x.astype(np.float64) @ y.astype(np.float64), atol=1e-4)


def test_constant_index_len_and_tuple_iteration(gk: ModuleType) -> None:
    xs = np.arange(64, dtype=np.float64)
    z, got = gk.first_plus_last(tile.zeros(f32, [64]).partition([16]), _vectors()).sync()
    np.testing.assert_array_equal(z._tensor.to_numpy(), xs + 3 * xs * 3)  # xs[0] + xs[-1] * len(xs)
    assert len(got) == 3
    z, _ = gk.sum_all(z, _vectors(4)).sync()
    np.testing.assert_array_equal(z._tensor.to_numpy(), xs * (1 + 2 + 3 + 4))


def test_output_groups_store_their_own_tiles(gk: ModuleType) -> None:
    outs = tuple(tile.zeros(f32, [64]).partition([16]) for _ in range(3))
    outs, _, _ = gk.grouped_scale(outs, _vectors(), 2.0).sync()
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(out._tensor.to_numpy(), np.arange(64) * (i + 1) * 2.0)


def test_length_is_part_of_the_specialization(gk: ModuleType) -> None:
    z = tile.zeros(f32, [64]).partition([16])
    two = gk.first_plus_last.compile(z, _vectors(2))
    three = gk.first_plus_last.compile(z, _vectors(3))
    assert [s.param for s in two.abi.slots if s.role == "base"] == ["z", "xs[0]", "xs[1]"]
    assert [s.param for s in three.abi.slots if s.role == "base"] == ["z", "xs[0]", "xs[1]", "xs[2]"]


# -- misuse: refused before anything is moved ----------------------------------------------------------------------


def test_same_partition_twice_in_an_output_tuple(gk: ModuleType) -> None:
    out = tile.zeros(f32, [64]).partition([16])
    xs = _vectors(2)
    with pytest.raises(tile.AliasError, match=r"output 'outs\[0\]' and output 'outs\[1\]' overlap"):
        gk.grouped_scale((out, out), xs, 1.0)
    assert not out.moved
    assert not any(x.moved for x in xs)


def test_an_output_element_passed_as_an_input_element(gk: ModuleType) -> None:
    outs = tuple(tile.zeros(f32, [64]).partition([16]) for _ in range(2))
    xs = _vectors(2)
    with pytest.raises(tile.ArgumentError, match=r"argument 'xs\[1\]' of grouped_scale\(\) is a read-only input"):
        gk.grouped_scale(outs, (xs[0], outs[0]), 1.0)
    assert not any(o.moved for o in outs)
    assert not any(x.moved for x in xs)


def test_an_output_aliasing_an_input_of_another_kernel_argument(gk: ModuleType) -> None:
    out = tile.zeros(f32, [64]).partition([16])
    with pytest.raises(tile.ArgumentError, match=r"'xs\[0\]' of first_plus_last\(\) is a read-only input"):
        gk.first_plus_last(out, (out,))
    assert not out.moved


def test_wrong_element_types(gk: ModuleType) -> None:
    out = tile.zeros(f32, [64]).partition([16])
    with pytest.raises(tile.ArgumentError, match=r"'outs\[1\]' of grouped_scale\(\) is a Mut output and needs a Part"):
        gk.grouped_scale((out, tile.zeros(f32, [64])), _vectors(2), 1.0)
    with pytest.raises(tile.ArgumentError, match=r"'xs\[0\]' of first_plus_last\(\) has dtype f16"):
        gk.first_plus_last(out, (tile.zeros(tile.f16, [64]),))
    with pytest.raises(tile.ArgumentError, match=r"'xs' of first_plus_last.. is a tuple of tensors, got Tensor"):
        gk.first_plus_last(out, tile.zeros(f32, [64]))
    with pytest.raises(tile.ArgumentError, match="holds 0 tensors; a tuple parameter takes 1 to 64"):
        gk.first_plus_last(out, ())
    assert not out.moved


def test_output_groups_of_different_grids_need_tiles_walks(gk: ModuleType) -> None:
    outs = (tile.zeros(f32, [64]).partition([16]), tile.zeros(f32, [32]).partition([16]))
    with pytest.raises(tile.GridError, match=r"disagree about the launch grid \('outs\[0\]' \[4\], 'outs\[1\]' \[2\]"):
        gk.grouped_scale(outs, _vectors(2), 1.0)


@pytest.mark.parametrize(
    ("kernel", "marker", "message"),
    [
        ("runtime_index", "runtime-index", "tuple index must be a compile-time int in range(-3, 3), got a runtime"),
        ("runtime_range", "runtime-range", "its range needs compile-time int bounds, e.g. range(len(xs))"),
        ("break_in_unrolled", "break-unrolled", "'break' is not supported in a loop unrolled at compile time"),
        ("store_to_input", "store-input", "a tensor has no method 'store'; only Mut outputs can be stored to"),
    ],
)
def test_kernel_misuse_is_a_compile_error_at_its_line(gk: ModuleType, kernel: str, marker: str, message: str) -> None:
    z = tile.zeros(f32, [64]).partition([16])
    extra = (1,) if kernel.startswith("runtime") else ()
    with pytest.raises(CompileError) as info:
        getattr(gk, kernel)(z, _vectors(), *extra)
    text = str(info.value)
    assert message in text, text
    assert line_of(marker) in text, text
    assert not z.moved


def test_bad_tuple_annotation_is_refused() -> None:
    def kernel(z: tile.Mut[tile.Tensor[f32, 16]], xs: tuple[tile.Tensor[f32, -1], tile.Tensor[f32, -1]]) -> None:
        pass

    with pytest.raises(tile.ArgumentError, match=re.escape("tuple[Tensor[dtype, shape], ...]")):
        tile.entry(kernel)
