"""The entry wrapper: kernel parameters per the entry ABI, ``assume`` facts, tensor views, the first token.

For each tensor (``Tensor`` or ``Mut``) parameter of rank r the kernel takes a base pointer, r extents and r
strides (index dtype from the specialization); a tuple parameter of n tensors takes those of each element in order,
as the parameters ``name[0]`` .. ``name[n-1]`` (n is the compile-time ``spec.const(name)``), and is a tuple in the
body; scalars take one slot (``bool`` as i32); ``Const`` parameters and
const generics take none and become compile-time ints in the body. Facts from the specialization become
``assume`` ops: extents and strides are non-negative, and power-of-two divisibility (capped by
``CompileOptions.max_divisibility``) for extents, strides and the base address.

The first token, from which every memory access's token chain starts, is ``make_token``; with
``CompileOptions.pdl`` it is the result of ``gdc_wait_tko`` instead, so no load, store or atomic can move above the
wait for the grids before the kernel (see `tile.compiler.CompileOptions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tile.compiler._kir import AssumeBounded, AssumeDivBy, Value
from tile.compiler._resolve import ParamInfo
from tile.compiler._spec import AbiSlot, ArraySpec, ScalarSpec, Specialization, canonical_dtype
from tile.compiler._typecheck_memory import ENTRY_TOKEN, RAW_TOKEN
from tile.compiler._typecheck_values import TensorV
from tile.compiler._types import DTYPES, DType, PtrType, TensorViewType, TileType, TokenType, is_pow2

if TYPE_CHECKING:
    from tile.compiler._typecheck import Checker

__all__ = ["build_entry"]

_BY_CANONICAL: dict[str, DType] = {canonical_dtype(d.name): d for d in DTYPES.values()}


def build_entry(ch: Checker, spec: Specialization) -> tuple[list[Value], list[AbiSlot]]:
    """Emit the entry prologue into the current block; bind every parameter in ``ch.env``."""
    _bind_generics(ch, spec)
    params: list[Value] = []
    slots: list[AbiSlot] = []
    if spec.options.pdl:
        ch.at(ch.kernel.tree)
        ch.require_version((13, 4), "@tile.entry(pdl=True) or TILE_PDL=1 (its entry wait, gdc_wait_tko)")
        ch.env[ENTRY_TOKEN] = ch.em.one("gdc_wait_tko", [None], TokenType())
    else:
        ch.env[ENTRY_TOKEN] = ch.em.one("make_token", [], TokenType())
    ch.env[RAW_TOKEN] = ch.env[ENTRY_TOKEN]
    for p in ch.resolved.params:
        ch.at(p.node or ch.kernel.tree)
        if p.kind in ("tensor", "mut"):
            _tensor(ch, p, spec, params, slots)
        elif p.kind == "tuple":
            _tuple(ch, p, spec, params, slots)
        elif p.kind == "const":
            _const(ch, p, spec)
        elif p.kind in ("scalar", "ptr"):
            _scalar(ch, p, spec, params, slots)
        else:
            ch.fail(
                f"kernel parameter '{p.name}' needs an annotation: Tensor[dtype, shape], "
                "Mut[Tensor[dtype, tile_shape]], Const[int] or a scalar type such as int or tile.f32"
            )
    return params, slots


def _bind_generics(ch: Checker, spec: Specialization) -> None:
    for p in ch.resolved.params:
        for item in p.shape:
            if isinstance(item, str) and item not in ch.env:
                value = spec.const(item)
                if type(value) is not int or value <= 0:
                    ch.at(p.node.annotation if p.node and p.node.annotation else ch.kernel.tree)
                    got = "no value" if value is None else f"the value {value!r}"
                    ch.fail(
                        f"const generic '{item}' has {got}; it must be a positive int, inferred at launch from "
                        f"the partition or passed as {item}=... when launching"
                    )
                ch.env[item] = value


def _div(ch: Checker, v: Value, div: int, spec: Specialization) -> Value:
    div = min(div, spec.options.max_divisibility)
    return ch.em.one("assume", [v], v.type, predicate=AssumeDivBy(div)) if div > 1 else v


def _tensor(ch: Checker, p: ParamInfo, spec: Specialization, params: list[Value], slots: list[AbiSlot]) -> None:
    rank = len(p.shape)
    given = spec.param(p.name)
    if isinstance(given, ScalarSpec):
        ch.fail(f"parameter '{p.name}' is a tensor but the specialization describes a scalar")
    dt = p.dtype if p.dtype is not None else _generic_dtype(ch, p, spec, given)
    arr = given if given is not None else ArraySpec.contiguous(canonical_dtype(dt.name), rank)
    if arr.dtype != canonical_dtype(dt.name) or arr.ndim != rank:
        ch.fail(
            f"'{p.name}' is declared as a rank-{rank} {dt.name} tensor but got a rank-{arr.ndim} {arr.dtype} tensor"
        )
    index = DTYPES[arr.index_dtype]
    base = ch.em.value(TileType(PtrType(dt)))
    extents = [ch.em.value(TileType(index)) for _ in range(rank)]
    strides = [ch.em.value(TileType(index)) for _ in range(rank)]
    params += [base, *extents, *strides]
    slots.append(AbiSlot(p.name, "base", -1, f"ptr<{canonical_dtype(dt.name)}>"))
    slots += [AbiSlot(p.name, "shape", i, arr.index_dtype) for i in range(rank)]
    slots += [AbiSlot(p.name, "stride", i, arr.index_dtype) for i in range(rank)]
    static = [_static_extent(ch, p, arr, i) for i in range(rank)]
    base = _div(ch, base, arr.base_div, spec)
    shape_vals: list[Value | int] = []
    dyn_shape: list[Value] = []
    for i, ext in enumerate(extents):
        if static[i] is not None:
            shape_vals.append(static[i])  # type: ignore[arg-type]  # checked not None
            continue
        v = _div(ch, ch.em.one("assume", [ext], ext.type, predicate=AssumeBounded(0, None)), arr.shape_div[i], spec)
        dyn_shape.append(v)
        shape_vals.append(v)
    stride_vals: list[Value | int] = [
        1
        if arr.stride_one[i]
        else _div(ch, ch.em.one("assume", [s], s.type, predicate=AssumeBounded(0, None)), arr.stride_div[i], spec)
        for i, s in enumerate(strides)
    ]
    dyn_strides = [s for s in stride_vals if isinstance(s, Value)]
    vt = TensorViewType(dt, tuple(static), tuple(1 if one else None for one in arr.stride_one))
    view = ch.em.one("make_tensor_view", [base, dyn_shape, dyn_strides], vt)
    tile = _tile_shape(ch, p) if p.kind == "mut" else ()
    ch.env[p.name] = TensorV(
        p.name, dt, view, vt, tuple(shape_vals), p.kind == "mut", tile, base, strides=tuple(stride_vals)
    )
    if p.kind == "mut":
        ch.env[f"$tok:{p.name}"] = ch.env[ENTRY_TOKEN]


MAX_TUPLE = 64
"""The most elements a tuple parameter takes: each is its own set of kernel parameters (pointer, extents, strides)."""


def _tuple(ch: Checker, p: ParamInfo, spec: Specialization, params: list[Value], slots: list[AbiSlot]) -> None:
    """A tuple of tensors: one tensor parameter per element (``name[i]``), bound in the body as a Python tuple."""
    count = spec.const(p.name)
    if type(count) is not int or not 1 <= count <= MAX_TUPLE:
        got = "no length" if count is None else f"the length {count!r}"
        ch.fail(
            f"tuple parameter '{p.name}' has {got}; it takes 1 to {MAX_TUPLE} tensors, its length given at launch "
            f"(or as the const {p.name}=N when compiling ahead of time)"
        )
    elements = []
    for element in p.elements(count):
        _tensor(ch, element, spec, params, slots)
        elements.append(ch.env[element.name])
    ch.env[p.name] = tuple(elements)


def _generic_dtype(ch: Checker, p: ParamInfo, spec: Specialization, given: ArraySpec | None) -> DType:
    """The dtype bound to a dtype generic: ``spec.dtype(generic)``, ``spec.dtype(param)`` or the array's dtype."""
    name = p.dtype_generic or p.name
    bound = ch.env.get(name)
    arrays = [spec.param(q.name) for q in ch.resolved.params if q.dtype_generic == name and q.kind != "tuple"]
    from_arrays = [a.dtype for a in arrays if isinstance(a, ArraySpec)]
    found = spec.dtype(name) or spec.dtype(p.name) or (given.dtype if given is not None else None)
    found = found or (from_arrays[0] if from_arrays else None)
    dt = _BY_CANONICAL.get(found) if found else None
    if dt is None:
        ch.fail(
            f"dtype generic '{name}' of parameter '{p.name}' has no value; launch with a tensor, or pass "
            f"--dtype {name}=f16 when compiling ahead of time"
        )
    if isinstance(bound, DType) and bound != dt:
        ch.fail(f"dtype generic '{name}' is {bound.name} for an earlier parameter but {dt.name} for '{p.name}'")
    ch.env[name] = dt
    return dt


