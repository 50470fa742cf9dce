"""Safe kernels that tried to break the safety contract (an outside review), each now stopped by a typed error.

3. reading another block's output tile (``z.partition(...).load(i)``, ``tile.load_tile_like(z, w)`` with an output
   as the source, through helpers and aliases) is a `CompileError` at the read;
9. the launch grid of an output follows the access scheme the compiler found, not a search of the source text;
11. ``tile.entry(unchecked=True)(body)`` does not switch off the checks of ``tile.entry(body)``, whatever the order
    and whatever the compile caches hold;
12. a loop index the compiler trusts to be in range never wraps around its integer type.

The kernels are kernel-language source (shape strings are const generics, not Python names), so they are written to
a file and imported from there: error messages point at that file's lines.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

from tile.compiler import CompileError, CompileOptions, Specialization, Target, compile_kernel, knobs, specialize
from tile.compiler._api import clear_memory_cache
from tile.frontend import f32

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

WALK = False


@tile.entry
def reads_next_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.partition(z.shape).load((tile.block_id()[0] + 1,)) + 1.0)  # READ-NEXT


@tile.function
def peek(out, i):
    return out.partition(out.shape).load((i,))  # READ-HELPER


@tile.entry
def reads_through_helper(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(peek(z, 0) + 1.0)


@tile.entry
def reads_through_alias(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    w = z
    half = w.partition((64,))
    z.store(tile.cat(half.load((0,)), half.load((1,)), 0))  # READ-ALIAS


@tile.entry
def reads_other_output(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "C"]]):
    z.store(tile.full(z.shape, 1.0, f32))
    w.store(tile.load_tile_like(z, w))  # READ-LIKE


@tile.entry
def walks_and_reads_next(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    for idx in z.tiles():
        (i,) = idx
        z.store(z.partition(z.shape).load((i + 1,)), at=idx)  # READ-WALK


@tile.entry
def reads_own_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z))
    z.store(z.load() + tile.load_tile_like(z, z) + z.partition(z.shape).load((tile.block_id()[0],)))


@tile.entry
def walks_and_reads_own(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    for idx in z.tiles():
        (i,) = idx
        z.store(x.partition(z.shape).load((i,)), at=idx)
        z.store(z.load(at=idx) + z.partition(z.shape).load((i,)), at=idx)


@tile.entry
def reads_own_tile_3d(z: Mut[Tensor[f32, ("A", "B", "C")]], x: Tensor[f32, (-1, -1, -1)]):
    b = tile.block_id()
    z.store(x.partition(z.shape).load((b[0], b[1], b[2])))
    z.store(z.load() + z.partition(z.shape).load((b[0], b[1], b[2])))


def stores_rank4_own_tile(z: Mut[Tensor[f32, ("A", "B", "C", "D")]]):
    z.store(tile.full(z.shape, 1.0, f32))  # RANK4-OWN


def walks_rank4_and_reads_own(z: Mut[Tensor[f32, ("A", "B", "C", "D")]], x: Tensor[f32, (-1, -1, -1, -1)]):
    for idx in z.tiles():
        (i, j, k, m) = idx
        z.store(x.partition(z.shape).load((i, j, k, m)), at=idx)
        z.store(z.partition(z.shape).load((i, j, k, m)) * 2.0, at=idx)


@tile.entry
def walks_grouped_by_one(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    for idx in z.tiles(group=1):
        (i, j) = idx
        z.store(x.partition(z.shape).load((i, j)) + 1.0, at=idx)


@tile.entry
def walk_stores_each_tile_twice(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.partition(z.shape)
    for idx in z.tiles():
        for k in range(2):
            z.store(p.load((k,)), at=idx)


@tile.entry
def walks_only_in_dead_code(z: Mut[Tensor[f32, "B"]]):
    if WALK:
        for idx in z.tiles():
            z.store(tile.full(z.shape, 2.0, f32), at=idx)
    else:
        z.store(tile.full(z.shape, 1.0, f32))


@tile.entry
def idle_walk_then_own_store(z: Mut[Tensor[f32, "B"]]):
    for idx in z.tiles():
        pass
    z.store(tile.full(z.shape, 1.0, f32))  # OWN-AFTER-WALK


@tile.function
def fill_walk(out):
    for idx in out.tiles():
        out.store(tile.full(out.shape, 3.0, f32), at=idx)


@tile.entry
def walks_in_helper(z: Mut[Tensor[f32, "B"]]):
    fill_walk(z)


def gather_body(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    offsets = tile.block_id()[0] * z.shape[0] + tile.arange(z.shape[0])
    z.store(tile.gather(x.ptr() + offsets))  # PTR-USE


def shifted_body(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition(z.shape).load((tile.block_id()[0] + 1,)))  # SHIFTED


@tile.entry
def strided_with_break(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.partition(z.shape)
    acc = tile.zeros(z.shape, f32)
    for i in range(1, p.num_tiles[0], 2**31 - 1):
        acc = acc + p.load((i,))
        if i == 0:
            break
    z.store(acc)


@tile.entry
def strided_without_break(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.partition(z.shape)
    acc = tile.zeros(z.shape, f32)
    for i in range(1, p.num_tiles[0], 2**31 - 1):
        acc = acc + p.load((i,))
    z.store(acc)


@tile.entry
def strided_by_two(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.partition(z.shape)
    acc = tile.zeros(z.shape, f32)
    for i in range(0, p.num_tiles[0], 2):
        acc = acc + p.load((i,))
    z.store(acc)
"""

