"""Inter-block race detection: conflicting kernels are reported with both blocks, the element and the op
location; race-free kernels (including atomics from every block) stay silent."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tile.ir import (
    AtomicRMWMode,
    Builder,
    FileLoc,
    Function,
    FunctionType,
    MemoryOrdering,
    MemoryScope,
    Module,
    PartitionViewType,
    TensorViewType,
    Value,
    f32,
    i32,
    interp,
    ptr,
    scalar,
    tile,
)

I32 = scalar(i32)
Arr = npt.NDArray[Any]
STORE_LOC = FileLoc("kernels.py", 12, 5)
LOAD_LOC = FileLoc("kernels.py", 10, 9)


def _kernel(name: str, n_arrays: int) -> tuple[Function, Builder, list[Value], list[Value]]:
    """A kernel over 1-D f32 arrays (ptr, shape, stride each); returns fn, builder, views, pointer params."""
    fn = Function(name, FunctionType((scalar(ptr(f32)), I32, I32) * n_arrays))
    b = Builder(fn.body)
    tv = TensorViewType(f32, (None,), (None,))
    views = [
        b.call(
            "make_tensor_view", fn.params[3 * k], [fn.params[3 * k + 1]], [fn.params[3 * k + 2]], result_type=tv
        ).results[0]
        for k in range(n_arrays)
    ]
    return fn, b, views, [fn.params[3 * k] for k in range(n_arrays)]


def _part(b: Builder, view: Value, t: int) -> Value:
    tv = view.type
    assert isinstance(tv, TensorViewType)
    return b.make_partition_view(view, result_type=PartitionViewType((t,), tv, (0,)))


def _args(*arrays: Arr) -> list[Any]:
    return [v for a in arrays for v in (a, a.shape[0], a.strides[0] // a.itemsize)]


def _store_at(index_of: Any, t: int = 4) -> Module:
    """Block b loads tile b of x and stores it at tile index_of(builder, b) of z."""
    fn, b, (x, z), _ = _kernel("store_at", 2)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    tx, _ = b.load_view_tko(_part(b, x, t), [bx], tok)
    b.call("store_view_tko", tx, _part(b, z, t), [index_of(b, bx)], tok, loc=STORE_LOC)
    b.return_()
    return Module([fn])


def test_two_blocks_writing_one_tile_is_a_race_naming_blocks_element_and_location() -> None:
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_store_at(lambda b, bx: b.constant(0, I32)), 4, _args(x, z))
    err = info.value
    assert err.blocks == ((0, 0, 0), (1, 0, 0))
    assert err.element == "arg3[0]"
    assert err.first[2] == err.second[2] == "write"
    assert "kernels.py:12:5" in str(err)
    assert err.count == 4
    assert isinstance(err, RuntimeError)


def test_race_error_pickles_with_its_fields() -> None:
    err = interp.DataRaceError("z[3]", ((0, 0, 0), "k.py:1:1", "write"), ((2, 0, 0), "k.py:2:1", "read"), 5)
    back = pickle.loads(pickle.dumps(err))
    assert (back.element, back.first, back.second, back.count) == (err.element, err.first, err.second, 5)
    assert str(back) == str(err)


def _permute_kernel() -> Module:
    """The permute race of the cuTile Rust paper: block i stores its tile at index perm[i] (unchecked)."""
    fn, b, (x, z, _), (_, _, perm_ptr) = _kernel("permute", 3)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    tx, _ = b.load_view_tko(_part(b, x, 4), [bx], tok)
    where = b.offset(perm_ptr, bx)
    dest_f, _ = b.load_ptr_tko(where, token=tok, memory_ordering_semantics=MemoryOrdering.WEAK)
    dest = b.ftoi(dest_f, signedness="signed", result_type=I32)
    b.call("store_view_tko", tx, _part(b, z, 4), [dest], tok, loc=STORE_LOC)
    b.return_()
    return Module([fn])


def test_permute_by_a_true_permutation_is_race_free() -> None:
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    perm = np.array([2, 0, 3, 1], np.float32)
    interp.launch(_permute_kernel(), 4, _args(x, z, perm))
    np.testing.assert_array_equal(z.reshape(4, 4)[perm.astype(int)], x.reshape(4, 4))


def test_permute_with_a_repeated_destination_races_between_those_blocks() -> None:
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    perm = np.array([2, 0, 2, 1], np.float32)
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_permute_kernel(), 4, _args(x, z, perm))
    assert info.value.blocks == ((0, 0, 0), (2, 0, 0))
    assert info.value.element == "arg3[8]"


def test_reading_a_tile_another_block_writes_is_a_race() -> None:
    """In-place shift: block b reads tile b+1 of z and writes tile b of z."""
    fn, b, (z,), _ = _kernel("shift", 1)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    nxt = b.addi(bx, b.constant(1, I32))
    t, _ = b.load_view_tko(_part(b, z, 4), [nxt], tok, loc=LOAD_LOC)
    b.call("store_view_tko", t, _part(b, z, 4), [bx], tok, loc=STORE_LOC)
    b.return_()
    z_arr = np.arange(16, dtype=np.float32)
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(Module([fn]), 3, _args(z_arr))
    err = info.value
    assert err.blocks == ((0, 0, 0), (1, 0, 0))
    assert (err.first[2], err.first[1]) == ("read", "kernels.py:10:9")
    assert (err.second[2], err.second[1]) == ("write", "kernels.py:12:5")
    assert "tile block (0, 0, 0) reads it at kernels.py:10:9" in str(err)


def test_race_check_can_be_disabled() -> None:
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    interp.launch(_store_at(lambda b, bx: b.constant(0, I32)), 4, _args(x, z), check_races=False)
    assert z[:4].tolist() == [12, 13, 14, 15]


def _counter_kernel(plain_store_in_block0: bool) -> Module:
    """Every block atomically adds 1 to counter[0]; optionally block 0 then (token-ordered) stores into it plainly."""
    fn, b, (_,), (counter,) = _kernel("count", 1)
    one = b.constant(1.0, scalar(f32))
    _, after_add = b.atomic_rmw_tko(
        counter,
        one,
        mode=AtomicRMWMode.ADDF,
        memory_ordering_semantics=MemoryOrdering.RELAXED,
        memory_scope=MemoryScope.DEVICE,
    )
    if plain_store_in_block0:
        bx, _, _ = b.get_tile_block_id()
        is_first = b.cmpi(bx, b.constant(0, I32), comparison_predicate="equal", signedness="signed")
        with b.if_(is_first) as br, br.then_():
            b.call("store_ptr_tko", counter, b.constant(0.0, scalar(f32)), None, after_add, loc=STORE_LOC)
            b.yield_()
    b.return_()
    return Module([fn])


def test_atomics_from_every_block_do_not_race() -> None:
    counter = np.zeros(1, np.float32)
    interp.launch(_counter_kernel(False), 7, _args(counter))
    assert counter[0] == 7


def test_a_plain_store_against_other_blocks_atomics_races() -> None:
    """Device-scope atomics are atomic between blocks, so the tl_blk hint has nothing to say here. Mutant killed
    (scripts/mutation.py): a site counted as block-local when it is strong at any scope (``and`` into ``or``)."""
    counter = np.zeros(1, np.float32)
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_counter_kernel(True), 3, _args(counter))
    kinds = {info.value.first[2], info.value.second[2]}
    assert kinds == {"write", "atomic"}
    assert info.value.hint is None
    assert "tl_blk" not in str(info.value)


def test_each_block_writing_its_own_tile_of_a_2d_grid_is_silent() -> None:
    fn = Function("fill", FunctionType((scalar(ptr(f32)), I32, I32, I32, I32)))
    b = Builder(fn.body)
    tv_t = TensorViewType(f32, (None, None), (None, None))
    tv = b.call("make_tensor_view", fn.params[0], fn.params[1:3], fn.params[3:5], result_type=tv_t).results[0]
    view = b.make_partition_view(tv, result_type=PartitionViewType((2, 4), tv_t, (0, 1)))
    bx, by, _ = b.get_tile_block_id()
    value = b.broadcast(
        b.reshape(
            b.itof(b.addi(bx, b.muli(by, b.constant(10, I32))), signedness="signed", result_type=scalar(f32)),
            result_type=tile((1, 1), f32),
        ),
        result_type=tile((2, 4), f32),
    )
    b.call("store_view_tko", value, view, [bx, by])
    b.return_()
    z = np.zeros((6, 8), np.float32)
    interp.launch(Module([fn]), (3, 2), [z, 6, 8, 8, 1])
    assert z[::2, ::4].tolist() == [[0, 10], [1, 11], [2, 12]]


def test_race_report_uses_the_name_the_array_was_mapped_with() -> None:
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    memory = interp.Memory()
    memory.map(z, name="out")
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_store_at(lambda b, bx: b.constant(1, I32)), 2, _args(x, z), memory)
    assert info.value.element == "out[4]"


def _add_across_two() -> Module:
    """One acq_rel atomic add into two arrays: lanes 0..3 add 1 to element 4*b + lane of `a` (each block its own),
    lanes 4..7 to element lane - 4 of `c` (every block the same four)."""
    fn, b, _, (pa, pc) = _kernel("span", 2)
    lanes = b.iota(result_type=tile((8,), i32))
    bx, _, _ = b.get_tile_block_id()
    four = b.constant(4, tile((8,), i32))
    base = b.broadcast(
        b.reshape(b.muli(bx, b.constant(4, I32)), result_type=tile((1,), i32)), result_type=tile((8,), i32)
    )
    in_a = b.offset(
        b.broadcast(b.reshape(pa, result_type=tile((1,), ptr(f32))), result_type=tile((8,), ptr(f32))),
        b.addi(lanes, base),
    )
    in_c = b.offset(
        b.broadcast(b.reshape(pc, result_type=tile((1,), ptr(f32))), result_type=tile((8,), ptr(f32))),
        b.subi(lanes, four),
    )
    first = b.cmpi(lanes, four, comparison_predicate="less_than", signedness="signed")
    b.atomic_rmw_tko(
        b.select(first, in_a, in_c),
        b.constant(1.0, tile((8,), f32)),
        mode=AtomicRMWMode.ADDF,
        memory_ordering_semantics=MemoryOrdering.ACQ_REL,
        memory_scope=MemoryScope.DEVICE,
        loc=STORE_LOC,
    )
    b.return_()
    return Module([fn])


def test_one_atomic_spanning_two_arrays_orders_each() -> None:
    """The happens-before tables of an acquire/release atomic are kept per array, so one access is split by the
    array each address falls in. Mutant killed (scripts/mutation.py): ``searchsorted(...) - 1`` into ``+ 1`` in
    ``_hb._by_region`` (addresses charged to the wrong array)."""
    a, c = np.zeros(8, np.float32), np.zeros(4, np.float32)
    interp.launch(_add_across_two(), 2, _args(a, c))
    assert a.tolist() == [1.0] * 8
    assert c.tolist() == [2.0] * 4


def _in_place_double(chained: bool) -> Module:
    """z[tile b] *= 2 in place; the store takes the load's token only when `chained`."""
    fn, b, (z,), _ = _kernel("double", 1)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    view = _part(b, z, 4)
    t, after_load = b.load_view_tko(view, [bx], tok, loc=LOAD_LOC)
    doubled = b.mulf(t, b.constant(2.0, tile((4,), f32)))
    b.call("store_view_tko", doubled, view, [bx], after_load if chained else tok, loc=STORE_LOC)
    b.return_()
    return Module([fn])


