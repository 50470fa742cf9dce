"""Review 12: what safe kernel code can do on the device. Kernels without ``unchecked=True`` tried to read or write out
of bounds of their arguments, write another block's output tile, or race, through the compiler's bounds proofs
(proven at compile time, host-checked at launch, guarded in the kernel). Each hole's test names it in its docstring,
failed before its fix, and asserts the typed error (or the right result); the GPU test (marked ``gpu``) runs the
changed code through tileiras. They run on the CPU interpreter, whose own
bounds check (``MemoryAccessError``) is a safety net the GPU does not have: a test expects the kernel's guard
(``KernelAssertionError`` with the compiler's message), never the net.

Holes found and fixed:

- a loop ``range(tile.maximum(s, 0), p.num_tiles[d])`` was trusted to start at 0 or above whatever the dtype of ``s``:
  with a u32 or u64 ``s`` the maximum is ``2**32 - 1`` (or more), which the loop's signed variable reads as -1, and
  with an i8 ``s`` the constant 200 wraps to -56. The index -1 went unguarded to a partition load (out of bounds of
  an input) or a sub-tile store (the previous block's tile). Now only a signed maximum whose constant the dtype holds,
  or an unsigned one narrower than 32 bits, counts as non-negative; anything else is guarded in the kernel.
- ``tile.extract(t, index, shape)`` took any index: a constant outside ``[0, dim // shape)`` compiled, and a run-time
  one had no check (Tile IR leaves both undefined; a register tile spilled to local memory would be addressed past its
  end). A constant is now a CompileError at the call; a run-time index is checked in the kernel (an assert on the CPU
  interpreter, a fault on the GPU) and clamped into range. An i64/u64 run-time index also failed Tile IR's verifier
  (extract takes i32) with an uncaught VerifyError; the checked, clamped index is now an i32.
- ``tile.printf`` only counted a format's ``%`` signs: ``%s`` made the GPU's vprintf dereference the value as a
  pointer (any device memory, printed; the interpreter printed a number), ``%*d`` read one argument more than was
  packed, ``%lld`` of an i32 read past it. ``tile.print`` put ``sep``/``end`` into the format unescaped (``end="%n"``
  is a conversion the IR verifier does not count). Now a format holds only ``%%`` and
  ``%[flags][width][.precision][length]conv`` with ``conv`` in ``diuoxX``/``eEfFgGaA`` matching its value's kind and
  width (`tile.compiler._printf`), a CompileError at the call otherwise; ``sep``/``end`` are escaped.

Bug found and fixed on the way (refused a valid launch, no safety hole): a narrow or unsigned partition index (a u8
200) was guarded against the tile count converted to its own dtype (300 tiles as a u8 are 44), so a valid index
trapped, and reached Tile IR in its own dtype (which reads a u8 200 as -56). Indices other than i32/i64 now become
i64 before the guard and the load.

Attempts that turned out already closed (the most important have a test below):

- u8/u16 ``tile.maximum(s, 0)`` as a loop start: zero-extended into the loop variable, so still proven and right.
- a kernel walking its output and reading an input at the block id, relaunched with a larger grid or a shorter
  input after a launch that passed (also through ``kernel.grid`` clones sharing the compile cache, on both launch
  paths): the host guard is checked at every launch (GridError), the partition is not moved.
- own-tile and walked outputs of different tile counts without a grid, or an own-tile output with a different
  explicit grid (GridError); an input indexed by the block id, a tuple element included, and a loop up to one
  input's tile count indexing another, relaunched with shorter inputs on a cached kernel (GridError/ArgumentError at
  every launch, not only the first).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

from tile.compiler import CompileError, CompileOptions, Target, specialize
from tile.compiler._kir import Block
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._typecheck import typecheck
from tile.frontend import f32
from tile.ir.interp import KernelAssertionError

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f16, f32, i8, i32, i64, u8, u16, u32, u64


@tile.entry
def subtiles_from_u32_maximum(z: Mut[Tensor[f32, (8,)]], s: u32):
    zs = z.subtiles((4,))
    for j in range(tile.maximum(s, 0), zs.num_tiles[0]):
        zs.store(tile.full((4,), 7.0, f32), (j,))  # SUB-U32


@tile.entry
def read_from_u32_maximum(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: u32):
    p = x.partition((4,))
    acc = tile.zeros((4,), f32)
    for j in range(tile.maximum(s, 0), p.num_tiles[0]):
        acc = acc + p.load((j,))  # READ-U32
    z.store(acc)


@tile.entry
def read_from_u64_maximum(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: u64):
    p = x.partition((4,))
    acc = tile.zeros((4,), f32)
    for j in range(tile.maximum(s, 0), p.num_tiles[0]):
        acc = acc + p.load((j,))  # READ-U64
    z.store(acc)


@tile.entry
def read_from_wrapped_i8_maximum(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: i8):
    p = x.partition((4,))
    acc = tile.zeros((4,), f32)
    for j in range(tile.maximum(s, 200), p.num_tiles[0]):  # 200 as an i8 is -56
        acc = acc + p.load((j,))  # READ-I8
    z.store(acc)


@tile.entry
def read_from_u16_maximum(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: u16):
    p = x.partition((4,))
    acc = tile.zeros((4,), f32)
    for j in range(tile.maximum(s, 0), p.num_tiles[0]):
        acc = acc + p.load((j,))
    z.store(acc)


@tile.entry
def extract_at(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: i32):
    t = x.partition((8,)).load((0,))
    z.store(tile.extract(t, (s,), (4,)))  # EXTRACT-RUNTIME


@tile.entry
def extract_at_u64(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: u64):
    z.store(x.partition((8,)).load((0,)).extract((s,), (4,)))  # EXTRACT-U64


@tile.entry
def extract_past_the_tile(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1]):
    t = x.partition((8,)).load((0,))
    z.store(tile.extract(t, (2,), (4,)))  # EXTRACT-CONST


@tile.entry
def extract_before_the_tile(z: Mut[Tensor[f32, (4, 4)]], x: Tensor[f32, (-1, -1)]):
    t = x.partition((4, 8)).load((0, 0))
    z.store(t.extract((0, -1), (4, 4)))  # EXTRACT-NEG


@tile.entry
def printf_string(z: Mut[Tensor[f32, (4,)]], s: i64):
    tile.printf("%s\\n", s)  # PRINTF-S
    z.store(0.0)


@tile.entry
def printf_star_width(z: Mut[Tensor[f32, (4,)]], s: i32):
    tile.printf("%*d\\n", s)  # PRINTF-STAR
    z.store(0.0)


@tile.entry
def printf_float_as_int(z: Mut[Tensor[f32, (4,)]], s: f32):
    tile.printf("%d\\n", s)  # PRINTF-KIND
    z.store(0.0)


@tile.entry
def printf_long_of_i32(z: Mut[Tensor[f32, (4,)]], s: i32):
    tile.printf("%lld\\n", s)  # PRINTF-LONG
    z.store(0.0)


@tile.entry
def print_with_percent_separators(z: Mut[Tensor[f32, (4,)]], s: i64, t: i32):
    tile.print("a%", s, t, sep="%s", end="%n\\n")
    tile.printf("%ld %5d %%n %.2f\\n", s, t, t.astype(f16))
    z.store(0.0)


@tile.entry
def walk_and_read_by_block(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1]):
    t = x.partition((4,)).load((tile.block_id()[0],))  # HOST-GUARD
    for idx in z.tiles():
        z.store(t, at=idx)


@tile.entry
def read_at_u8(z: Mut[Tensor[f32, (4,)]], x: Tensor[f32, -1], s: u8):
    z.store(x.partition((4,)).load((s,)))  # READ-AT-U8
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_review12_kernels", SOURCE, tmp_path_factory.mktemp("review12"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    (number,) = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.endswith(f"# {marker}")]
    return f"adversarial_review12_kernels.py:{number}:"


def _x(n: int) -> tile.Tensor:
    return tile.from_numpy(np.arange(n, dtype=np.float32))


# -- a loop start from tile.maximum(s, 0) is non-negative only where the loop variable reads it so ------------------


def test_an_unsigned_maximum_as_a_loop_start_does_not_prove_subtile_stores(kernels: ModuleType) -> None:
    """Hole: ``range(tile.maximum(s, 0), zs.num_tiles[0])`` with a u32 ``s`` of ``2**32 - 1`` started at -1 and stored
    the previous block's sub-tile (and before the first tile) unguarded; now the sub-tile index is checked."""
    host = np.full(16, -1.0, np.float32)
    with pytest.raises(KernelAssertionError, match=r"sub-tile index out of range for z\.subtiles\(\(4,\)\)") as info:
        kernels.subtiles_from_u32_maximum(tile.from_dlpack(host).partition([8]), 2**32 - 1).sync()
    assert line_of("SUB-U32").rstrip(":") in str(info.value)
    assert (host == -1.0).all()  # the check comes before the store: nothing was written
    (z, _) = kernels.subtiles_from_u32_maximum(tile.zeros(f32, [16]).partition([8]), 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(np.repeat([0.0, 7.0], 4), 2))


