"""Review 23: an adversarial look, from safe kernels only, at the compiler's bounds proofs (proven / host-checked /
guarded indices) and the ownership of output tiles, on the CPU interpreter in its strict form. Each hole's test names
it and failed before its fix.

Holes found and fixed:

- A ``range`` bound that is a Python constant outside i32 was materialized as an i32 and wrapped: ``for i in
  range(2**31, n)`` started at ``-2**31``, while the prover had trusted the constant start ``2**31 >= 0``, so the loop
  variable indexed a partition with no check at all (only "``n`` <= tile count" was checked); the interpreter's own
  bounds check was all that stopped it. Constants that i32 cannot hold now make the loop variable 64-bit, and ones
  that i64 cannot hold are a compile error. Constant tile indices likewise: ``p.load((-2**32 + 3,))`` loaded tile 3.
- One output walked in two orders (``z.tiles(group=2)`` then ``z.tiles()``, or two groups): each walk is a bijection
  from tiles to blocks, but the two give a tile to two different blocks, which both wrote it (an inter-block race the
  interpreter's race detector caught at run time, with or without an explicit grid). A second order is a compile
  error at the walk now.
- ``z.tiles(group=G)`` took any positive ``G``: with ``G >= 2**62`` the schedule's ``G * (tile count of dim 1)``
  wrapped its 64 bits and blocks 0 and 1 both got tile 0 (DataRaceError; one block got one tile twice, unordered).
  ``G`` is limited to ``1..2**31 - 1`` now (a group past dim 0's tile count already walks whole columns).

Tried and found solid (probed on the interpreter, not kept as tests unless cheap): loop variables read after their
loop, returned from a helper's loop or carried out of a ``break`` loop (compile errors, or a new value that gets a
guard); a partition or tensor chosen between branches (compile error); an index chosen between ``i`` and ``i + 100``
(guarded); ``range(2**31 - 1, n)`` with a ``break`` and ``range(0, count, 2**30)`` (64-bit, trusted); ``tile.maximum``
/ ``tile.minimum`` bounds of narrow, unsigned and i64 operands; a TileIndex kept after its walk (compile error);
tuple outputs of two tile grids, with and without ``.grid()`` (GridError); a rank-4 walked output (refused at
``partition``); a 2**31-element stride-0 input (ArgumentError: extents over 2**31 - 1); stride-0 and overlapping-row
outputs (AliasError); const generics that disagree with the partition or an input (ArgumentError / host guard);
graphs: a captured share cannot be unshared while the graph is open, a captured borrow freed while open is released
only at ``graph.close()`` (its pending count held), and partitioning or writing (DLPack is read-only) a captured input
is refused.

- (The lead's, after the review) Tile IR's meaning of ``shli``/``shri`` by the bit width or more and of ``divi``/
  ``remi`` by zero is not the interpreter's (0, the sign, division by 1): if tileiras treats them as poison (as LLVM
  does), an in-kernel guard on an index computed with them could be folded away. Run-time amounts and divisors are
  now made defined in the kernel (a select around the op, the interpreter's meaning), constant ones outside the
  defined range are compile errors.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from helpers_adversarial import load_source

import tile.compiler as tc
import tile.frontend as tile
from tile import ir
from tile.compiler import CompileError
from tile.frontend import f32
from tile.ir.interp import KernelAssertionError

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32, i32, i64


@tile.entry
def start_past_i32(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], n: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(2147483648, n):
        acc = acc + px.load((i,))  # START-PAST-I32
    z.store(acc)


@tile.entry
def start_past_i64(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], n: i32):
    px = x.partition((16,))
    acc = tile.zeros((16,), f32)
    for i in range(18446744073709551616, n):  # START-PAST-I64
        acc = acc + px.load((i,))
    z.store(acc)


@tile.entry
def index_wraps_in_i32(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)]):
    z.store(x.partition((16,)).load((-4294967293,)))  # WRAPPED-CONST


@tile.entry
def two_walk_orders(z: Mut[Tensor[f32, (4, 4)]]):
    for idx in z.tiles(group=2):
        z.store(tile.full((4, 4), 1.0, f32), at=idx)
    for idx in z.tiles():  # SECOND-ORDER
        z.store(z.load(at=idx) + 1.0, at=idx)


@tile.entry
def walk_order_by_block(z: Mut[Tensor[f32, (4, 4)]]):
    if tile.block_id()[0] == 0:
        for idx in z.tiles(group=4):
            z.store(tile.full((4, 4), 1.0, f32), at=idx)
    else:
        for idx in z.tiles(group=2):  # ORDER-BY-BLOCK
            z.store(tile.full((4, 4), 2.0, f32), at=idx)


@tile.entry
def one_walk_order_twice(z: Mut[Tensor[f32, (4, 4)]]):
    for idx in z.tiles(group=2):
        z.store(tile.full((4, 4), 1.0, f32), at=idx)
    for idx in z.tiles(group=2):
        z.store(z.load(at=idx) + 1.0, at=idx)


@tile.entry
def group_wraps_i64(z: Mut[Tensor[f32, (4, 4)]]):
    for idx in z.tiles(group=4611686018427387904):  # HUGE-GROUP
        z.store(tile.full((4, 4), 1.0, f32), at=idx)


@tile.entry
def largest_group(z: Mut[Tensor[f32, (4, 4)]]):
    for idx in z.tiles(group=2147483647):
        z.store(tile.full((4, 4), 1.0, f32), at=idx)


@tile.entry
def index_past_i64(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)]):
    z.store(x.partition((16,)).load((2**64,)))  # CONST-PAST-I64


@tile.entry
def shifted_index(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], k: i32):
    z.store(x.partition((16,)).load((1 << k,)))  # SHIFTED-INDEX


@tile.entry
def divided_index(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], d: i32):
    z.store(x.partition((16,)).load((7 // d + 7 % d,)))  # DIVIDED-INDEX


@tile.entry
def float_index(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], f: f32):
    z.store(x.partition((16,)).load((f.astype(i32),)))  # FLOAT-INDEX


@tile.entry
def shift_by_const(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], k: i32):
    z.store(x.partition((16,)).load((k << 40,)))  # SHIFT-BY-40


@tile.entry
def divide_by_const_zero(z: Mut[Tensor[f32, (16,)]], x: Tensor[f32, (-1,)], k: i32):
    z.store(x.partition((16,)).load((k // 0,)))  # DIVIDE-BY-0
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_review23_kernels", SOURCE, tmp_path_factory.mktemp("adversarial_review23"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    (number,) = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.endswith(f"# {marker}")]
    return f"adversarial_review23_kernels.py:{number}"


def _vec(n: int = 64) -> tile.Tensor:
    return tile.from_numpy(np.arange(n, dtype=np.float32))


def _out() -> tile.Partition:
    return tile.zeros(f32, [16]).partition([16])


# -- hole: a range bound outside i32 wrapped, and the wrapped start passed as proven ---------------------------------


def test_a_range_starting_past_i32_does_not_wrap_to_a_negative_unchecked_index(kernels: ModuleType) -> None:
    """Hole: ``range(2**31, n)`` ran from ``-2**31`` with no in-kernel check (the start was trusted ``>= 0``); the
    interpreter's own bounds check raised MemoryAccessError, a GPU read tile ``-2**31``. The loop is 64-bit now and,
    as Python says, runs no iteration."""
    (z, *_) = kernels.start_past_i32(_out(), _vec(), 4).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 0.0)


@pytest.mark.parametrize("cubin", [False, pytest.param(True, marks=pytest.mark.requires_tileiras)])
def test_the_gpu_loop_over_a_start_past_i32_is_64_bit(kernels: ModuleType, cubin: bool) -> None:
    """The GPU lowering (and tileiras where installed) gets a 64-bit loop from ``2**31``, not i32 from ``-2**31``."""
    fn = kernels.start_past_i32
    compiled = tc.compile_kernel(fn, tc.specialize(fn, {"z": (16,), "x": (64,)}), "sm_90", cache=False, cubin=cubin)
    text = ir.print_module(ir.read_bytecode(compiled.bytecode))
    assert "-2147483648" not in text
    (loop,) = [line for line in text.splitlines() if " for %" in line]
    assert loop.strip().startswith("%for = for %loopIdx in (%cst_2147483648_i64 to "), loop
    assert ": tile<i64>" in loop
    if cubin:
        assert compiled.cubin is not None
        assert compiled.cubin[:4] == b"\x7fELF"


def test_a_range_bound_past_i64_is_a_compile_error(kernels: ModuleType) -> None:
    with pytest.raises(CompileError, match=r"the range bound 18446744073709551616 does not fit a 64-bit index") as e:
        kernels.start_past_i64(_out(), _vec(), 4)
    assert line_of("START-PAST-I64") in str(e.value)


def test_a_constant_index_outside_i32_is_not_wrapped_into_the_partition(kernels: ModuleType) -> None:
    """Hole: ``-2**32 + 3`` became the i32 ``3``, which passed the in-kernel check and loaded tile 3."""
    with pytest.raises(KernelAssertionError, match=r"tile index out of range for x\.partition\(\(16,\)\)") as e:
        kernels.index_wraps_in_i32(_out(), _vec()).sync()
    assert line_of("WRAPPED-CONST") in str(e.value)


def test_a_constant_index_past_i64_is_a_compile_error(kernels: ModuleType) -> None:
    with pytest.raises(CompileError, match=r"tile index 18446744073709551616 does not fit a 64-bit index") as e:
        kernels.index_past_i64(_out(), _vec())
    assert line_of("CONST-PAST-I64") in str(e.value)


# -- hole: one output walked in two tile orders ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "marker", "orders"),
    [
        ("two_walk_orders", "SECOND-ORDER", "group=2.*group=None"),
        ("walk_order_by_block", "ORDER-BY-BLOCK", "group=4.*group=2"),
    ],
)
@pytest.mark.parametrize("grid", [None, (3,)])
def test_an_output_walked_in_two_tile_orders_is_a_compile_error(
    kernels: ModuleType, kernel: str, marker: str, orders: str, grid: tuple[int, ...] | None
) -> None:
    """Hole: block 2 wrote tile 1 in the grouped order while block 1 wrote it in the row-major one (DataRaceError)."""
    z = tile.zeros(f32, [16, 16]).partition([4, 4])
    fn = getattr(kernels, kernel)
    with pytest.raises(CompileError, match=rf"'z' is walked in two tile orders \(z\.tiles\({orders}") as e:
        (fn if grid is None else fn.grid(grid))(z)
    assert line_of(marker) in str(e.value)
    assert not z.moved


@pytest.mark.parametrize("grid", [None, (3,)])
def test_one_walk_order_twice_stays_allowed(kernels: ModuleType, grid: tuple[int, ...] | None) -> None:
    z = tile.zeros(f32, [16, 16]).partition([4, 4])
    fn = kernels.one_walk_order_twice
    (z,) = (fn if grid is None else fn.grid(grid))(z).sync()  # the race detector watches the launch
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 2.0)


# -- hole: a group= so large that the grouped schedule wrapped ------------------------------------------------------


@pytest.mark.parametrize("grid", [None, (3,)])
def test_a_group_that_wraps_the_schedule_is_a_compile_error(kernels: ModuleType, grid: tuple[int, ...] | None) -> None:
    """Hole: ``group=2**62`` made ``group * 4`` wrap to 0 in 64 bits; blocks 0 and 1 both wrote tile 0."""
    z = tile.zeros(f32, [16, 16]).partition([4, 4])
    fn = kernels.group_wraps_i64
    with pytest.raises(CompileError, match=r"group= takes a compile-time int in 1\.\.2\*\*31 - 1") as e:
        (fn if grid is None else fn.grid(grid))(z)
    assert line_of("HUGE-GROUP") in str(e.value)
    assert not z.moved


@pytest.mark.parametrize("grid", [None, (3,)])
def test_the_largest_group_walks_every_tile_once(kernels: ModuleType, grid: tuple[int, ...] | None) -> None:
    fn = kernels.largest_group
    (z,) = (fn if grid is None else fn.grid(grid))(tile.zeros(f32, [16, 16]).partition([4, 4])).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 1.0)  # the race detector watches the launch


# -- hole (lead): shifts by the bit width or more and divisions by zero, undefined in Tile IR --------------------------


def _ops_of(fn: object) -> str:
    compiled = tc.compile_kernel(fn, tc.specialize(fn, {"z": (16,), "x": (64,)}), "sm_90", cache=False, cubin=False)
    return ir.print_module(ir.read_bytecode(compiled.bytecode))


@pytest.mark.parametrize(("k", "tile_index"), [(2, 4), (32, 0), (40, 0), (-1, 0)])
def test_a_run_time_shift_amount_is_defined_in_the_kernel(kernels: ModuleType, k: int, tile_index: int) -> None:
    """``1 << k`` for k of 32 or more (or negative: huge unsigned) is 0, on the interpreter and, through the select
    the lowering emits around the shift, on the GPU (where a bare ``shli`` by 32 may be undefined)."""
    (z, *_) = kernels.shifted_index(_out(), _vec(128), k).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)
    text = _ops_of(kernels.shifted_index)
    shift = next(line for line in text.splitlines() if " shli " in line)
    guard = [line for line in text.splitlines() if "cmpi less_than" in line and "unsigned" in line]
    assert guard, f"no unsigned range check of the shift amount in:\n{text}"
    assert any(" select " in line for line in text.splitlines()[text.splitlines().index(shift) :]), text


@pytest.mark.parametrize(("d", "tile_index"), [(2, 4), (7, 1), (0, 7)])
def test_a_run_time_divisor_of_zero_is_defined_in_the_kernel(kernels: ModuleType, d: int, tile_index: int) -> None:
    """``7 // d + 7 % d`` divides by 1 where ``d`` is 0 (tile 7, the interpreter's meaning), and the lowering never
    hands ``divi``/``remi`` a divisor it has not replaced where zero."""
    (z, *_) = kernels.divided_index(_out(), _vec(128), d).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)
    text = _ops_of(kernels.divided_index)
    lines = text.splitlines()
    for op in (" divi ", " remi "):
        at = next(i for i, line in enumerate(lines) if op in line)
        assert any(" select " in line for line in lines[:at]), f"{op.strip()} without a guarded divisor:\n{text}"


@pytest.mark.parametrize(
    ("kernel", "marker", "message"),
    [
        ("shift_by_const", "SHIFT-BY-40", r"a shift by 40 is outside 0\.\.31 for i32 tiles"),
        ("divide_by_const_zero", "DIVIDE-BY-0", r"integer division or remainder by the constant 0"),
    ],
)
def test_constant_shift_amounts_and_divisors_outside_the_defined_range_are_compile_errors(
    kernels: ModuleType, kernel: str, marker: str, message: str
) -> None:
    with pytest.raises(CompileError, match=message) as e:
        getattr(kernels, kernel)(_out(), _vec(), 3)
    assert line_of(marker) in str(e.value)


@pytest.mark.parametrize(("f", "tile_index"), [(2.9, 2), (-0.5, 0), (float("nan"), 0)])
def test_a_float_converted_to_an_index_is_defined_for_every_input(
    kernels: ModuleType, f: float, tile_index: int
) -> None:
    """``f.astype(i32)`` truncates, NaN gives 0, and an out-of-range or infinite ``f`` is clamped (no wrap): Tile IR
    leaves ``ftoi`` of those undefined, so the lowering clamps before converting."""
    (z, *_) = kernels.float_index(_out(), _vec(128), f).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16) + 16 * tile_index)


@pytest.mark.parametrize("f", [float("inf"), 1e30, 4294967296.0])
def test_a_float_past_i32_converts_to_the_i32_maximum_and_fails_the_index_check(kernels: ModuleType, f: float) -> None:
    """Before: the interpreter wrapped ``2**32`` to tile 0 (in range: it loaded) and the device was undefined; now
    both clamp to ``2**31 - 1`` (or its nearest f32 below), which the guard refuses."""
    with pytest.raises(KernelAssertionError, match=r"tile index out of range") as e:
        kernels.float_index(_out(), _vec(128), f).sync()
    assert line_of("FLOAT-INDEX") in str(e.value)
    text = _ops_of(kernels.float_index)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if " ftoi " in line)
    assert sum(" select " in line for line in lines[:at]) >= 3, f"ftoi without its clamp:\n{text}"