def _static_extent(ch: Checker, p: ParamInfo, arr: ArraySpec, i: int) -> int | None:
    if p.kind == "tensor":
        item = p.shape[i]
        if isinstance(item, str):
            return ch.env[item]  # type: ignore[return-value]  # bound to a positive int by _bind_generics
        if item > 0:
            return item
    return arr.static_shape[i]


def _tile_shape(ch: Checker, p: ParamInfo) -> tuple[int, ...]:
    dims = tuple(ch.env[d] if isinstance(d, str) else d for d in p.shape)
    if bad := [d for d in dims if not is_pow2(d)]:  # type: ignore[arg-type]  # ints bound above
        ch.at(p.node.annotation if p.node and p.node.annotation else ch.kernel.tree)
        ch.fail(f"the tile shape of output '{p.name}' must have power-of-two dims, got {bad[0]} in {dims}")
    return dims  # type: ignore[return-value]  # ints bound above


def _const(ch: Checker, p: ParamInfo, spec: Specialization) -> None:
    value = spec.const(p.name)
    kind = p.const_kind
    ok = value is not None and (type(value) is kind or (kind is float and type(value) is int))
    if not ok:
        got = "no value" if value is None else f"{value!r}"
        ch.fail(f"Const parameter '{p.name}' needs a compile-time {kind.__name__ if kind else 'value'}, got {got}")
    ch.env[p.name] = float(value) if kind is float else value  # type: ignore[arg-type]  # checked above