@pytest.mark.parametrize(
    ("kernel", "marker", "s"),
    [
        ("read_from_u32_maximum", "READ-U32", 2**32 - 1),
        ("read_from_u64_maximum", "READ-U64", 2**64 - 1),
        ("read_from_u64_maximum", "READ-U64", 2**32 - 1),  # -1 once truncated to the i32 loop variable
        ("read_from_wrapped_i8_maximum", "READ-I8", -100),
    ],
)
def test_a_maximum_the_loop_reads_as_negative_does_not_prove_loads(
    kernels: ModuleType, kernel: str, marker: str, s: int
) -> None:
    """Hole: the loop variable started at -1 (or -56) and indexed the input's partition with no guard: a read before
    the tensor on the GPU. Now the load is guarded in the kernel and traps."""
    with pytest.raises(KernelAssertionError, match=r"tile index out of range for x\.partition\(\(4,\)\)") as info:
        getattr(kernels, kernel)(tile.zeros(f32, [4]).partition([4]), _x(8), s).sync()
    assert line_of(marker).rstrip(":") in str(info.value)


@pytest.mark.parametrize("kernel", ["read_from_u32_maximum", "read_from_u64_maximum", "read_from_u16_maximum"])
def test_a_maximum_loop_start_still_computes(kernels: ModuleType, kernel: str) -> None:
    (z, _, _) = getattr(kernels, kernel)(tile.zeros(f32, [4]).partition([4]), _x(12), 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(4, 8) + np.arange(8, 12))


