"""One small kernel per Tile IR op, for per-op round trips and tileirdisasm/tileiras checks.

`build_sample(op_name, version)` returns a module whose single entry uses `op_name` with valid operand and
result types (so NVIDIA's tools accept it), built with the public builder. `SAMPLES` maps every op of the
catalog to its sample body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tile.ir import (
    DYNAMIC,
    Bounded,
    Builder,
    DenseElementsAttr,
    DivBy,
    FloatAttr,
    Function,
    FunctionType,
    GatherScatterViewType,
    Global,
    IntegerAttr,
    Module,
    Padding,
    PartitionViewType,
    PointerAttr,
    PointerType,
    SameElements,
    StridedViewType,
    SymbolVisibility,
    TensorViewType,
    TileType,
    Value,
    Version,
    f8E4M3FN,
    f8E8M0FNU,
    f16,
    f32,
    i1,
    i8,
    i16,
    i32,
    i64,
    ptr,
    scalar,
    tile,
)

N = 16
TV = TensorViewType(f32, (DYNAMIC,), (1,))
TVI = TensorViewType(i32, (DYNAMIC,), (1,))
PV = PartitionViewType((N,), TV, (0,))
SIGNATURE = FunctionType((scalar(ptr(f32)), scalar(i32), scalar(ptr(i32))))
# multimem ops need a multicast pointer: ptr_attr MULTICAST on the base pointer and the view (13.4+ types)
MULTICAST = PointerType(i32, ptr_attr=PointerAttr.MULTICAST)
TVI_MC = TensorViewType(i32, (DYNAMIC,), (1,), ptr_attr=PointerAttr.MULTICAST)
MC_SIGNATURE = FunctionType((scalar(ptr(f32)), scalar(i32), scalar(MULTICAST)))


@dataclass
class Env:
    """Values every sample can use."""

    b: Builder
    version: Version
    tok: Value
    x: Value  # tile<16xf32>
    xi: Value  # tile<16xi32>
    s: Value  # tile<i32> zero
    one: Value  # tile<i32> one
    tv: Value
    pv: Value
    pvi: Value
    fptrs: Value  # tile<16xptr<f32>>
    iptrs: Value  # tile<16xptr<i32>>
    params: list[Value]


def _prelude(b: Builder, fn: Function, version: Version) -> Env:
    base, size, ibase = fn.params
    tv_i = TVI_MC if ibase.type == scalar(MULTICAST) else TVI
    tok = b.make_token()
    x = b.constant(1.5, tile((N,), f32))
    xi = b.iota(result_type=tile((N,), i32))
    zero, one = b.constant(0, scalar(i32)), b.constant(1, scalar(i32))
    tv = b.make_tensor_view(base, [size], [], result_type=TV)
    tvi = b.make_tensor_view(ibase, [size], [], result_type=tv_i)
    pv = b.make_partition_view(tv, result_type=PV)
    pvi = b.make_partition_view(tvi, result_type=PartitionViewType((N,), tv_i, (0,)))
    fptrs = b.offset(
        b.broadcast(b.reshape(base, result_type=tile((1,), ptr(f32))), result_type=tile((N,), ptr(f32))), xi
    )
    iptr = ibase.type.element if isinstance(ibase.type, TileType) else ptr(i32)
    iptrs = b.offset(b.broadcast(b.reshape(ibase, result_type=tile((1,), iptr)), result_type=tile((N,), iptr)), xi)
    return Env(b, version, tok, x, xi, zero, one, tv, pv, pvi, fptrs, iptrs, fn.params)


def _pointer_tile(b: Builder, base: Value, offsets: Value) -> Value:
    assert isinstance(base.type, TileType)
    one = b.reshape(base, result_type=tile((1,), base.type.element))
    return b.offset(b.broadcast(one, result_type=tile((N,), base.type.element)), offsets)


def _exti(e: Env) -> Value:
    narrow = e.b.trunci(e.xi, result_type=tile((N,), i16))
    return e.b.exti(narrow, signedness="signed", result_type=tile((N,), i32))


def _permute(e: Env) -> Value:
    two_d = e.b.reshape(e.x, result_type=tile((2, 8), f32))
    return e.b.permute(two_d, permutation=(1, 0), result_type=tile((8, 2), f32))


def _assert(e: Env) -> None:
    same = e.b.cmpi(e.s, e.s, comparison_predicate="equal", signedness="signed")
    e.b.assert_(same, "s == s")  # noqa: PT009 - Builder.assert_ builds a Tile IR op, not a test assertion


def build_sample(op_name: str, version: Version) -> Module:
    """Return a one-kernel module exercising `op_name` at `version`."""
    fn = Function(f"k_{op_name}", MC_SIGNATURE if op_name.startswith("multimem") else SIGNATURE)
    b = Builder(fn.body, version=version)
    env = _prelude(b, fn, version)
    SAMPLES[op_name](env)
    if op_name != "return":
        b.return_()
    module = Module([fn])
    if op_name == "get_global":
        table = DenseElementsAttr.from_values(tile((4,), f32), [1.0, 2.0, 3.0, 4.0])
        modern = version >= Version(13, 3)
        module.globals.append(
            Global("table", table, 16, modern, SymbolVisibility.PRIVATE if modern else SymbolVisibility.PUBLIC)
        )
    return module


def _unary(name: str, **attrs: object) -> Callable[[Env], object]:
    return lambda e: e.b.call(name, e.x, **attrs)


def _binary(name: str, **attrs: object) -> Callable[[Env], object]:
    return lambda e: e.b.call(name, e.x, e.x, **attrs)


def _ibinary(name: str, **attrs: object) -> Callable[[Env], object]:
    return lambda e: e.b.call(name, e.xi, e.xi, **attrs)


def _for(e: Env) -> None:
    with e.b.for_(e.s, e.one, e.one, [e.x], unsigned_cmp=e.version >= Version(13, 2)) as loop:
        e.b.continue_([e.b.addf(loop.args[0], e.x)])


def _loop(e: Env) -> None:
    with e.b.loop([e.s], [scalar(i32)]) as loop:
        done = e.b.cmpi(loop.args[0], e.one, comparison_predicate="greater_than_or_equal", signedness="signed")
        with e.b.if_(done) as br:
            with br.then_():
                e.b.break_([loop.args[0]])
            with br.else_():
                e.b.yield_()
        e.b.continue_([e.b.addi(loop.args[0], e.one)])


def _if(e: Env) -> None:
    cond = e.b.cmpi(e.s, e.one, comparison_predicate="less_than", signedness="signed")
    with e.b.if_(cond, [e.x.type]) as br:
        with br.then_():
            e.b.yield_([e.x])
        with br.else_():
            e.b.yield_([e.b.negf(e.x)])


def _reduce(e: Env) -> None:
    with e.b.reduce([e.x], 0, [FloatAttr.of(f32, 0.0)]) as r:
        e.b.yield_([e.b.addf(r.args[0], r.args[1])])


def _scan(e: Env) -> None:
    with e.b.scan([e.xi], 0, [IntegerAttr(i32, 0)], reverse=True) as r:
        e.b.yield_([e.b.addi(r.args[0], r.args[1])])


def _mmaf(e: Env) -> None:
    a = e.b.constant(1.0, tile((N, N), f16))
    acc = e.b.constant(0.0, tile((N, N), f32))
    e.b.mmaf(a, a, acc, fast_acc=e.version >= Version(13, 3))


def _mmai(e: Env) -> None:
    a = e.b.constant(1, tile((N, N), i8))
    e.b.mmai(a, a, e.b.constant(0, tile((N, N), i32)), signedness_lhs="signed", signedness_rhs="unsigned")


def _mmaf_scaled(e: Env) -> None:
    a = e.b.constant(1.0, tile((N, 32), f8E4M3FN))
    bt = e.b.constant(1.0, tile((32, N), f8E4M3FN))
    acc = e.b.constant(0.0, tile((N, N), f32))
    sa = e.b.constant(1.0, tile((N, 1), f8E8M0FNU))
    sb = e.b.constant(1.0, tile((1, N), f8E8M0FNU))
    e.b.mmaf_scaled(a, bt, acc, sa, sb)


def _views(e: Env) -> None:
    t, tok = e.b.load_view_tko(e.pv, [e.s], e.tok, optimization_hints={"sm_90": {"latency": 3, "allow_tma": False}})
    inb = (True,) if e.version >= Version(13, 4) else ()
    e.b.store_view_tko(t, e.pv, [e.s], tok, memory_ordering_semantics="relaxed", memory_scope="device", inbounds=inb)


def _ptrs(e: Env) -> None:
    mask = e.b.cmpi(e.xi, e.xi, comparison_predicate="equal", signedness="signed")
    t, tok = e.b.load_ptr_tko(e.fptrs, mask, e.x, e.tok, optimization_hints={"sm_100": {"latency": 2}})
    e.b.store_ptr_tko(e.fptrs, t, mask, tok)


def _atomics(e: Env, name: str) -> None:
    if name == "atomic_rmw_tko":
        e.b.atomic_rmw_tko(e.iptrs, e.xi, None, e.tok, memory_scope="device", mode="add")
    else:
        e.b.atomic_cas_tko(e.iptrs, e.xi, e.xi, None, e.tok, memory_scope="device")


def _print(e: Env) -> None:
    e.b.print_tko("x=%f i=%d\n", [e.x, e.xi], e.tok if e.version >= Version(13, 2) else None)


def _alloca(e: Env) -> None:
    e.b.alloca(num_elem=16, alignment=16, result_type=scalar(ptr(f32)))
    e.b.alloca(num_elem=4, alignment=8, result_type=scalar(ptr(i32)), **{"global": True})


def _matrix_views(e: Env) -> None:
    """A 2-D view with a dynamic stride, a transposing dim_map and padding."""
    base, size = e.params[:2]
    tv_type = TensorViewType(f32, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))
    tv = e.b.make_tensor_view(base, [e.one, size], [size], result_type=tv_type)  # the buffer as a 1 x size matrix
    pv = e.b.make_partition_view(tv, result_type=PartitionViewType((4, 8), tv_type, (1, 0), Padding.NAN))
    e.b.load_view_tko(pv, [e.one, e.s], e.tok)  # tile dim 0 walks the columns; rows 1..7 are padding


def _strided(e: Env) -> None:
    e.b.make_strided_view(e.tv, result_type=StridedViewType((N,), (N,), TV, (0,)))


def _gather(e: Env) -> None:
    e.b.make_gather_scatter_view(e.tv, result_type=GatherScatterViewType((N,), TV, 0))


def _multimem(e: Env, name: str) -> None:
    view = e.pvi
    if name == "multimem_load_reduce_view_tko":
        e.b.multimem_load_reduce_view_tko(view, [e.s], e.tok, memory_scope="sys", reduction="add")
    elif name == "multimem_reduce_view_tko":
        e.b.call(name, view, e.xi, [e.s], e.tok, memory_scope="sys", reduction="add")
    else:
        e.b.call(name, view, e.xi, [e.s], e.tok, memory_ordering_semantics="weak")


def _extract_insert(e: Env, name: str) -> None:
    part = e.b.extract(e.x, [e.s], result_type=tile((8,), f32))
    if name == "insert":
        e.b.insert(part, e.x, [e.one])


def _assume(e: Env) -> None:
    e.b.assume(e.xi, predicate=DivBy(4))
    e.b.assume(e.s, predicate=Bounded(0, None))
    e.b.assume(e.xi, predicate=SameElements((4,)))


SAMPLES: dict[str, Callable[[Env], object]] = {
    **{n: _binary(n) for n in ("addf", "subf", "mulf", "remf", "pow", "atan2")},
    "divf": _binary("divf", rounding_mode="approx", flush_to_zero=True),
    "fma": lambda e: e.b.fma(e.x, e.x, e.x, rounding_mode="zero"),
    "maxf": _binary("maxf", propagate_nan=True),
    "minf": _binary("minf", flush_to_zero=True),
    **{n: _unary(n) for n in ("negf", "absf", "ceil", "floor", "cos", "cosh", "sin", "sinh", "tan", "log", "log2")},
    "exp": _unary("exp"),
    "exp2": _unary("exp2", flush_to_zero=True),
    "rsqrt": _unary("rsqrt"),
    "sqrt": _unary("sqrt", rounding_mode="approx"),
    "tanh": _unary("tanh"),
    "fpowi": lambda e: e.b.fpowi(e.x, e.xi),
    **{n: _ibinary(n, overflow="nsw") for n in ("addi", "subi", "muli", "shli")},
    "divi": _ibinary("divi", signedness="signed", rounding="negative_inf"),
    **{n: _ibinary(n, signedness="unsigned") for n in ("remi", "maxi", "mini", "shri")},
    **{n: _ibinary(n) for n in ("andi", "ori", "xori", "mulhii")},
    "absi": lambda e: e.b.absi(e.xi),
    "negi": lambda e: e.b.negi(e.xi),
    "cmpf": _binary("cmpf", comparison_predicate="less_than", comparison_ordering="unordered"),
    "cmpi": _ibinary("cmpi", comparison_predicate="not_equal", signedness="signed"),
    "select": lambda e: e.b.select(e.b.cmpf(e.x, e.x, comparison_predicate="equal"), e.x, e.x),
    "ftof": lambda e: e.b.ftof(e.x, result_type=tile((N,), f16)),
    "ftoi": lambda e: e.b.ftoi(e.x, signedness="unsigned", result_type=tile((N,), i32)),
    "itof": lambda e: e.b.itof(e.xi, signedness="signed", result_type=tile((N,), f32)),
    "exti": lambda e: e.b.exti(
        e.b.trunci(e.xi, result_type=tile((N,), i16)), signedness="signed", result_type=tile((N,), i32)
    ),
    "trunci": lambda e: e.b.trunci(e.xi, overflow="nuw", result_type=tile((N,), i16)),
    "bitcast": lambda e: e.b.bitcast(e.x, result_type=tile((N,), i32)),
    "int_to_ptr": lambda e: e.b.int_to_ptr(e.b.constant(0, tile((N,), i64)), result_type=tile((N,), ptr(f32))),
    "ptr_to_int": lambda e: e.b.ptr_to_int(e.fptrs, result_type=tile((N,), i64)),
    "ptr_to_ptr": lambda e: e.b.ptr_to_ptr(e.fptrs, result_type=tile((N,), ptr(i32))),
    "pack": lambda e: e.b.pack(e.x, result_type=tile((4 * N,), i8)),
    "unpack": lambda e: e.b.unpack(e.b.constant(0, tile((4 * N,), i8)), result_type=tile((N,), f32)),
    "broadcast": lambda e: e.b.broadcast(e.b.reshape(e.s, result_type=tile((1,), i32)), result_type=tile((N,), i32)),
    "reshape": lambda e: e.b.reshape(e.x, result_type=tile((4, 4), f32)),
    "permute": lambda e: e.b.permute(
        e.b.reshape(e.x, result_type=tile((2, 8), f32)), permutation=(1, 0), result_type=tile((8, 2), f32)
    ),
    "cat": lambda e: e.b.cat(e.x, e.x, dim=0, result_type=tile((2 * N,), f32)),
    "extract": lambda e: _extract_insert(e, "extract"),
    "insert": lambda e: _extract_insert(e, "insert"),
    "iota": lambda e: e.b.iota(result_type=tile((N,), i32)),
    "for": _for,
    "continue": _for,
    "loop": _loop,
    "break": _loop,
    "if": _if,
    "yield": _if,
    "return": lambda e: e.b.return_(),
    "make_tensor_view": _matrix_views,
    "make_partition_view": _matrix_views,
    "make_strided_view": _strided,
    "make_gather_scatter_view": _gather,
    "get_tensor_shape": lambda e: e.b.get_tensor_shape(e.tv, [scalar(i32)]),
    "get_index_space_shape": lambda e: e.b.get_index_space_shape(e.pv, [scalar(i32)]),
    "load_view_tko": _views,
    "store_view_tko": _views,
    "load_ptr_tko": _ptrs,
    "store_ptr_tko": _ptrs,
    "offset": lambda e: None,
    "atomic_rmw_tko": lambda e: _atomics(e, "atomic_rmw_tko"),
    "atomic_cas_tko": lambda e: _atomics(e, "atomic_cas_tko"),
    "atomic_red_view_tko": lambda e: e.b.atomic_red_view_tko(
        e.pvi, [e.s], e.xi, e.tok, memory_scope="device", mode="add"
    ),
    "multimem_load_reduce_view_tko": lambda e: _multimem(e, "multimem_load_reduce_view_tko"),
    "multimem_reduce_view_tko": lambda e: _multimem(e, "multimem_reduce_view_tko"),
    "multimem_store_view_tko": lambda e: _multimem(e, "multimem_store_view_tko"),
    "reduce": _reduce,
    "scan": _scan,
    "mmaf": _mmaf,
    "mmai": _mmai,
    "mmaf_scaled": _mmaf_scaled,
    "constant": lambda e: e.b.constant(DenseElementsAttr.from_values(tile((4,), i1), [True, False, True, True])),
    "get_global": lambda e: e.b.get_global(name="table", result_type=scalar(ptr(f32))),
    "get_tile_block_id": lambda e: e.b.get_tile_block_id(),
    "get_num_tile_blocks": lambda e: e.b.get_num_tile_blocks(),
    "make_token": lambda e: None,
    "join_tokens": lambda e: e.b.join_tokens([e.tok, e.b.make_token()]),
    "assume": _assume,
    "assert": _assert,
    "print_tko": _print,
    "alloca": _alloca,
    "gdc_launch_dependents_tko": lambda e: e.b.gdc_launch_dependents_tko(e.tok),
    "gdc_wait_tko": lambda e: e.b.gdc_wait_tko(None),
    "memory_fence_alias_tko": lambda e: e.b.memory_fence_alias_tko(e.tok),
}