def test_in_place_update_ordered_by_tokens_is_accepted() -> None:
    z = np.arange(8, dtype=np.float32)
    interp.launch(_in_place_double(True), 2, _args(z))
    assert z.tolist() == [2.0 * i for i in range(8)]


def test_in_place_update_without_a_token_edge_is_reported() -> None:
    z = np.arange(8, dtype=np.float32)
    with pytest.raises(interp.TokenOrderError) as info:
        interp.launch(_in_place_double(False), 2, _args(z))
    err = info.value
    assert err.block == (0, 0, 0)
    assert err.element == "arg0[0]"
    assert err.first == ("kernels.py:10:9", "read")
    assert err.second == ("kernels.py:12:5", "write")
    assert "no token chain orders them" in str(err)
    assert pickle.loads(pickle.dumps(err)).first == err.first
    interp.launch(_in_place_double(False), 2, _args(z), check_tokens=False)


def _counting_loop(chained: bool) -> Module:
    """for i < n: z[tile b] += 1, the load waiting for the previous iteration's store only when `chained`."""
    fn = Function("count_up", FunctionType((scalar(ptr(f32)), I32, I32, I32)))
    b = Builder(fn.body)
    tv = TensorViewType(f32, (None,), (None,))
    z = b.call("make_tensor_view", fn.params[0], [fn.params[1]], [fn.params[2]], result_type=tv).results[0]
    view = _part(b, z, 4)
    start = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    one = b.constant(1, I32)
    with b.for_(b.constant(0, I32), fn.params[3], one, [start]) as loop:
        t, loaded = b.load_view_tko(view, [bx], loop.args[0] if chained else start, loc=LOAD_LOC)
        stored = b.call("store_view_tko", b.addf(t, b.constant(1.0, tile((4,), f32))), view, [bx], loaded,
                        loc=STORE_LOC).results[0]  # fmt: skip
        b.continue_([stored])
    b.return_()
    return Module([fn])


def test_a_long_token_chained_loop_is_checked_quickly() -> None:
    z = np.zeros(8, np.float32)
    interp.launch(_counting_loop(True), 2, [z, 8, 1, 2000])
    assert z.tolist() == [2000.0] * 8


def test_a_loop_whose_load_skips_the_carried_token_is_reported() -> None:
    z = np.zeros(8, np.float32)
    with pytest.raises(interp.TokenOrderError) as info:
        interp.launch(_counting_loop(False), 2, [z, 8, 1, 3])
    assert info.value.first == ("kernels.py:12:5", "write")
    assert info.value.second == ("kernels.py:10:9", "read")


def test_race_in_a_byte_buffer_is_named_by_element() -> None:
    """A runtime that maps raw byte storage still gets the racing element's index in units of the access."""
    x = np.arange(16, dtype=np.float32)
    storage = np.zeros(64, np.uint8)
    memory = interp.Memory()
    base = memory.map(storage, name="z")
    with pytest.raises(interp.DataRaceError) as info:
        interp.launch(_store_at(lambda b, bx: b.constant(1, I32)), 2, [x, 16, 1, base, 16, 1], memory)
    assert info.value.element == "z element 4 (byte 16)"