def _in_kernel_guards(fn: Any, *, unchecked: bool = False) -> int:
    """How many in-kernel index checks (``assert`` on the CPU target) ``fn`` compiles to."""

    def walk(block: Block) -> Iterator[str]:
        for op in block.ops:
            yield op.name
            for region in op.regions:
                yield from walk(region)

    spec = specialize(fn, {"z": (4,), "x": (64,)}, options=CompileOptions(unchecked=unchecked))
    return list(walk(typecheck(resolve(parse(fn)), spec, Target.cpu()).ir.body)).count("assert")


def test_a_u16_maximum_stays_proven(kernels: ModuleType) -> None:
    """A u16 is zero-extended into the i32 loop variable: ``maximum(s, 0)`` stays non-negative, no guard needed."""
    assert _in_kernel_guards(kernels.read_from_u16_maximum) == 0
    assert _in_kernel_guards(kernels.read_from_u32_maximum) == 1
    (z, _, _) = kernels.read_from_u16_maximum(tile.zeros(f32, [4]).partition([4]), _x(8), 2**16 - 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.zeros(4))  # starts past the 2 tiles: no iteration


# -- a narrow or unsigned partition index means its value ---------------------------------------------------------


def test_a_u8_index_reads_its_tile(kernels: ModuleType) -> None:
    """Bug: a u8 index 200 into 300 tiles was checked against 300 as a u8 (44) and trapped; it reads tile 200."""
    (z, _, _) = kernels.read_at_u8(tile.zeros(f32, [4]).partition([4]), _x(4 * 300), 200).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(800, 804))


def test_a_u8_index_past_the_count_traps(kernels: ModuleType) -> None:
    with pytest.raises(KernelAssertionError, match=r"tile index out of range for x\.partition\(\(4,\)\)") as info:
        kernels.read_at_u8(tile.zeros(f32, [4]).partition([4]), _x(4 * 200), 200).sync()
    assert line_of("READ-AT-U8").rstrip(":") in str(info.value)