N, T = 1024, 128


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("adversarial_kernels", SOURCE, tmp_path_factory.mktemp("adversarial"))


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")


def line_of(marker: str) -> str:
    """``file:line`` of the kernel source line tagged ``# marker``."""
    (number,) = [i for i, text in enumerate(SOURCE.splitlines(), 1) if text.endswith(f"# {marker}")]
    return f"adversarial_kernels.py:{number}:"


def _x(n: int = N) -> tile.Tensor:
    return tile.from_numpy(np.arange(n, dtype=np.float32))


def _out(n: int = N, t: int = T) -> tile.Partition:
    return tile.zeros(f32, [n]).partition([t])


# -- 3. a safe kernel reads only its own output tile(s) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("reads_next_tile", "READ-NEXT"),
        ("reads_through_helper", "READ-HELPER"),
        ("reads_through_alias", "READ-ALIAS"),
        ("walks_and_reads_next", "READ-WALK"),
    ],
)
def test_reading_another_blocks_output_tile_is_a_compile_error(kernels: ModuleType, kernel: str, marker: str) -> None:
    z, x = _out(), _x()
    with pytest.raises(CompileError, match="other blocks") as info:
        getattr(kernels, kernel)(z, x)
    message = str(info.value)
    assert line_of(marker) in message
    assert "z.load()" in message  # the fix
    assert not z.moved  # nothing was launched or moved


def test_an_output_as_the_source_of_load_tile_like_is_a_compile_error(kernels: ModuleType) -> None:
    z, w = tile.zeros(f32, [2 * N]).partition([2 * T]), _out()  # both 8 tiles: one grid, tiles of other sizes
    with pytest.raises(CompileError, match="other blocks") as info:
        kernels.reads_other_output(z, w)
    assert line_of("READ-LIKE") in str(info.value)
    assert "tile.load_tile_like(z, w)" in str(info.value)


def test_own_tile_reads_stay_allowed(kernels: ModuleType) -> None:
    (z, x) = kernels.reads_own_tile(_out(), _x()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 3 * x.to_numpy())
    (z, x) = kernels.walks_and_reads_own.grid((3,))(_out(), _x()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 2 * x.to_numpy())


def test_own_tile_reads_of_a_rank_3_output_stay_allowed(kernels: ModuleType) -> None:
    """Mutant killed (scripts/mutation.py): the own-tile read rule limited to rank < 3 (``t.rank <= 3`` into
    ``< 3`` in ``_output_read``), which refused this kernel."""
    x = tile.from_numpy(np.arange(4 * 8 * 16, dtype=np.float32).reshape(4, 8, 16))
    (z, x) = kernels.reads_own_tile_3d(tile.zeros(f32, [4, 8, 16]).partition([2, 4, 8]), x).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), 2 * x.to_numpy())


def test_a_rank_4_output_needs_a_tile_walk(kernels: ModuleType) -> None:
    """A block id has three coordinates, so a rank-4 output (tile.compiler takes one; tile.frontend partitions up to
    rank 3) has no own tile: storing one is a compile error at the store that says to use rank <= 3, while walking
    its tiles with ``z.tiles()`` compiles, own-tile reads included. Mutants killed (scripts/mutation.py): ``rank >
    3`` into ``> 4`` in ``block_index`` (the store compiled), and ``t.rank <= 3`` into ``<= 4`` in ``_output_read``
    (the walk's read of its own tile was refused)."""
    consts = {"A": 1, "B": 1, "C": 2, "D": 4}
    own = kernels.stores_rank4_own_tile
    with pytest.raises(CompileError, match="cannot be indexed by the 3-D block grid") as info:
        compile_kernel(own, specialize(own, {"z": (2, 2, 4, 8)}, consts=consts), Target.cpu())
    assert line_of("RANK4-OWN") in str(info.value)
    assert "use rank <= 3" in str(info.value)
    walk = kernels.walks_rank4_and_reads_own
    compiled = compile_kernel(
        walk, specialize(walk, {"z": (2, 2, 4, 8), "x": (2, 2, 4, 8)}, consts=consts), Target.cpu()
    )
    assert compiled.abi.walks_tiles("z")


def test_a_walk_in_groups_of_one_row_copies_every_tile(kernels: ModuleType) -> None:
    """``group=1`` is the smallest group (row-major tile order). Mutant killed (scripts/mutation.py): ``group <= 0``
    into ``<= 1`` in ``method_mut_tiles`` (group=1 refused)."""
    data = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    z = tile.zeros(f32, [64, 32]).partition([16, 16])
    (z, _) = kernels.walks_grouped_by_one.grid((3,))(z, tile.from_numpy(data)).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), data + 1)


