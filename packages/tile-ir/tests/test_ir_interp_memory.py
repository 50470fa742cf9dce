"""Views, pointer loads/stores, atomics, print, assert and the launch entry point's error reporting."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
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
    GatherScatterViewType,
    MemoryOrdering,
    MemoryScope,
    Module,
    Operation,
    Padding,
    PartitionViewType,
    StridedViewType,
    TensorViewType,
    TileType,
    Value,
    f32,
    i1,
    i32,
    interp,
    ptr,
    scalar,
    tile,
)

Arr = npt.NDArray[Any]
I32 = scalar(i32)
LOC = FileLoc("k.py", 7, 3)


def kernel(n_arrays: int, rank: int = 1) -> tuple[Function, Builder, list[Value], list[Value]]:
    """Kernel over f32 arrays of `rank` in cuTile's ABI; returns fn, builder, tensor views, base pointers."""
    fn = Function("k", FunctionType((scalar(ptr(f32)), *[I32] * (2 * rank)) * n_arrays))
    b = Builder(fn.body)
    tv = TensorViewType(f32, (None,) * rank, (None,) * rank)
    step = 1 + 2 * rank
    views = [
        b.call(
            "make_tensor_view",
            fn.params[k * step],
            fn.params[k * step + 1 : k * step + 1 + rank],
            fn.params[k * step + 1 + rank : (k + 1) * step],
            result_type=tv,
        ).results[0]
        for k in range(n_arrays)
    ]
    return fn, b, views, [fn.params[k * step] for k in range(n_arrays)]


def splat(b: Builder, pointer: Value, n: int) -> Value:
    """The 1-D tile of `n` copies of the scalar `pointer`."""
    t = pointer.type
    assert isinstance(t, TileType)
    return b.broadcast(b.reshape(pointer, result_type=tile((1,), t.element)), result_type=tile((n,), t.element))