# -- tile.extract stays inside its tile -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "marker", "message"),
    [
        ("extract_past_the_tile", "EXTRACT-CONST", r"extract index 2 along dim 0 is outside the tile: a tile of shape"),
        ("extract_before_the_tile", "EXTRACT-NEG", r"extract index -1 along dim 1 is outside the tile"),
    ],
)
def test_a_constant_extract_index_outside_the_tile_is_a_compile_error(
    kernels: ModuleType, kernel: str, marker: str, message: str
) -> None:
    """Hole: ``tile.extract(t, (2,), (4,))`` of an (8,) tile compiled to a Tile IR extract outside the tile
    (undefined: past a register tile spilled to local memory on the GPU)."""
    z = tile.zeros(f32, [4, 4] if kernel == "extract_before_the_tile" else [4])
    x = tile.zeros(f32, [4, 8] if kernel == "extract_before_the_tile" else [8])
    with pytest.raises(CompileError, match=message) as info:
        getattr(kernels, kernel)(z.partition(list(z.shape)), x)
    assert line_of(marker) in str(info.value)


@pytest.mark.parametrize(
    ("kernel", "marker", "s"),
    [
        ("extract_at", "EXTRACT-RUNTIME", 2),
        ("extract_at", "EXTRACT-RUNTIME", -1),
        ("extract_at", "EXTRACT-RUNTIME", 2**31 - 1),
        ("extract_at_u64", "EXTRACT-U64", 2**64 - 1),  # -1 if read as a signed index
        ("extract_at_u64", "EXTRACT-U64", 2**32),  # 0 if truncated to 32 bits
    ],
)
def test_a_run_time_extract_index_outside_the_tile_traps(kernels: ModuleType, kernel: str, marker: str, s: int) -> None:
    """Hole: a run-time ``tile.extract`` index had no check at all; now it is checked in the kernel and clamped."""
    with pytest.raises(KernelAssertionError, match=r"tile\.extract index out of range \(0 <= index < 2") as info:
        getattr(kernels, kernel)(tile.zeros(f32, [4]).partition([4]), _x(8), s).sync()
    assert line_of(marker).rstrip(":") in str(info.value)


@pytest.mark.parametrize(("kernel", "s"), [("extract_at", 0), ("extract_at", 1), ("extract_at_u64", 1)])
def test_a_run_time_extract_index_inside_the_tile_reads_its_slice(kernels: ModuleType, kernel: str, s: int) -> None:
    (z, _, _) = getattr(kernels, kernel)(tile.zeros(f32, [4]).partition([4]), _x(8), s).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(4 * s, 4 * s + 4))


def test_an_unchecked_kernel_keeps_no_extract_check(kernels: ModuleType) -> None:
    """``unchecked=True`` drops the run-time check and clamp (as for sub-tiles), not the compile-time refusal."""
    raw = tile.entry(unchecked=True)(kernels.extract_at.fn)
    (z, _, _) = raw(tile.zeros(f32, [4]).partition([4]), _x(8), 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(4, 8))
    assert _in_kernel_guards(raw.fn, unchecked=True) == 0
    assert _in_kernel_guards(kernels.extract_at.fn) == 1


def test_gpu_code_faults_and_clamps_an_extract_index(kernels: ModuleType) -> None:
    """On a GPU target the check is a faulting branch (no printf), and the index is clamped before the extract."""
    fn = kernels.extract_at.fn

    def walk(block: Block) -> Iterator[Any]:
        for op in block.ops:
            yield op
            for region in op.regions:
                yield from walk(region)

    spec = specialize(fn, {"z": (4,), "x": (64,)})
    names = [op.name for op in walk(typecheck(resolve(parse(fn)), spec, Target("sm_90")).ir.body)]
    assert "assert" not in names
    assert "store_ptr_tko" in names  # the fault
    assert names.index("maxi") < names.index("mini") < names.index("extract")  # max(v, 0), then min(., count - 1)