def test_stores_to_one_tile_in_an_inner_loop_stay_ordered(kernels: ModuleType) -> None:
    """Only a store at the tile its own loop hands out may leave that loop's token chain; an inner loop storing
    the outer loop's tile twice keeps its stores in order (the second wins). Mutant killed (scripts/mutation.py):
    ``a["at"] is scope.bound`` into ``is not`` in ``method_mut_store`` (the inner stores left unordered)."""
    (z, x) = kernels.walk_stores_each_tile_twice.grid((3,))(_out(), _x()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(x.to_numpy()[T : 2 * T], N // T))


# -- 9. the grid check uses the compiled access scheme -----------------------------------------------------------


def test_grid_of_an_own_tile_output_is_fixed_even_if_the_source_mentions_tiles(kernels: ModuleType) -> None:
    for grid in [(8, 2), (16,), (4,)]:  # two blocks per tile, blocks past the partition, tiles left unwritten
        z = _out()
        with pytest.raises(tile.GridError, match=r"differs from the grid \[8\] of output 'z'") as info:
            kernels.walks_only_in_dead_code.grid(grid)(z)
        assert "z.tiles()" in str(info.value)  # the fix
        assert not z.moved
    launch = kernels.walks_only_in_dead_code(_out())
    with pytest.raises(tile.GridError, match=r"\.grid\(\(16, 1, 1\)\)"):  # the grid goes in up front, checked
        launch.grid((16,))
    (z,) = launch.sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.ones(N, np.float32))


def test_walking_tiles_and_storing_the_own_tile_is_a_compile_error(kernels: ModuleType) -> None:
    with pytest.raises(CompileError, match="use one scheme per output") as info:
        kernels.idle_walk_then_own_store(_out())
    assert line_of("OWN-AFTER-WALK") in str(info.value)


def test_a_walk_in_a_helper_takes_any_grid(kernels: ModuleType) -> None:
    (z,) = kernels.walks_in_helper.grid((3,))(_out()).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


# -- 11. unchecked=True is local to the kernel that asked ---------------------------------------------------------


@pytest.mark.parametrize("twin_first", [True, False])
def test_an_unchecked_twin_does_not_switch_off_the_checks(kernels: ModuleType, twin_first: bool) -> None:
    if twin_first:
        raw = tile.entry(unchecked=True)(kernels.gather_body)
        checked = tile.entry(kernels.gather_body)
    else:
        checked = tile.entry(kernels.gather_body)
        raw = tile.entry(unchecked=True)(kernels.gather_body)
    (z, x) = raw(_out(), _x()).sync()  # compiles the unchecked kernel first: its code sits in the caches
    np.testing.assert_array_equal(z.unpartition().to_numpy(), x.to_numpy())
    with pytest.raises(CompileError, match=r"only allowed in kernels marked @tile.entry\(unchecked=True\)") as info:
        checked(_out(), _x())
    assert line_of("PTR-USE") in str(info.value)


def test_the_checked_twin_keeps_its_index_guards(kernels: ModuleType) -> None:
    tile.entry(unchecked=True)(kernels.shifted_body)
    checked = tile.entry(kernels.shifted_body)
    with pytest.raises(tile.TileError, match=r"tile index out of range for x\.partition") as info:
        checked(_out(), _x()).sync()
    assert line_of("SHIFTED").rstrip(":") in str(info.value)


def test_compile_caches_keep_checked_and_unchecked_code_apart(kernels: ModuleType, tmp_path: Path) -> None:
    settings = dataclasses.replace(knobs(), cache_dir=tmp_path)
    fn: Callable[..., Any] = kernels.gather_body
    spec = specialize(fn, {"z": (N,), "x": (N,)}, consts={"B": T})
    raw = dataclasses.replace(spec, options=dataclasses.replace(spec.options, unchecked=True))
    assert isinstance(raw, Specialization)
    for clear in (False, True):  # the in-memory cache, then the disk cache alone
        compile_kernel(fn, raw, Target.cpu(), settings=settings)
        if clear:
            clear_memory_cache()
        with pytest.raises(CompileError, match="unchecked"):
            compile_kernel(fn, spec, Target.cpu(), settings=settings)
    assert not CompileOptions().unchecked


# -- 12. trusted loop indices do not wrap around -------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["strided_with_break", "strided_without_break"])
def test_a_trusted_loop_index_does_not_wrap(kernels: ModuleType, kernel: str) -> None:
    (z, x) = getattr(kernels, kernel)(_out(), _x()).sync()
    expected = np.tile(x.to_numpy()[T : 2 * T], N // T)  # i = 1 only: the next index is past the tile count
    np.testing.assert_array_equal(z.unpartition().to_numpy(), expected)


def test_a_strided_trusted_loop_still_computes(kernels: ModuleType) -> None:
    (z, x) = kernels.strided_by_two(_out(), _x()).sync()
    tiles = x.to_numpy().reshape(N // T, T)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(tiles[0::2].sum(axis=0), N // T))