def _scalar(ch: Checker, p: ParamInfo, spec: Specialization, params: list[Value], slots: list[AbiSlot]) -> None:
    assert p.dtype is not None  # scalar and pointer annotations always carry a dtype
    given = spec.param(p.name)
    if isinstance(given, ArraySpec):
        ch.fail(f"parameter '{p.name}' is a scalar but the specialization describes a tensor")
    if p.kind == "ptr":
        ch.require_unchecked(f"raw pointer parameter '{p.name}'")
        v = ch.em.value(TileType(PtrType(p.dtype)))
        params.append(v)
        slots.append(AbiSlot(p.name, "pointer", -1, f"ptr<{canonical_dtype(p.dtype.name)}>"))
        ch.env[p.name] = _div(ch, v, given.div if given else 1, spec)
        return
    dt = DTYPES[given.dtype] if given is not None and given.dtype in DTYPES else p.dtype
    abi = DTYPES["i32"] if dt.kind == "b" else dt
    v = ch.em.value(TileType(abi))
    params.append(v)
    slots.append(AbiSlot(p.name, "value", -1, abi.name))
    value: Value = _div(ch, v, given.div, spec) if given is not None and dt.is_int else v
    if dt.kind == "b":
        value = ch.convert(value, dt)
    ch.env[p.name] = value
