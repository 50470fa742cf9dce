"""What a kernel call's arguments make of its compile: ``Const`` parameters given by keyword, the layout key of the
compile cache, each tensor argument's `ArraySpec`, the device and `Target`, and the index guards the compiler left
to the launcher (see `tile.frontend._entry`), and what the kernel reads from globals at compile time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tile.compiler import ArraySpec, CompiledKernel, CompileError, Target, failed_guard
from tile.compiler._captures import Captures, captures
from tile.compiler._knobs import knobs as compiler_knobs
from tile.compiler._spec import canonical_dtype
from tile.frontend import _backend
from tile.frontend._errors import ArgumentError, GridError
from tile.frontend._shared import HANDLES, tensor_of
from tile.frontend._signature import Bound, Param, const_key
from tile.frontend._storage import HOST
from tile.frontend._tensor import Tensor

__all__ = [
    "array_spec",
    "captures_of",
    "check_guards",
    "compile_layout_key",
    "const_keywords",
    "device_of",
    "target_of",
]

_I32_MAX = 2**31 - 1


def const_keywords(
    name: str, params: Sequence[Param], args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[Sequence[Any], dict[str, Any]]:
    """Let trailing ``Const`` parameters be passed by keyword: ``gemm(z, x, y, BK=64)``."""
    by_name = {p.name: i for i, p in enumerate(params) if p.kind == "const"}
    twice = sorted(k for k in kwargs if k in by_name and by_name[k] < len(args))
    if twice:
        raise ArgumentError(f"{name}() got multiple values for {twice}: pass a Const parameter by position or keyword")
    taken = {k: kwargs.pop(k) for k in list(kwargs) if k in by_name and by_name[k] >= len(args)}
    if not taken:
        return args, kwargs
    extended = list(args)
    for p in params[len(args) :]:
        if p.name not in taken:
            raise ArgumentError(f"{name}(): parameter '{p.name}' is missing (Const parameters after it were given)")
        extended.append(taken.pop(p.name))
    return extended, kwargs


def compile_layout_key(device: object, bound: Bound) -> tuple[Any, ...]:
    """Everything `Kernel._specialize` reads from the arguments: dtypes, extents, strides, base alignment, generics."""
    layouts = tuple(
        (t.dtype, t.shape, t.strides, t._address() & 15)
        for t in (tensor_of(v) for v in bound.values if isinstance(v, HANDLES))
    )
    consts = tuple((name, const_key(value)) for name, value in bound.consts.items())
    return (device, layouts, consts, tuple(bound.dtypes.items()))


def check_guards(name: str, params: Sequence[Param], bound: Bound, compiled: CompiledKernel) -> None:
    """Raise unless the index checks the compiler left to the launcher hold for these extents and this grid."""
    if not compiled.abi.guards:
        return
    shapes = {p.name: tensor_of(v).shape for p, v in zip(params, bound.values, strict=False) if isinstance(v, HANDLES)}
    grid = bound.grid or (1, 1, 1)
    guard = failed_guard(compiled.abi.guards, shapes, grid)
    if guard is not None:
        error = GridError if guard.bound.kind == "grid" else ArgumentError
        raise error(f"{name}(): {guard.explain(shapes, grid)}")


def device_of(device: object) -> object:
    """The launch's device: its tensors', else the current backend's (host, or GPU 0)."""
    if device is not None:
        return device
    if _backend.backend() == "cpu":
        return HOST
    from tile import core

    return core.Device(0)


def target_of(device: object) -> Target:
    if device == HOST:
        return Target.cpu()
    return Target(arch=device.arch)  # type: ignore[attr-defined]  # a tile.core.Device


def array_spec(p: Param, t: Tensor, max_div: int) -> ArraySpec:
    static = [i for i, item in enumerate(p.shape) if item != -1] if p.kind == "tensor" else []
    reach = sum((n - 1) * s for n, s in zip(t.shape, t.strides, strict=False))
    wide = max((*t.shape, *t.strides, reach), default=0) > _I32_MAX
    return ArraySpec.of(
        canonical_dtype(t.dtype.name),
        t.shape,
        t.strides,
        t._address(),
        static_dims=static,
        index_dtype="i64" if wide else "i32",
        max_divisibility=max_div,
    )


def captures_of(fn: Callable[..., Any]) -> Captures:
    """`captures` of the kernel function, its CompileError shown at the user's line only (as `compile_kernel` does)."""
    try:
        return captures(fn)
    except CompileError as exc:
        if compiler_knobs().debug:
            raise
        raise exc.with_traceback(None) from None
