"""Run one-block kernels over whole numpy arrays in the interpreter, for the per-op checks.

`run_ops(build, inputs, out)` loads each input whole as a tile, stores ``build(builder, tiles)`` into `out` and
returns `out`; `run_with_pointers` also hands `build` the base pointer of every array (inputs then output), for
ops on pointers. The same path a compiled kernel takes (tensor and partition views, loads, stores) is exercised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from tile.ir import (
    Builder,
    Function,
    FunctionType,
    Module,
    PartitionViewType,
    ScalarType,
    TensorViewType,
    Value,
    bf16,
    f8E4M3FN,
    f8E8M0FNU,
    f16,
    f32,
    f64,
    i1,
    i8,
    i16,
    i32,
    i64,
    interp,
    ptr,
    scalar,
    tile,
)

__all__ = ["I32", "TYPES", "Arr", "binary", "run_ops", "run_with_pointers", "unary"]

Arr = npt.NDArray[Any]
I32 = scalar(i32)
TYPES: dict[Any, ScalarType] = {
    np.dtype(np.float32): f32, np.dtype(np.float16): f16, np.dtype(ml_dtypes.bfloat16): bf16,
    np.dtype(np.float64): f64, np.dtype(np.int8): i8, np.dtype(np.int16): i16, np.dtype(np.int32): i32,
    np.dtype(np.int64): i64, np.dtype(np.bool_): i1, np.dtype(ml_dtypes.float8_e4m3fn): f8E4M3FN,
    np.dtype(ml_dtypes.float8_e8m0fnu): f8E8M0FNU,
}  # fmt: skip


def run_with_pointers(
    build: Callable[[Builder, list[Value], list[Value]], Value], inputs: Sequence[Arr], out: Arr, **launch: Any
) -> Arr:
    """Like `run_ops`, but ``build(builder, base_pointers, tiles)`` also gets each array's base pointer."""
    arrays = [*inputs, out]
    types: list[Any] = []
    for a in arrays:
        types += [scalar(ptr(TYPES[a.dtype]))] + [I32] * (2 * a.ndim)
    fn = Function("k", FunctionType(tuple(types)))
    b = Builder(fn.body)
    views, bases, k = [], [], 0
    for a in arrays:
        p = fn.params[k : k + 1 + 2 * a.ndim]
        k += 1 + 2 * a.ndim
        bases.append(p[0])
        tv_t = TensorViewType(TYPES[a.dtype], (None,) * a.ndim, (None,) * a.ndim)
        tv = b.call("make_tensor_view", p[0], p[1 : 1 + a.ndim], p[1 + a.ndim :], result_type=tv_t).results[0]
        views.append(b.make_partition_view(tv, result_type=PartitionViewType(a.shape, tv_t, tuple(range(a.ndim)))))
    zero = b.constant(0, I32)
    tiles = [b.load_view_tko(v, [zero] * a.ndim)[0] for v, a in zip(views, inputs, strict=False)]
    b.call("store_view_tko", build(b, bases, tiles), views[-1], [zero] * out.ndim)
    b.return_()
    args: list[Any] = []
    for a in arrays:
        args += [a, *a.shape, *(s // a.itemsize for s in a.strides)]
    interp.launch(Module([fn]), launch.pop("grid", 1), args, **launch)
    return out


def run_ops(build: Callable[[Builder, list[Value]], Value], inputs: Sequence[Arr], out: Arr) -> Arr:
    """Load each input whole, store ``build(builder, tiles)`` into `out` (grid 1); return `out`."""
    return run_with_pointers(lambda b, _bases, tiles: build(b, tiles), inputs, out)


def binary(name: str, a: Arr, b: Arr, out_dtype: Any = None, **attrs: Any) -> Arr:
    """Apply the two-operand op `name` elementwise to `a` and `b` in the interpreter."""
    out = np.zeros(a.shape, out_dtype or a.dtype)
    return run_ops(lambda bb, t: getattr(bb, name)(t[0], t[1], **attrs), [a, b], out)


def unary(name: str, a: Arr, out_dtype: Any = None, **attrs: Any) -> Arr:
    """Apply the one-operand op `name` to `a` (converting to `out_dtype` when given) in the interpreter."""
    out = np.zeros(a.shape, out_dtype or a.dtype)
    elem = TYPES[np.dtype(out.dtype)]
    kw = dict(attrs)
    if out_dtype is not None:
        kw["result_type"] = tile(a.shape, elem)
    return run_ops(lambda bb, t: getattr(bb, name)(t[0], **kw), [a], out)