# -- tile.printf formats read only the values given -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "marker", "s", "message"),
    [
        ("printf_string", "PRINTF-S", 4096, r"the format has '%s\\n' at 0, which is not a conversion Tile prints"),
        ("printf_star_width", "PRINTF-STAR", 8, r"the format has '%\*d\\n' at 0, which is not a conversion"),
        ("printf_float_as_int", "PRINTF-KIND", 1.5, r"the conversion %d prints an integer but its value is f32"),
        ("printf_long_of_i32", "PRINTF-LONG", 7, r"the conversion %lld reads a 64-bit integer but its value is i32"),
    ],
)
def test_a_printf_conversion_that_reads_other_memory_is_a_compile_error(
    kernels: ModuleType, kernel: str, marker: str, s: float, message: str
) -> None:
    """Hole: the format was only counted: ``%s`` made the device's vprintf dereference the value as a pointer (any
    memory, printed), ``*`` read one argument more than was packed, and ``%lld`` of an i32 read past it. The
    interpreter printed ``%s`` as a number. Now any conversion outside ``%[flags][width][.prec][length][diuoxX
    eEfFgGaA]`` of the matching kind is a CompileError at the call."""
    z = tile.zeros(f32, [4]).partition([4])
    with pytest.raises(CompileError, match=message) as info:
        getattr(kernels, kernel)(z, s)
    assert line_of(marker) in str(info.value)
    assert not z.moved


def test_print_separators_are_literal_text(kernels: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """Hole: ``tile.print``'s ``sep`` and ``end`` went into the device format unescaped, so ``end="%n"`` became a
    conversion vprintf honours (one the IR verifier does not count) and ``sep="%s"`` one that reads a pointer."""
    kernels.print_with_percent_separators(tile.zeros(f32, [4]).partition([4]), 2**40, -3).sync()
    assert capsys.readouterr().out == f"a%%s{2**40}%s-3%n\n{2**40}    -3 %n -3.00\n"


# -- closed: host guards hold for every launch, not only the one that compiled ---------------------------------------


def test_host_guards_are_checked_at_every_launch_of_a_cached_kernel(kernels: ModuleType, path: str) -> None:
    """Closed: grids and input extents change between launches of one compiled kernel (and between ``kernel.grid``
    clones, which share its compile cache); the launcher checks the block-id guard each time, on both launch paths."""
    x = np.arange(16, dtype=np.float32)
    small, large = (kernels.walk_and_read_by_block.grid((g,)) for g in (2, 8))
    for _ in range(2):
        (z, _) = small(tile.zeros(f32, [16]).partition([4]), tile.from_numpy(x)).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy()[:4], x[:4])
        z = tile.zeros(f32, [16]).partition([4])
        with pytest.raises(tile.GridError, match=r"up to 7 \(the launch grid has 8 block\(s\) along x\)") as info:
            large(z, tile.from_numpy(x))
        assert line_of("HOST-GUARD").rstrip(":") in str(info.value)
        assert not z.moved
        with pytest.raises(tile.GridError, match=r"but x of shape \(4,\) has only 1 tile"):
            small(tile.zeros(f32, [16]).partition([4]), tile.from_numpy(x[:4]))


# -- the fixes on the GPU: the guarded, clamped and widened code compiles with tileiras and computes ------------------


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_runs_the_guarded_kernels_of_this_review(kernels: ModuleType, gpu: None) -> None:
    """Valid launches of every kernel whose code this review changed: an extract at a run-time index (checked and
    clamped, an i32 index), a u8 partition index (read as i64), loops from u32/u16 maxima (guarded / proven), sub-tile
    stores from a u32 maximum, and printf/print with the formats still allowed."""
    x = np.arange(4 * 300, dtype=np.float32)
    for s in (0, 1):
        (z, _, _) = kernels.extract_at(tile.zeros(f32, [4]).partition([4]), tile.from_numpy(x), s).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), x[4 * s : 4 * s + 4])
    (z, _, _) = kernels.extract_at_u64(tile.zeros(f32, [4]).partition([4]), tile.from_numpy(x), 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), x[4:8])
    (z, _, _) = kernels.read_at_u8(tile.zeros(f32, [4]).partition([4]), tile.from_numpy(x), 200).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), x[800:804])
    for kernel in ("read_from_u32_maximum", "read_from_u64_maximum", "read_from_u16_maximum"):
        (z, _, _) = getattr(kernels, kernel)(tile.zeros(f32, [4]).partition([4]), tile.from_numpy(x[:12]), 1).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), x[4:8] + x[8:12])
    (z, _) = kernels.subtiles_from_u32_maximum(tile.zeros(f32, [16]).partition([8]), 1).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(np.repeat([0.0, 7.0], 4), 2))
    (z, _, _) = kernels.print_with_percent_separators(tile.zeros(f32, [4]).partition([4]), 2**40, -3).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.zeros(4))
