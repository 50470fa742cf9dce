"""Properties checked on random inputs: a tiled copy reproduces its input whatever the tile shape, dim_map or
overhang; loading through ``dim_map=[1, 0]`` is a transpose; and the race detector flags a data-dependent tile
store exactly when two blocks pick the same tile."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tile.ir import (
    AtomicRMWMode,
    Builder,
    Function,
    FunctionType,
    MemoryOrdering,
    MemoryScope,
    Module,
    Padding,
    PartitionViewType,
    TensorViewType,
    f32,
    i32,
    interp,
    ptr,
    scalar,
    tile,
)

I32 = scalar(i32)
TV = TensorViewType(f32, (None, None), (None, None))
pow2 = st.sampled_from([1, 2, 4, 8, 16])


def _copy_kernel(src_view: PartitionViewType, dst_view: PartitionViewType) -> Module:
    """Block (i, j) loads tile (i, j) through `src_view` and stores it as tile (i, j) through `dst_view`."""
    fn = Function("copy", FunctionType((scalar(ptr(f32)), I32, I32, I32, I32) * 2))
    b = Builder(fn.body)
    p = fn.params
    src = b.call("make_tensor_view", p[0], p[1:3], p[3:5], result_type=TV).results[0]
    dst = b.call("make_tensor_view", p[5], p[6:8], p[8:10], result_type=TV).results[0]
    bx, by, _ = b.get_tile_block_id()
    tile, _ = b.load_view_tko(b.make_partition_view(src, result_type=src_view), [bx, by])
    b.call("store_view_tko", tile, b.make_partition_view(dst, result_type=dst_view), [bx, by])
    b.return_()
    return Module([fn])


def _args(*arrays: Any) -> list[Any]:
    return [v for a in arrays for v in (a, *a.shape, *(s // a.itemsize for s in a.strides))]


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), tr=pow2, tc=pow2, fortran=st.booleans())
def test_tiled_copy_reproduces_any_array(rows: int, cols: int, tr: int, tc: int, fortran: bool) -> None:
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    x = np.asfortranarray(x) if fortran else x
    y = np.full((rows, cols), np.nan, np.float32)
    view = PartitionViewType((tr, tc), TV, (0, 1), Padding.ZERO)
    interp.launch(_copy_kernel(view, view), (-(-rows // tr), -(-cols // tc)), _args(x, y))
    np.testing.assert_array_equal(y, x)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), cols=st.integers(1, 40), tr=pow2, tc=pow2)
def test_dim_map_swap_loads_transposed_tiles(rows: int, cols: int, tr: int, tc: int) -> None:
    """Tile (i, j) of y = x.T is tile (j, i) of x loaded through dim_map [1, 0] with the tile shape swapped."""
    x = np.random.default_rng(rows * 41 + cols).standard_normal((rows, cols)).astype(np.float32)
    y = np.full((cols, rows), np.nan, np.float32)
    src = PartitionViewType((tc, tr), TV, (1, 0), Padding.ZERO)
    dst = PartitionViewType((tc, tr), TV, (0, 1))
    interp.launch(_copy_kernel(src, dst), (-(-cols // tc), -(-rows // tr)), _args(x, y))
    np.testing.assert_array_equal(y, x.T)


def _scatter_tiles_kernel() -> Module:
    """Block b stores a tile of 4 values at the tile index dest[b] of z (an unchecked, data-dependent store)."""
    tv1 = TensorViewType(f32, (None,), (None,))
    fn = Function("scatter_tiles", FunctionType((scalar(ptr(f32)), I32, I32, scalar(ptr(i32)))))
    b = Builder(fn.body)
    z = b.call("make_tensor_view", fn.params[0], [fn.params[1]], [fn.params[2]], result_type=tv1).results[0]
    bx, _, _ = b.get_tile_block_id()
    dest, _ = b.load_ptr_tko(b.offset(fn.params[3], bx))
    as_float = b.itof(bx, signedness="signed", result_type=scalar(f32))
    value = b.broadcast(b.reshape(as_float, result_type=tile((1,), f32)), result_type=tile((4,), f32))
    b.call("store_view_tko", value, b.make_partition_view(z, result_type=PartitionViewType((4,), tv1, (0,))), [dest])
    b.return_()
    return Module([fn])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=10))
def test_race_detector_flags_exactly_the_non_injective_tile_maps(dest: list[int]) -> None:
    z = np.zeros(24, np.float32)
    table = np.asarray(dest, np.int32)
    duplicated = sorted({d for d in dest if dest.count(d) > 1})
    if not duplicated:
        interp.launch(_scatter_tiles_kernel(), len(dest), [z, 24, 1, table])
        assert all(z[4 * d] == b for b, d in enumerate(dest))
        return
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_scatter_tiles_kernel(), len(dest), [z, 24, 1, table])
    writers = [b for b, d in enumerate(dest) if d == duplicated[0]]
    assert info.value.blocks == ((writers[0], 0, 0), (writers[1], 0, 0))
    assert info.value.element == f"arg0[{4 * duplicated[0]}]"
    assert info.value.count == 4 * len(duplicated)


def _atomic_add_kernel() -> Module:
    """counts[idx[i]] += 1 for the 16 indices of idx; old values go to olds[i]."""
    fn = Function("atomic_hist", FunctionType((scalar(ptr(i32)),) * 3))
    b = Builder(fn.body)
    counts, idx_ptr, olds_ptr = fn.params
    lanes = b.iota(result_type=tile((16,), i32))

    def pointers(base: Any, offsets: Any) -> Any:
        one = b.reshape(base, result_type=tile((1,), ptr(i32)))
        return b.offset(b.broadcast(one, result_type=tile((16,), ptr(i32))), offsets)

    idx, _ = b.load_ptr_tko(pointers(idx_ptr, lanes))
    ones, relaxed = b.constant(1, tile((16,), i32)), MemoryOrdering.RELAXED
    add = AtomicRMWMode.ADD
    olds, _ = b.atomic_rmw_tko(
        pointers(counts, idx), ones, mode=add, memory_ordering_semantics=relaxed, memory_scope=MemoryScope.DEVICE
    )
    b.call("store_ptr_tko", pointers(olds_ptr, lanes), olds)
    b.return_()
    return Module([fn])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=16, max_size=16))
def test_atomic_add_with_repeated_addresses_applies_in_order(indices: list[int]) -> None:
    counts, olds = np.zeros(5, np.int32), np.zeros(16, np.int32)
    interp.launch(_atomic_add_kernel(), 1, [counts, np.asarray(indices, np.int32), olds])
    assert counts.tolist() == np.bincount(indices, minlength=5).tolist()
    assert olds.tolist() == [indices[:i].count(d) for i, d in enumerate(indices)]