def args(*arrays: Arr) -> list[Any]:
    return [v for a in arrays for v in (a, *a.shape, *(s // a.itemsize for s in a.strides))]


def _tv(v: Value) -> TensorViewType:
    assert isinstance(v.type, TensorViewType)
    return v.type


def copy_through(
    make_view: Any,
    shape: tuple[int, ...],
    index: list[int],
    src: Arr,
    *,
    rank: int = 1,
    out_shape: tuple[int, ...] | None = None,
) -> Arr:
    """Load `shape` through make_view(b, tensor_view) at constant `index` and store it whole into a new array."""
    fn, b, (x, y), _ = kernel(2, rank)
    view = make_view(b, x)
    t, _ = b.load_view_tko(view, [b.constant(i, I32) for i in index])
    out = np.zeros(out_shape or shape, np.float32)
    whole = b.make_partition_view(y, result_type=PartitionViewType(out.shape, _tv(y), tuple(range(out.ndim))))
    b.call("store_view_tko", t, whole, [b.constant(0, I32)] * out.ndim)
    b.return_()
    interp.launch(Module([fn]), 1, args(src, out))
    return out


@pytest.mark.parametrize(
    ("padding", "fill"), [(Padding.ZERO, 0.0), (Padding.NEG_INF, -np.inf), (Padding.POS_INF, np.inf)]
)
def test_partition_view_pads_out_of_bounds_elements(padding: Padding, fill: float) -> None:
    x = np.arange(10, dtype=np.float32)
    got = copy_through(
        lambda b, tv: b.make_partition_view(tv, result_type=PartitionViewType((8,), _tv(tv), (0,), padding)),
        (8,),
        [1],
        x,
    )
    assert got.tolist() == [8.0, 9.0] + [fill] * 6


def test_partition_view_without_padding_reads_poison() -> None:
    x = np.arange(10, dtype=np.float32)
    got = copy_through(
        lambda b, tv: b.make_partition_view(tv, result_type=PartitionViewType((8,), _tv(tv), (0,))), (8,), [1], x
    )
    assert got[:2].tolist() == [8.0, 9.0]
    assert np.isnan(got[2:]).all()


def test_dim_map_loads_the_transposed_tile() -> None:
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    got = copy_through(
        lambda b, tv: b.make_partition_view(tv, result_type=PartitionViewType((4, 2), _tv(tv), (1, 0))),
        (4, 2),
        [1, 2],
        x,
        rank=2,
    )
    np.testing.assert_array_equal(got, x[4:6, 4:8].T)


def test_strided_view_overlapping_windows() -> None:
    x = np.arange(8, dtype=np.float32)
    got = copy_through(
        lambda b, tv: b.make_strided_view(tv, result_type=StridedViewType((2,), (1,), _tv(tv), (0,))), (2,), [5], x
    )
    assert got.tolist() == [5.0, 6.0]


def test_gather_scatter_view_picks_rows() -> None:
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    fn, b, (xv, yv), _ = kernel(2, rank=2)
    gs = b.make_gather_scatter_view(xv, result_type=GatherScatterViewType((4, 2), _tv(xv), 0, Padding.ZERO))
    rows = b.constant(0, tile((4,), i32))
    rows = b.addi(b.muli(b.iota(result_type=tile((4,), i32)), b.constant(3, tile((4,), i32))), rows)  # 0, 3, 6, 9
    t, _ = b.load_view_tko(gs, [rows, b.constant(1, I32)])
    out = np.zeros((4, 2), np.float32)
    whole = b.make_partition_view(yv, result_type=PartitionViewType((4, 2), _tv(yv), (0, 1)))
    b.call("store_view_tko", t, whole, [b.constant(0, I32)] * 2)
    b.return_()
    interp.launch(Module([fn]), 1, args(x, out))
    np.testing.assert_array_equal(out, [[1, 2], [13, 14], [25, 26], [0, 0]])


def test_index_outside_the_index_space_is_reported_with_block_and_location() -> None:
    fn, b, (x,), _ = kernel(1)
    view = b.make_partition_view(x, result_type=PartitionViewType((4,), _tv(x), (0,)))
    bx, _, _ = b.get_tile_block_id()
    b.load_view_tko(view, [b.addi(bx, b.constant(2, I32))], loc=LOC)
    b.return_()
    with pytest.raises(interp.MemoryAccessError) as info:
        interp.launch(Module([fn]), 3, args(np.zeros(16, np.float32)))
    assert info.value.block == (2, 0, 0)
    assert info.value.location == "k.py:7:3"
    assert "index space (4,)" in str(info.value)


def test_shape_queries() -> None:
    fn, b, (x, y), _ = kernel(2, rank=2)
    view = b.make_partition_view(x, result_type=PartitionViewType((4, 8), _tv(x), (0, 1)))
    n0, n1 = b.get_index_space_shape(view, [I32, I32])
    s0, s1 = b.get_tensor_shape(x, [I32, I32])
    vals = [b.itof(v, signedness="signed", result_type=scalar(f32)) for v in (n0, n1, s0, s1)]
    out_view = b.make_partition_view(y, result_type=PartitionViewType((1, 1), _tv(y), (0, 1)))
    for k, v in enumerate(vals):
        b.call(
            "store_view_tko",
            b.reshape(v, result_type=tile((1, 1), f32)),
            out_view,
            [b.constant(0, I32), b.constant(k, I32)],
        )
    b.return_()
    out = np.zeros((1, 4), np.float32)
    interp.launch(Module([fn]), 1, args(np.zeros((10, 20), np.float32), out))
    assert out.tolist() == [[3, 3, 10, 20]]


def test_pointer_gather_scatter_with_masks_and_padding() -> None:
    fn, b, _, (xp, yp) = kernel(2)
    idx = b.iota(result_type=tile((8,), i32))
    ptrs = b.offset(
        splat(b, xp, 8),
        idx,
    )
    in_range = b.cmpi(idx, b.constant(5, tile((8,), i32)), comparison_predicate="less_than", signedness="signed")
    vals, _ = b.load_ptr_tko(ptrs, in_range, b.constant(-1.0, tile((8,), f32)))
    outs = b.offset(
        splat(b, yp, 8),
        idx,
    )
    odd = b.cmpi(
        b.andi(idx, b.constant(1, tile((8,), i32))),
        b.constant(1, tile((8,), i32)),
        comparison_predicate="equal",
        signedness="signed",
    )
    b.call("store_ptr_tko", outs, vals, odd)
    b.return_()
    x, y = np.arange(5, dtype=np.float32), np.full(8, 9.0, np.float32)
    interp.launch(Module([fn]), 1, args(x, y))
    assert y.tolist() == [9, 1, 9, 3, 9, -1, 9, -1]


def test_out_of_bounds_pointer_access_faults() -> None:
    fn, b, _, (xp,) = kernel(1)
    b.load_ptr_tko(b.offset(xp, b.constant(1 << 20, I32)), loc=LOC)
    b.return_()
    with pytest.raises(interp.MemoryAccessError, match="outside every mapped buffer") as info:
        interp.launch(Module([fn]), 1, args(np.zeros(4, np.float32)))
    assert info.value.location == "k.py:7:3"


def test_atomic_rmw_applies_duplicates_in_order_and_cas_swaps() -> None:
    fn, b, _, (xp, yp) = kernel(2)
    zeros = b.constant(0, tile((4,), i32))
    ptrs = b.offset(
        splat(b, xp, 4),
        zeros,
    )
    old, _ = b.atomic_rmw_tko(
        ptrs,
        b.constant(1.0, tile((4,), f32)),
        mode=AtomicRMWMode.ADDF,
        memory_ordering_semantics=MemoryOrdering.RELAXED,
        memory_scope=MemoryScope.DEVICE,
    )
    out_ptrs = b.offset(
        splat(b, yp, 4),
        b.iota(result_type=tile((4,), i32)),
    )
    b.call("store_ptr_tko", out_ptrs, old)
    cas_old, _ = b.atomic_cas_tko(
        xp,
        b.constant(4.0, scalar(f32)),
        b.constant(42.0, scalar(f32)),
        memory_ordering_semantics=MemoryOrdering.ACQ_REL,
        memory_scope=MemoryScope.DEVICE,
    )
    b.call("store_ptr_tko", b.offset(xp, b.constant(1, I32)), cas_old)
    b.return_()
    x, y = np.zeros(2, np.float32), np.zeros(4, np.float32)
    interp.launch(Module([fn]), 1, args(x, y))
    assert y.tolist() == [0, 1, 2, 3]
    assert x.tolist() == [42.0, 4.0]


def test_atomic_red_view_accumulates_tiles_from_every_block() -> None:
    fn, b, (x, y), _ = kernel(2)
    bx, _, _ = b.get_tile_block_id()
    t, _ = b.load_view_tko(b.make_partition_view(x, result_type=PartitionViewType((4,), _tv(x), (0,))), [bx])
    dst = b.make_partition_view(y, result_type=PartitionViewType((4,), _tv(y), (0,)))
    b.call(
        "atomic_red_view_tko",
        dst,
        [b.constant(0, I32)],
        t,
        mode=AtomicRMWMode.ADDF,
        memory_ordering_semantics=MemoryOrdering.RELAXED,
        memory_scope=MemoryScope.DEVICE,
    )
    b.return_()
    x_arr, y_arr = np.arange(16, dtype=np.float32), np.zeros(4, np.float32)
    interp.launch(Module([fn]), 4, args(x_arr, y_arr))
    assert y_arr.tolist() == x_arr.reshape(4, 4).sum(axis=0).tolist()


def test_print_formats_scalars_and_tiles_like_printf() -> None:
    fn, b, (x,), _ = kernel(1)
    bx, _, _ = b.get_tile_block_id()
    t, _ = b.load_view_tko(b.make_partition_view(x, result_type=PartitionViewType((2,), _tv(x), (0,))), [bx])
    b.print_tko("tile[%d]:%.3f %%\n", [bx, t])
    b.return_()
    out = io.StringIO()
    interp.launch(Module([fn]), 2, args(np.arange(4, dtype=np.float32)), stdout=out)
    assert out.getvalue() == "tile[0]:[0.000, 1.000] %\ntile[1]:[2.000, 3.000] %\n"


def test_failed_assert_names_block_location_and_message() -> None:
    fn, b, _, _ = kernel(0)
    bx, _, _ = b.get_tile_block_id()
    b.assert_(  # noqa: PT009 - tile.ir Builder.assert_ builds an assert op, not a unittest assertion
        b.cmpi(bx, b.constant(3, I32), comparison_predicate="less_than", signedness="signed"),
        "bid must stay below 3",
        loc=LOC,
    )
    b.return_()
    interp.launch(Module([fn]), 3, [])
    with pytest.raises(interp.KernelAssertionError) as info:
        interp.launch(Module([fn]), 5, [])
    err = info.value
    assert (err.block, err.location) == ((3, 0, 0), "k.py:7:3")
    assert "bid must stay below 3" in str(err)
    assert isinstance(err, AssertionError)
    back = pickle.loads(pickle.dumps(err))
    assert (back.block, back.location, str(back)) == (err.block, err.location, str(err))


def test_unknown_op_is_refused_before_any_block_runs() -> None:
    fn, b, (x,), _ = kernel(1)
    view = b.make_partition_view(x, result_type=PartitionViewType((4,), _tv(x), (0,)))
    b.call("store_view_tko", b.constant(1.0, tile((4,), f32)), view, [b.constant(0, I32)])
    fn.body.append(Operation("mmaf_future_op", [], [], loc=LOC))
    b.return_()
    x_arr = np.zeros(4, np.float32)
    with pytest.raises(interp.UnsupportedOpError, match="'mmaf_future_op'") as info:
        interp.launch(Module([fn]), 1, args(x_arr))
    assert info.value.location == "k.py:7:3"
    assert isinstance(info.value, NotImplementedError)
    assert x_arr.tolist() == [0, 0, 0, 0]


def test_violated_assume_is_an_error() -> None:
    from tile.ir import Bounded

    fn = Function("k", FunctionType((I32,)))
    b = Builder(fn.body)
    b.assume(fn.params[0], predicate=Bounded(0, None), loc=LOC)
    b.return_()
    interp.launch(Module([fn]), 1, [5])
    with pytest.raises(interp.InterpError, match="assume"):
        interp.launch(Module([fn]), 1, [-5])


def test_launch_argument_errors() -> None:
    fn = Function("k", FunctionType((scalar(ptr(f32)), scalar(i1), scalar(i32))))
    Builder(fn.body).return_()
    with pytest.raises(interp.InterpError, match="takes 3 arguments, got 1"):
        interp.launch(Module([fn]), 1, [np.zeros(1, np.float32)])
    with pytest.raises(interp.InterpError, match="does not fit in 32 bits"):
        interp.launch(Module([fn]), 1, [np.zeros(1, np.float32), True, 1 << 40])
    with pytest.raises(interp.InterpError, match="numpy array or an address"):
        interp.launch(Module([fn]), 1, ["x", True, 1])
    with pytest.raises(interp.InterpError, match="grid"):
        interp.launch(Module([fn]), (1, 2, 3, 4), [np.zeros(1, np.float32), True, 1])


def test_memory_maps_views_of_one_base_into_one_region_and_names_elements() -> None:
    mem = interp.Memory()
    base = np.zeros((4, 6), np.float32)
    a = mem.map(base, name="z")
    b = mem.map(base[1:, 2:])
    assert b - a == (6 + 2) * 4
    assert len(mem.regions) == 1
    region = mem.region_at(a + 4 * 13)
    assert region is not None
    assert region.describe(a + 4 * 13) == "z[2, 1]"
    assert mem.region_at(a - 1) is None


def test_store_into_read_only_array_faults() -> None:
    fn, b, (x,), _ = kernel(1)
    view = b.make_partition_view(x, result_type=PartitionViewType((4,), _tv(x), (0,)))
    b.call("store_view_tko", b.constant(1.0, tile((4,), f32)), view, [b.constant(0, I32)])
    b.return_()
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(interp.MemoryAccessError, match="read-only"):
        interp.launch(Module([fn]), 1, args(frozen))


def test_importing_tile_ir_does_not_import_numpy() -> None:
    code = "import sys, tile.ir; print('numpy' in sys.modules, 'tile.ir.interp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("promise", [False, True])
def test_broken_inbounds_promise_is_an_error(promise: bool) -> None:
    fn, b, (x, y), _ = kernel(2)
    view = b.make_partition_view(x, result_type=PartitionViewType((8,), _tv(x), (0,), Padding.ZERO))
    t, _ = b.load_view_tko(view, [b.constant(1, I32)], inbounds=[promise], loc=LOC)
    out = b.make_partition_view(y, result_type=PartitionViewType((8,), _tv(y), (0,)))
    b.call("store_view_tko", t, out, [b.constant(0, I32)])
    b.return_()
    y_arr = np.zeros(8, np.float32)
    if not promise:
        interp.launch(Module([fn]), 1, args(np.arange(12, dtype=np.float32), y_arr))
        assert y_arr.tolist() == [8, 9, 10, 11, 0, 0, 0, 0]
        return
    with pytest.raises(interp.MemoryAccessError, match="inbounds") as info:
        interp.launch(Module([fn]), 1, args(np.arange(12, dtype=np.float32), y_arr))
    assert info.value.location == "k.py:7:3"


def test_c_format_conversions() -> None:
    from tile.ir.interp._control import c_format

    scalar_i32, scalar_f32 = scalar(i32), scalar(f32)
    text = c_format(
        "%d %u %x %5.2f %e %lld%%",
        [np.int32(-1), np.int32(-1), np.int32(-1), np.float32(3.14159), np.float32(0.5), np.int32(7)],
        [scalar_i32, scalar_i32, scalar_i32, scalar_f32, scalar_f32, scalar_i32],
    )
    assert text == "-1 4294967295 ffffffff  3.14 5.000000e-01 7%"
    grid = c_format("%.0f", [np.arange(4, dtype=np.float32).reshape(2, 2)], [tile((2, 2), f32)])
    assert grid == "[[0, 1], [2, 3]]"


def test_globals_are_mapped_and_constant_ones_are_read_only() -> None:
    from tile.ir import DenseElementsAttr, Global

    table = DenseElementsAttr.from_values(tile((4,), f32), [1.0, 2.0, 3.0, 4.0])
    fn, b, (y,), _ = kernel(1)
    g = b.get_global(name="table", result_type=scalar(ptr(f32)))
    tv = b.call("make_tensor_view", g, [], [], result_type=TensorViewType(f32, (4,), (1,))).results[0]
    view = b.make_partition_view(tv, result_type=PartitionViewType((4,), _tv(tv), (0,)))
    t, _ = b.load_view_tko(view, [b.constant(0, I32)])
    out = b.make_partition_view(y, result_type=PartitionViewType((4,), _tv(y), (0,)))
    b.call("store_view_tko", t, out, [b.constant(0, I32)])
    b.return_()
    y_arr = np.zeros(4, np.float32)
    interp.launch(Module([fn], [Global("table", table, constant=True)]), 1, args(y_arr))
    assert y_arr.tolist() == [1, 2, 3, 4]
    with pytest.raises(interp.InterpError, match="no global of that name"):
        interp.launch(Module([fn]), 1, args(y_arr))


def test_a_loop_waiting_for_another_block_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spin loop on a flag that a later block would set never ends when blocks run one at a time."""
    from tile.ir.interp import _control

    monkeypatch.setattr(_control, "MAX_LOOP_ITERATIONS", 50)
    fn, b, _, (flag,) = kernel(1)
    with b.loop() as spin:
        value, _ = b.load_ptr_tko(flag, memory_ordering_semantics=MemoryOrdering.ACQUIRE,
                                  memory_scope=MemoryScope.DEVICE)  # fmt: skip
        done = b.cmpf(value, b.constant(1.0, scalar(f32)), comparison_predicate="equal",
                      comparison_ordering="ordered")  # fmt: skip
        with b.if_(done) as br:
            with br.then_():
                b.break_()
            with br.else_():
                b.yield_()
        b.continue_()
    assert spin.results == []
    b.return_()
    with pytest.raises(interp.InterpError, match="spin lock"):
        interp.launch(Module([fn]), 2, args(np.zeros(1, np.float32)))
    interp.launch(Module([fn]), 2, args(np.ones(1, np.float32)))


def test_packed_four_bit_tensor_views_are_refused_clearly() -> None:
    from tile.ir import f4E2M1FN

    fn = Function("k", FunctionType((scalar(ptr(f4E2M1FN)), I32)))
    b = Builder(fn.body)
    b.call("make_tensor_view", fn.params[0], [fn.params[1]], [], result_type=TensorViewType(f4E2M1FN, (None,), (1,)),
           loc=LOC)  # fmt: skip
    b.return_()
    with pytest.raises(interp.UnsupportedOpError, match="two elements packed per byte") as info:
        interp.launch(Module([fn]), 1, [np.zeros(4, np.uint8), 8])
    assert info.value.location == "k.py:7:3"
