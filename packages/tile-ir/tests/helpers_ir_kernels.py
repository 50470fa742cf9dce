"""Realistic kernels per op family, written with the builder, for tileiras compile tests.

`build_family(name, version)` returns a module with one entry ``<name>_kernel`` whose parameters follow
cuTile's array convention (base pointer, then int32 sizes/strides).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tile.ir import (
    DYNAMIC,
    Builder,
    FloatAttr,
    Function,
    FunctionType,
    Module,
    OptimizationHints,
    Padding,
    PartitionViewType,
    ScalarType,
    TensorViewType,
    Type,
    Value,
    Version,
    f16,
    f32,
    i32,
    ptr,
    scalar,
    tile,
)

__all__ = ["FAMILIES", "build_family"]

I32 = scalar(i32)


@dataclass
class Kernel:
    """A kernel under construction: its builder and helpers for array parameters."""

    b: Builder
    fn: Function
    version: Version
    token: Value

    def vector(self, index: int, elem: ScalarType, tile_n: int, padding: Padding | None = None) -> Value:
        """Partition view of the 1-D array whose base pointer is parameter `index` (size follows it)."""
        base, size = self.fn.params[index : index + 2]
        tv = self.b.make_tensor_view(base, [size], [], result_type=TensorViewType(elem, (DYNAMIC,), (1,)))
        pv = PartitionViewType((tile_n,), TensorViewType(elem, (DYNAMIC,), (1,)), (0,), padding)
        return self.b.make_partition_view(tv, result_type=pv)

    def matrix(self, index: int, elem: ScalarType, shape: tuple[int, int], padding: Padding | None = None) -> Value:
        """Partition view of the row-major 2-D array at parameters index (base), +1, +2 (sizes), +3 (stride)."""
        base, rows, cols, stride = self.fn.params[index : index + 4]
        tv_type = TensorViewType(elem, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))
        tv = self.b.make_tensor_view(base, [rows, cols], [stride], result_type=tv_type)
        return self.b.make_partition_view(tv, result_type=PartitionViewType(shape, tv_type, (0, 1), padding))

    def load(self, view: Value, index: list[Value]) -> Value:
        """Load a tile (unordered against other loads)."""
        return self.b.load_view_tko(view, index, self.token)[0]

    def store(self, value: Value, view: Value, index: list[Value]) -> None:
        """Store a tile."""
        self.b.store_view_tko(value, view, index, self.token)


def _params(*arrays: str) -> tuple[Type, ...]:
    kinds = {"f32": (f32, 1), "f16": (f16, 1), "i32": (i32, 1), "m16": (f16, 2), "m32": (f32, 2)}
    out: list[Type] = []
    for name in arrays:
        elem, rank = kinds[name]
        out += [scalar(ptr(elem)), *([I32] * (1 if rank == 1 else 3))]
    return tuple(out)


def _start(name: str, version: Version, params: tuple[Type, ...]) -> Kernel:
    hints = OptimizationHints.of({"sm_90" if version < Version(13, 3) else "default": {"num_cta_in_cga": 1}})
    fn = Function(f"{name}_kernel", FunctionType(params), hints=hints)
    b = Builder(fn.body, version=version)
    return Kernel(b, fn, version, b.make_token())


def _elementwise(k: Kernel) -> None:
    b = k.b
    x, y, z = k.vector(0, f32, 128), k.vector(2, f32, 128), k.vector(4, f32, 128)
    bid = b.get_tile_block_id()[0]
    two = b.constant(2.0, tile((128,), f32))
    k.store(b.fma(k.load(y, [bid]), two, k.load(x, [bid])), z, [bid])


def _math(k: Kernel) -> None:
    b = k.b
    x, z = k.vector(0, f32, 128), k.vector(2, f32, 128)
    bid = b.get_tile_block_id()[0]
    t = b.absf(k.load(x, [bid]))
    r = b.addf(b.exp(t), b.tanh(t))
    r = b.mulf(r, b.rsqrt(b.addf(b.sqrt(t), b.constant(1.0, tile((128,), f32)))))
    k.store(b.addf(r, b.sin(b.log(b.exp2(t)))), z, [bid])


def _casts(k: Kernel) -> None:
    b = k.b
    x, z, w = k.vector(0, f32, 128), k.vector(2, f16, 128), k.vector(4, i32, 128)
    bid = b.get_tile_block_id()[0]
    t = k.load(x, [bid])
    as_int = b.ftoi(t, signedness="signed", result_type=tile((128,), i32))
    back = b.itof(as_int, signedness="signed", result_type=tile((128,), f32))
    k.store(b.ftof(b.subf(t, back), result_type=tile((128,), f16)), z, [bid])
    k.store(b.shli(as_int, b.constant(1, tile((128,), i32))), w, [bid])


def _rowsum(k: Kernel, op: str) -> Value:
    b = k.b
    x = k.matrix(0, f32, (1, 64))
    bid = b.get_tile_block_id()[0]
    zero = b.constant(0, I32)
    with b.reduce([k.load(x, [bid, zero])], 1, [FloatAttr.of(f32, 0.0 if op == "addf" else float("-inf"))]) as r:
        b.yield_([b.call(op, r.args[0], r.args[1]).result])
    return r.results[0]


def _reductions(k: Kernel) -> None:
    total = _rowsum(k, "addf")
    out = k.vector(4, f32, 1)
    k.store(total, out, [k.b.get_tile_block_id()[0]])


def _scans(k: Kernel) -> None:
    b = k.b
    x, z = k.vector(0, f32, 64), k.vector(2, f32, 64)
    bid = b.get_tile_block_id()[0]
    with b.scan([k.load(x, [bid])], 0, [FloatAttr.of(f32, 0.0)]) as s:
        b.yield_([b.addf(s.args[0], s.args[1])])
    k.store(s.results[0], z, [bid])


def _gemm(k: Kernel) -> None:
    b = k.b
    a, bm, c = k.matrix(0, f16, (32, 16)), k.matrix(4, f16, (16, 32)), k.matrix(8, f32, (32, 32))
    row, col, _ = b.get_tile_block_id()
    k_tiles = b.get_index_space_shape(a, [I32, I32])[1]
    zero, one = b.constant(0, I32), b.constant(1, I32)
    acc = b.constant(0.0, tile((32, 32), f32))
    with b.for_(zero, k_tiles, one, [acc]) as loop:
        lhs, rhs = k.load(a, [row, loop.iv]), k.load(bm, [loop.iv, col])
        b.continue_([b.mmaf(lhs, rhs, loop.args[0])])
    k.store(loop.results[0], c, [row, col])


def _softmax(k: Kernel) -> None:
    b = k.b
    x, y = k.matrix(0, f32, (1, 64), Padding.NEG_INF), k.matrix(4, f32, (1, 64))
    row = b.get_tile_block_id()[0]
    zero = b.constant(0, I32)
    t = k.load(x, [row, zero])
    row_max = _reduce_row(b, t, "maxf", float("-inf"))
    e = b.exp(b.subf(t, row_max))
    k.store(b.divf(e, _reduce_row(b, e, "addf", 0.0)), y, [row, zero])


def _reduce_row(b: Builder, t: Value, op: str, identity: float) -> Value:
    with b.reduce([t], 1, [FloatAttr.of(f32, identity)]) as r:
        b.yield_([b.call(op, r.args[0], r.args[1]).result])
    column = b.reshape(r.results[0], result_type=tile((1, 1), f32))
    return b.broadcast(column, result_type=tile((1, 64), f32))


def _pointers(k: Kernel, index: int, elem: ScalarType, n: int) -> Value:
    b = k.b
    base = b.broadcast(
        b.reshape(k.fn.params[index], result_type=tile((1,), ptr(elem))), result_type=tile((n,), ptr(elem))
    )
    bid = b.get_tile_block_id()[0]
    start = b.muli(bid, b.constant(n, I32))
    offsets = b.addi(
        b.iota(result_type=tile((n,), i32)),
        b.broadcast(b.reshape(start, result_type=tile((1,), i32)), result_type=tile((n,), i32)),
    )
    return b.offset(base, offsets)


def _atomics(k: Kernel) -> None:
    b = k.b
    counters = _pointers(k, 0, i32, 64)
    ones = b.constant(1, tile((64,), i32))
    old, tok = b.atomic_rmw_tko(counters, ones, None, k.token, memory_scope="device", mode="add")
    b.atomic_cas_tko(counters, old, ones, None, tok, memory_ordering_semantics="acquire", memory_scope="device")


def _control_flow(k: Kernel) -> None:
    b = k.b
    x, z = k.vector(0, f32, 128), k.vector(2, f32, 128)
    bid = b.get_tile_block_id()[0]
    zero, one, four = b.constant(0, I32), b.constant(1, I32), b.constant(4, I32)
    t = k.load(x, [bid])
    with b.for_(zero, four, one, [t]) as loop:
        odd = b.cmpi(
            b.remi(loop.iv, b.constant(2, I32), signedness="signed"),
            one,
            comparison_predicate="equal",
            signedness="signed",
        )
        with b.if_(odd, [t.type]) as br:
            with br.then_():
                b.yield_([b.mulf(loop.args[0], b.constant(0.5, tile((128,), f32)))])
            with br.else_():
                b.yield_([b.addf(loop.args[0], b.constant(1.0, tile((128,), f32)))])
        b.continue_([br.results[0]])
    with b.loop([zero], [I32]) as spin:
        done = b.cmpi(spin.args[0], four, comparison_predicate="greater_than_or_equal", signedness="signed")
        with b.if_(done) as br2, br2.then_():
            b.break_([spin.args[0]])
        b.continue_([b.addi(spin.args[0], one)])
    k.store(loop.results[0], z, [bid])


def _print_assert(k: Kernel) -> None:
    b = k.b
    x = k.vector(0, f32, 16)
    bid = b.get_tile_block_id()[0]
    t = k.load(x, [bid])
    ok = b.cmpi(bid, b.constant(0, I32), comparison_predicate="greater_than_or_equal", signedness="signed")
    b.assert_(ok, "block id is never negative")  # noqa: PT009 - builds a Tile IR assert op
    b.print_tko("block %d first tile %f\n", [bid, t], k.token if k.version >= Version(13, 2) else None)


def _gather_scatter(k: Kernel) -> None:
    b = k.b
    src, dst = _pointers(k, 0, f32, 64), _pointers(k, 2, f32, 64)
    idx = b.iota(result_type=tile((64,), i32))
    mask = b.cmpi(idx, b.constant(48, tile((64,), i32)), comparison_predicate="less_than", signedness="signed")
    values, tok = b.load_ptr_tko(
        src, mask, b.constant(0.0, tile((64,), f32)), k.token, optimization_hints={"sm_90": {"latency": 2}}
    )
    b.store_ptr_tko(dst, b.negf(values), mask, tok)


FAMILIES: dict[str, tuple[tuple[str, ...], Callable[[Kernel], None]]] = {
    "elementwise": (("f32", "f32", "f32"), _elementwise),
    "math": (("f32", "f32"), _math),
    "casts": (("f32", "f16", "i32"), _casts),
    "reductions": (("m32", "f32"), _reductions),
    "scans": (("f32", "f32"), _scans),
    "gemm": (("m16", "m16", "m32"), _gemm),
    "softmax": (("m32", "m32"), _softmax),
    "atomics": (("i32",), _atomics),
    "control_flow": (("f32", "f32"), _control_flow),
    "print_assert": (("f32",), _print_assert),
    "gather_scatter": (("f32", "f32"), _gather_scatter),
}


def build_family(name: str, version: Version) -> Module:
    """Return the module of family `name` built for bytecode `version`."""
    arrays, body = FAMILIES[name]
    k = _start(name, version, _params(*arrays))
    body(k)
    k.b.return_()
    return Module([k.fn])
