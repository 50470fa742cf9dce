"""One-op kernels that break (or just satisfy) a verifier rule, for the verifier-vs-tileiras agreement tests.

Each `Case` holds a module, the architecture tileiras compiles it for, and the message fragment the verifier
must report (None: the module is valid and tileiras compiles it). Builders: `scaled` (mmaf_scaled), `view`
(a load/store/atomic reduction through a partition, strided or gather/scatter view), `multimem` and `ftof`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tile.ir import (
    DYNAMIC,
    Builder,
    Function,
    FunctionType,
    GatherScatterViewType,
    Module,
    PartitionViewType,
    PointerAttr,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
    Value,
    f32,
    i8,
    i32,
    ptr,
    scalar,
    tile,
    token,
)

__all__ = ["Case", "ftof", "kernel", "malformed", "multimem", "mutants", "pointer_atomic", "scaled", "through", "view"]

View = PartitionViewType | StridedViewType | GatherScatterViewType


@dataclass(frozen=True)
class Case:
    """A module, the arch tileiras compiles it for, and the verifier message it must get (None: valid)."""

    module: Module
    message: str | None
    arch: str = "sm_100"


def kernel(body: Callable[[Builder, Function], None], params: Sequence[TileType] = ()) -> Module:
    """An entry ``k`` with `params` (default: ``tile<ptr<f32>>, tile<i32>``) whose body `body` builds."""
    fn = Function("k", FunctionType(tuple(params) or (scalar(ptr(f32)), scalar(i32))))
    b = Builder(fn.body)
    body(b, fn)
    b.return_()
    return Module([fn])


def _const(b: Builder, t: TileType) -> Value:
    return b.constant(1.0 if isinstance(t.element, ScalarType) and t.element.is_float else 0, t)


def scaled(operands: tuple[ScalarType, ScalarType], scales: tuple[ScalarType, ScalarType], shapes: str) -> Module:
    """mmaf_scaled of lhs/rhs element `operands`, scale elements `scales` and shapes ``"a b acc sa sb"``.

    A shape is ``MxK`` written with ``x``; e.g. ``"16x32 32x16 16x16 16x1 1x16"``.
    """
    a, b_, acc, sa, sb = (tuple(int(d) for d in s.split("x")) for s in shapes.split())

    def body(b: Builder, fn: Function) -> None:
        lhs, rhs = _const(b, tile(a, operands[0])), _const(b, tile(b_, operands[1]))
        lhs_scale, rhs_scale = _const(b, tile(sa, scales[0])), _const(b, tile(sb, scales[1]))
        b.mmaf_scaled(lhs, rhs, _const(b, tile(acc, f32)), lhs_scale, rhs_scale)

    return kernel(body)


def _make(b: Builder, tv_value: Value, vt: View) -> Value:
    if isinstance(vt, PartitionViewType):
        return b.make_partition_view(tv_value, result_type=vt)
    if isinstance(vt, StridedViewType):
        return b.make_strided_view(tv_value, result_type=vt)
    return b.make_gather_scatter_view(tv_value, result_type=vt)


def _tensor_view(b: Builder, fn: Function, tv: TensorViewType) -> Value:
    size = fn.params[1]
    shape = [size] * sum(d is DYNAMIC for d in tv.shape)
    return b.make_tensor_view(fn.params[0], shape, [size] * sum(s is DYNAMIC for s in tv.strides), result_type=tv)


def view(vt: View, indices: Sequence[TileType], op: str = "load", value: TileType | None = None) -> Module:
    """`op` (``load``, ``store`` or an atomic_red_view mode such as ``addf``) through view type `vt`."""
    tv = vt.tensor_view
    accessed = value or tile(vt.tile_shape, tv.element)

    def body(b: Builder, fn: Function) -> None:
        v = _make(b, _tensor_view(b, fn, tv), vt)
        index = [_const(b, t) for t in indices]
        if op == "load":
            b.load_view_tko(v, index, result_types=[accessed, token])
        elif op == "store":
            b.store_view_tko(_const(b, accessed), v, index)
        else:
            b.atomic_red_view_tko(
                v, index, _const(b, accessed), memory_ordering_semantics="relaxed", memory_scope="device", mode=op
            )

    return kernel(body, (scalar(ptr(tv.element)), scalar(i32)))


def multimem(
    vt: View, indices: Sequence[TileType], op: str = "multimem_store_view_tko", reduction: str = "add"
) -> Module:
    """A multimem op through `vt` (`reduction` for the reducing ones); its tensor view must be multicast (13.5)."""
    tv = vt.tensor_view

    def body(b: Builder, fn: Function) -> None:
        v = _make(b, _tensor_view(b, fn, tv), vt)
        index = [_const(b, t) for t in indices]
        accessed = tile(vt.tile_shape, tv.element)
        if op == "multimem_load_reduce_view_tko":
            b.multimem_load_reduce_view_tko(v, index, memory_scope="sys", reduction=reduction)
        elif op == "multimem_reduce_view_tko":
            b.call(op, v, _const(b, accessed), index, memory_scope="sys", reduction=reduction)
        else:
            b.call(op, v, _const(b, accessed), index, memory_ordering_semantics="weak")

    return kernel(body, (scalar(PointerType(tv.element, ptr_attr=PointerAttr.MULTICAST)), scalar(i32)))


def pointer_atomic(elem: ScalarType, mode: str | None) -> Module:
    """``atomic_rmw_tko`` with `mode` on 16 ``ptr<elem>`` (``atomic_cas_tko`` when `mode` is None)."""

    def body(b: Builder, fn: Function) -> None:
        one = b.reshape(fn.params[0], result_type=tile((1,), ptr(elem)))
        pointers = b.broadcast(one, result_type=tile((16,), ptr(elem)))
        value = _const(b, tile((16,), elem))
        if mode is None:
            b.atomic_cas_tko(pointers, value, value, memory_scope="device", memory_ordering_semantics="relaxed")
        else:
            b.atomic_rmw_tko(pointers, value, memory_scope="device", memory_ordering_semantics="relaxed", mode=mode)

    return kernel(body, (scalar(ptr(elem)), scalar(i32)))


def ftof(src: ScalarType, dst: ScalarType, mode: str, n: int = 16) -> Module:
    """Load ``tile<n x src>``, ftof it to `dst` with `mode`, widen to f32 and store it (so nothing is dead)."""

    def pointers(b: Builder, base: Value, elem: ScalarType) -> Value:
        one = b.reshape(base, result_type=tile((1,), ptr(elem)))
        return one if n == 1 else b.broadcast(one, result_type=tile((n,), ptr(elem)))

    def body(b: Builder, fn: Function) -> None:
        x, _ = b.load_ptr_tko(pointers(b, fn.params[0], src), result_types=[tile((n,), src), token])
        y = b.ftof(x, result_type=tile((n,), dst), rounding_mode=mode)
        z = y if dst == f32 else b.ftof(y, result_type=tile((n,), f32), rounding_mode="nearest_even")
        b.store_ptr_tko(pointers(b, fn.params[2], f32), z)

    return kernel(body, (scalar(ptr(src)), scalar(i32), scalar(ptr(f32))))


def through(elem: ScalarType, build: Callable[[Builder, Value], Value]) -> Module:
    """Load ``tile<16xf32>``, convert it to `elem`, apply `build`, convert the result back to f32 and store it.

    i4 goes through i8 (``ftoi`` then ``trunci``, ``exti`` back): i4 exists only in registers.
    """

    def convert(b: Builder, v: Value, to: ScalarType) -> Value:
        src = v.type.element if isinstance(v.type, TileType) else f32
        assert isinstance(src, ScalarType)
        if src == to:
            return v
        if src.name == "i4":
            return convert(b, b.exti(v, result_type=tile((16,), i8), signedness="signed"), to)
        if to.name == "i4":
            return b.trunci(convert(b, v, i8), result_type=tile((16,), to))
        if src.is_float and to.is_float:
            return b.ftof(
                v, result_type=tile((16,), to), rounding_mode="zero" if to.name == "f8E8M0FNU" else "nearest_even"
            )
        if src.is_float:
            return b.ftoi(v, result_type=tile((16,), to), signedness="signed")
        return b.itof(v, result_type=tile((16,), to), signedness="signed")

    def body(b: Builder, fn: Function) -> None:
        one = b.reshape(fn.params[0], result_type=tile((1,), ptr(f32)))
        pointers = b.broadcast(one, result_type=tile((16,), ptr(f32)))
        x, _ = b.load_ptr_tko(pointers, result_types=[tile((16,), f32), token])
        b.store_ptr_tko(pointers, convert(b, build(b, convert(b, x, elem)), f32))

    return kernel(body)


def mutants(count: int, seed: int, pool: Sequence[Type] | None = None) -> list[tuple[str, Module]]:
    """Op samples with one corruption each: a result type from ``pool`` (by default one that includes the rarer
    element types), an enum attribute value, or two operands swapped. Deterministic for a given `seed`."""
    import random

    from helpers_ir_samples import build_sample
    from tile.ir import V13_5, bf16, f4E2M1FN, f8E4M3FN, f8E8M0FNU, f16, i1, i4, tf32
    from tile.ir.ops import CATALOG

    if pool is None:
        pool = [tile((16,), e) for e in (f32, f16, bf16, tf32, f8E4M3FN, f8E8M0FNU, f4E2M1FN, i1, i4, i8, i32)]
        pool += [tile((8,), f32), scalar(i32), tile((16, 16), f32)]
    rng = random.Random(seed)
    out: list[tuple[str, Module]] = []
    while len(out) < count:
        name = rng.choice(sorted(CATALOG))
        module = build_sample(name, V13_5)
        ops = [op for op in module.functions[0].walk() if op.name == name and op.name != "constant"]
        if not ops:
            continue
        op = rng.choice(ops)
        enums = [spec for spec in CATALOG[name].attrs if spec.enum is not None and spec.name in op.attributes]
        roll = rng.random()
        if roll < 0.5 and op.results:
            op.results[rng.randrange(len(op.results))].type = rng.choice(pool)
        elif roll < 0.8 and enums:
            spec = rng.choice(enums)
            assert spec.enum is not None
            op.attributes[spec.name] = rng.choice(list(spec.enum))
        elif len(op.operands) > 1:
            i, j = rng.sample(range(len(op.operands)), 2)
            op.operands[i], op.operands[j] = op.operands[j], op.operands[i]
        out.append((name, module))
    return out


def malformed(count: int, seed: int) -> list[Module]:
    """Op samples with their arity broken: results dropped, an operand dropped from a group, or operand/result
    types replaced with unrelated ones. The verifier must report these, never raise."""
    import random

    from helpers_ir_samples import build_sample
    from tile.ir import V13_5, token
    from tile.ir.ops import CATALOG

    pool: list[Type] = [tile((16,), f32), scalar(i32), token, tile((4, 4), f32)]
    rng = random.Random(seed)
    out: list[Module] = []
    while len(out) < count:
        name = rng.choice(sorted(CATALOG))
        module = build_sample(name, V13_5)
        ops = [op for op in module.functions[0].walk() if op.name == name]
        if not ops:
            continue
        op, roll = rng.choice(ops), rng.random()
        if roll < 0.3 and op.results:
            op.results = op.results[: rng.randrange(len(op.results))]
        elif roll < 0.6 and any(op.segments):
            group = rng.choice([g for g, n in enumerate(op.segments) if n])
            del op.operands[sum(op.segments[:group])]
            op.segments = tuple(n - (g == group) for g, n in enumerate(op.segments))
        else:
            for value in [*op.operands, *op.results]:
                value.type = rng.choice(pool) if rng.random() < 0.5 else value.type
        out.append(module)
    return out
