"""A kernel's parameters as the launcher sees them, and the checks that bind call arguments to them.

Invariants: binding reads only the Python annotations (no compiler stage), checks every argument's kind, dtype,
rank, static extents and tile shape, infers const generics (from partition tile shapes and static dims, or
keywords), and raises `ArgumentError` / `GridError` naming the parameter and the fix. It moves nothing and touches
no memory, so a failed call leaves every handle usable. The grid (from the ``Mut`` partitions) is checked once the
kernel is compiled (`launch_grid`): whether an output fixes the grid depends on how the compiled code addresses it
(its own tile, or ``z.tiles()``), which the compiler records in the ABI.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tile.compiler import KernelABI
from tile.compiler._resolve import annotations_of, tuple_element
from tile.compiler._types import DTYPES
from tile.compiler.lang import DType
from tile.compiler.lang._annotations import ConstAnnotation, MutAnnotation, PtrAnnotation, TensorAnnotation
from tile.frontend._errors import ArgumentError, GridError
from tile.frontend._partition import Partition
from tile.frontend._shared import Shared
from tile.frontend._tensor import Tensor

__all__ = [
    "CHECKS",
    "FLOAT_INT",
    "Bound",
    "Param",
    "bind",
    "const_key",
    "int_range",
    "launch_grid",
    "plain_number",
    "read_params",
    "with_schemes",
]

_SCALARS: Mapping[object, DType] = {int: DTYPES["i32"], float: DTYPES["f32"], bool: DTYPES["i1"]}
_MAX_GRID = (2**31 - 1, 65535, 65535)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``kind`` is tensor, mut, const, scalar, ptr or tuple.

    A tuple parameter (``tuple[Tensor[...], ...]``) has ``element`` "tensor" or "mut" and the elements' dtype and
    shape; a call flattens it into one parameter per element, ``name[i]`` (see ``tile.frontend._groups``).
    """

    name: str
    kind: str
    dtype: DType | str | None = None  # a str is a dtype generic, bound from the argument
    shape: tuple[int | str, ...] = ()
    const_kind: type | None = None
    # A Mut output the compiled kernel walks with ``z.tiles()`` (any grid covers it race-free); set from the compiled
    # kernel's ABI by `with_schemes`, so before compiling every output counts as stored at its own tile.
    tiled: bool = False
    element: str | None = None


@dataclass
class Bound:
    """A call's arguments bound to the parameters, with the inferred generics and grid."""

    values: list[Any]
    consts: dict[str, int | float | bool] = field(default_factory=dict)
    dtypes: dict[str, DType] = field(default_factory=dict)
    grid: tuple[int, int, int] | None = None


def read_params(fn: Callable[..., Any]) -> tuple[Param, ...]:
    """Read the parameters of a kernel from its annotations."""
    try:
        annotations = annotations_of(fn)  # the very annotations every compile of fn reads (evaluated once)
    except Exception as exc:  # any failure while evaluating a user's annotation string
        raise ArgumentError(f"cannot evaluate the annotations of kernel '{fn.__name__}': {exc}") from None
    return tuple(_param(name, annotations.get(name)) for name in inspect.signature(fn).parameters)


def with_schemes(params: tuple[Param, ...], abi: KernelABI) -> tuple[Param, ...]:
    """``params`` with ``tiled`` set from the compiled kernel: how its code addresses each output (not its text)."""
    if not any(p.kind == "mut" and p.tiled != abi.walks_tiles(p.name) for p in params):
        return params
    return tuple(dataclasses.replace(p, tiled=abi.walks_tiles(p.name)) if p.kind == "mut" else p for p in params)


def _param(name: str, ann: object) -> Param:
    if (element := tuple_element(ann)) is not None:
        inner = _param(name, element)
        return dataclasses.replace(inner, kind="tuple", element=inner.kind)
    if isinstance(ann, TensorAnnotation):
        return Param(name, "tensor", ann.dtype, ann.shape)
    if isinstance(ann, MutAnnotation):
        return Param(name, "mut", ann.tensor.dtype, ann.tensor.shape)
    if isinstance(ann, ConstAnnotation):
        return Param(name, "const", const_kind=ann.kind)
    if isinstance(ann, PtrAnnotation):
        return Param(name, "ptr", ann.dtype)
    if isinstance(ann, DType) or ann in _SCALARS:
        return Param(name, "scalar", ann if isinstance(ann, DType) else _SCALARS[ann])
    raise ArgumentError(
        f"kernel parameter '{name}' needs an annotation: Tensor[dtype, shape], Mut[Tensor[dtype, tile_shape]], "
        f"tuple[Tensor[dtype, shape], ...], Const[int], Ptr[dtype] or a scalar type (int, float, tile.f32); got {ann!r}"
    )


def generic_names(params: Sequence[Param]) -> set[str]:
    """Every const-generic name used in the parameters' shapes."""
    return {item for p in params for item in p.shape if isinstance(item, str)}


def bind(
    kernel: str,
    params: Sequence[Param],
    args: Sequence[Any],
    generics: Mapping[str, int],
    *,
    grid: tuple[int, ...] | None,
    unchecked: bool,
) -> Bound:
    """Check ``args`` against ``params`` and infer generics and the grid (see the module docstring)."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise ArgumentError(f"{kernel}({names}) takes {len(params)} arguments but {len(args)} were given")
    unknown = set(generics) - generic_names(params)
    if unknown:
        raise ArgumentError(
            f"{kernel}() got keyword(s) {sorted(unknown)} that are not const generics of its signature "
            f"(its generics: {sorted(generic_names(params)) or 'none'})"
        )
    for name, value in generics.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise ArgumentError(f"{kernel}(): const generic {name}={value!r} must be an int, e.g. {name}=64")
    inferred: dict[str, tuple[Any, str]] = {k: (int(v), "the keyword argument") for k, v in generics.items()}
    bound = Bound(list(args))
    for i, (p, given) in enumerate(zip(params, args, strict=False)):
        a = given
        if p.kind in ("scalar", "ptr") and (type(type(a)) is not type or type(a) not in _BUILTIN_NUMBERS):
            a = bound.values[i] = plain_number(a)  # the value checked is the value packed
        CHECKS[p.kind](kernel, p, a, inferred, unchecked)
        if p.kind == "const":
            bound.consts[p.name] = a
    missing = generic_names(params) - set(inferred) - {p.dtype for p in params if isinstance(p.dtype, str)}
    if missing:
        raise ArgumentError(
            f"{kernel}(): const generic(s) {sorted(missing)} cannot be inferred from the arguments; pass them as "
            f"keywords, e.g. {kernel}(..., {sorted(missing)[0]}=64)"
        )
    bound.consts.update({k: v for k, (v, _) in inferred.items() if not isinstance(v, DType)})
    bound.dtypes.update({k: v for k, (v, _) in inferred.items() if isinstance(v, DType)})
    if grid is None and not any(p.kind == "mut" for p in params):
        raise GridError(
            f"{kernel}() has no Mut output to infer the launch grid from and no grid was given; "
            f"launch it as {kernel}.grid((x, y, z))(...)"
        )
    return bound


def _where(kernel: str, p: Param) -> str:
    return f"argument '{p.name}' of {kernel}()"


def _check_dtype_rank(
    kernel: str, p: Param, dtype: DType, rank: int, *, what: str, inferred: dict[str, tuple[Any, str]]
) -> None:
    if isinstance(p.dtype, str):
        seen = inferred.setdefault(p.dtype, (dtype, f"the dtype of '{p.name}'"))
        if seen[0] != dtype:
            raise ArgumentError(
                f"{kernel}(): dtype generic {p.dtype} is {seen[0].name} from {seen[1]} but {dtype.name} from "
                f"the dtype of '{p.name}'; convert one of them"
            )
    elif dtype != p.dtype:
        raise ArgumentError(
            f"{_where(kernel, p)} has dtype {dtype.name} but the kernel declares {p.dtype.name if p.dtype else '?'}; "
            f"convert it (e.g. tile.from_numpy(x.to_numpy(), dtype=tile.{p.dtype.name if p.dtype else 'f32'}))"
        )
    if rank != len(p.shape):
        raise ArgumentError(
            f"{_where(kernel, p)} has rank {rank} ({what}) but the kernel declares rank {len(p.shape)} {list(p.shape)}"
        )


MAX_DIM_EXTENT = 2**31 - 1
"""The longest tensor dim a kernel takes. Tile IR counts a partition's tiles along a dim, and the kernel indexes them
(block ids, sub-tile bases ``own * ratio + j``, loop bounds), in 32-bit integers: a longer dim could wrap an index
onto another block's tile (seen with ``z.subtiles((1,))`` on a 2**32 + 2**24 element output)."""


def _check_extents(kernel: str, p: Param, shape: Sequence[int]) -> None:
    for axis, n in enumerate(shape):
        if n > MAX_DIM_EXTENT:
            raise ArgumentError(
                f"{_where(kernel, p)} has {n} elements along dim {axis}, more than a kernel can index (2**31 - 1: "
                "tile indices are 32-bit); reshape it so no dim is that long (e.g. x.reshape(-1, 2**20))"
            )


def _match_dims(kernel: str, p: Param, dims: Sequence[int], what: str, inferred: dict[str, tuple[Any, str]]) -> None:
    for axis, (item, n) in enumerate(zip(p.shape, dims, strict=False)):
        if type(item) is int:
            if item not in (-1, n):
                source = f"{what} of '{p.name}' (axis {axis})"
                raise ArgumentError(f"{_where(kernel, p)}: {source} is {n} but the kernel declares {item}")
            continue
        seen = inferred.get(item)  # type: ignore[arg-type]  # a const-generic name (str) here
        if seen is None:
            inferred[item] = (n, f"{what} of '{p.name}' (axis {axis})")  # type: ignore[index]  # a name
        elif seen[0] != n:
            source = f"{what} of '{p.name}' (axis {axis})"
            raise ArgumentError(f"{kernel}(): const generic {item} is {seen[0]} from {seen[1]} but {n} from {source}")


def _check_mut(kernel: str, p: Param, a: Any, inferred: dict[str, tuple[Any, str]], unchecked: bool) -> None:
    if isinstance(a, Shared):
        raise ArgumentError(
            f"{_where(kernel, p)} is a Mut output but got a Shared tensor, which is read-only: .unshare() it once "
            "its readers are done, then partition it"
        )
    if isinstance(a, Tensor):
        raise ArgumentError(
            f"{_where(kernel, p)} is a Mut output and needs a Partition, got a Tensor: pass "
            f"{p.name}.partition(({', '.join(map(str, p.shape))},)) (each block may write only its own tile)"
        )
    if not isinstance(a, Partition):
        raise ArgumentError(f"{_where(kernel, p)} is a Mut output and needs a Partition, got {type(a).__name__}")
    a._check(admit=True)  # the kernel call may take a partition in flight (see _launch)
    _check_extents(kernel, p, a.shape)
    _check_dtype_rank(kernel, p, a.dtype, len(a.tile_shape), what="of its tiles", inferred=inferred)
    _match_dims(kernel, p, a.tile_shape, "the tile shape", inferred)


def _check_tensor(kernel: str, p: Param, a: Any, inferred: dict[str, tuple[Any, str]], unchecked: bool) -> None:
    if isinstance(a, Shared):
        a = a._check()
    if isinstance(a, Partition):
        raise ArgumentError(
            f"{_where(kernel, p)} is a read-only input but got a Partition: pass a Tensor (call .unpartition())"
        )
    if not isinstance(a, Tensor):
        raise ArgumentError(f"{_where(kernel, p)} needs a tile Tensor, got {type(a).__name__}: use tile.from_numpy")
    a._check(admit=True)  # the kernel call may take a tensor in flight (see _launch)
    _check_extents(kernel, p, a.shape)
    _check_dtype_rank(kernel, p, a.dtype, a.ndim, what=f"shape {list(a.shape)}", inferred=inferred)
    _match_dims(kernel, p, a.shape, "the extent", inferred)


def _check_scalar(kernel: str, p: Param, a: Any, inferred: dict[str, tuple[Any, str]], unchecked: bool) -> None:
    assert isinstance(p.dtype, DType), "scalar annotations are concrete dtypes"
    # A number class with a metaclass: its __hash__/__eq__ run whenever the launch tests the class. (issubclass reads
    # the class's MRO and runs none of its code; anything that is no number gets the plain refusal below.)
    if type(type(a)) is not type and issubclass(type(a), (int, float, np.generic)):
        raise ArgumentError(
            f"{_where(kernel, p)} is a {p.dtype.name} scalar, got {type(a).__name__}, whose class has the metaclass "
            f"{type(type(a)).__name__} (its code would run while the launch checks the handles): pass int(n), "
            "float(n) or bool(n)"
        )
    cls = type(a)  # not isinstance: ``__class__ = bool`` must not make an object a bool
    if type(cls) is not type:
        ok = False
    elif p.dtype.kind == "b":
        ok = issubclass(cls, (bool, np.bool_))
    else:
        ok = _is_number(a, int_only=p.dtype.kind in "iu")
    if not ok:
        raise ArgumentError(f"{_where(kernel, p)} is a {p.dtype.name} scalar, got {type(a).__name__} {a!r}")
    if p.dtype.kind in "iu":
        lo, hi = int_range(p.dtype)
        if not lo <= int(a) <= hi:
            raise ArgumentError(f"{_where(kernel, p)} = {a} does not fit in {p.dtype.name}")
    elif issubclass(cls, (int, np.integer)) and not -FLOAT_INT <= int(a) <= FLOAT_INT:
        raise ArgumentError(
            f"{_where(kernel, p)} is a {p.dtype.name} scalar, but the int {a} does not fit in any float: pass float(s) "
            "or a smaller number"
        )


FLOAT_INT = 2**1024 - 2**970 - 1
"""The largest int that converts to a float (it rounds to the largest f64): a float scalar takes ints up to it in
magnitude (larger ones convert to no float, so no launch could pack them); the launch plan (`_plan._passes`) uses
the same bound."""


def const_key(value: Any) -> tuple[Any, Any]:
    """A Const or generic value as the launch caches key it: its class, and a float by its bits (``float.hex``):
    ``-0.0 == 0.0`` would share the kernel compiled for the other zero, and a NaN equals no NaN (a plan per call)."""
    cls = type(value)
    return (cls, value.hex()) if cls is float else (cls, value)


def int_range(dtype: DType) -> tuple[int, int]:
    """The values an integer scalar of ``dtype`` holds, as its check (and the launch plan, `_plan._passes`) allow."""
    bits = dtype.bits
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dtype.kind == "i" else (0, 2**bits - 1)


_BUILTIN_NUMBERS = frozenset({int, float, bool})


def plain_number(a: Any) -> Any:
    """The builtin number a scalar argument of a subclass of int, float or a numpy scalar type holds, read without its
    methods (``int.__index__``, not its ``__int__``): a subclass could report one value to the range check and
    another to the packing (or the interpreter, which receives the object). Anything else is returned as it is (the
    check refuses it)."""
    cls = type(a)  # not isinstance: an object may claim any class through a __class__ attribute
    if type(cls) is not type:  # a metaclass's code would run where the class is tested: the check refuses it
        return a
    if issubclass(cls, bool | np.bool_):
        return a
    if issubclass(cls, int):
        return int.__index__(a)
    if issubclass(cls, float):
        return float.__float__(a)
    if issubclass(cls, np.generic) and cls not in _NUMPY_NUMBERS:
        return np.generic.item(a)
    return a


_NUMPY_NUMBERS = frozenset(np.dtype(c).type for c in "bBhHiIlLqQefdg?")


def _is_number(a: Any, int_only: bool) -> bool:
    cls = type(a)  # not isinstance: ``__class__ = int`` must not make an object a number
    if issubclass(cls, (bool, np.bool_)):
        return False
    kinds = (int, np.integer) if int_only else (int, float, np.integer, np.floating)
    return issubclass(cls, kinds)


def _check_const(kernel: str, p: Param, a: Any, inferred: dict[str, tuple[Any, str]], unchecked: bool) -> None:
    kind = p.const_kind
    ok = type(a) is kind or (kind is float and type(a) is int)
    if not ok:
        raise ArgumentError(f"{_where(kernel, p)} is Const[{getattr(kind, '__name__', kind)}], got {a!r}")


def _check_ptr(kernel: str, p: Param, a: Any, inferred: dict[str, tuple[Any, str]], unchecked: bool) -> None:
    if not unchecked:
        raise ArgumentError(
            f"{_where(kernel, p)} is a raw pointer, which only kernels marked @tile.entry(unchecked=True) may take"
        )
    if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
        raise ArgumentError(f"{_where(kernel, p)} is a raw pointer: pass an int address (tensor.data_ptr())")


CHECKS: Mapping[str, Callable[[str, Param, Any, dict[str, tuple[Any, str]], bool], None]] = {
    "mut": _check_mut,
    "tensor": _check_tensor,
    "scalar": _check_scalar,
    "const": _check_const,
    "ptr": _check_ptr,
}


def launch_grid(
    kernel: str, params: Sequence[Param], args: Sequence[Any], explicit: tuple[int, ...] | None
) -> tuple[int, int, int]:
    """The grid of a launch: checked against the outputs' partitions, ``params`` from `with_schemes`."""
    grid = _grid(kernel, params, args, explicit)
    assert grid is not None, "bind raises GridError when there is neither a Mut output nor an explicit grid"
    return grid  # type: ignore[no-any-return]  # a checked (x, y, z)


def _grid(kernel: str, params: Sequence[Param], args: Sequence[Any], explicit: tuple[int, ...] | None) -> Any:
    grids = [(p.name, a.grid) for p, a in zip(params, args, strict=False) if p.kind == "mut"]
    # Outputs stored with z.store(t) fix the grid (one tile per block); outputs walked with z.tiles() take any grid.
    exact = [(p.name, a.grid) for p, a in zip(params, args, strict=False) if p.kind == "mut" and not p.tiled]
    # Grids compare padded to (x, y, z): a [M, 1] output and an [M] output agree on the grid (M, 1, 1).
    if len({_pad(g) for _, g in (exact if explicit is not None else grids)}) > 1:
        listed = ", ".join(f"'{n}' {list(g)}" for n, g in grids)
        raise GridError(
            f"{kernel}(): the Mut outputs' partitions disagree about the launch grid ({listed}); partition them so "
            "every output has the same number of tiles per axis"
        )
    if explicit is not None:
        if exact and _pad(exact[0][1]) != _pad(explicit):
            raise GridError(
                f"{kernel}(): the explicit grid {list(explicit)} differs from the grid {list(exact[0][1])} of "
                f"output '{exact[0][0]}', whose blocks each store their own tile; drop .grid(...), repartition the "
                "output, or walk its tiles with `for idx in z.tiles()` to launch any grid"
            )
        return _checked(kernel, _pad(explicit))
    if grids:
        return _checked(kernel, _pad(grids[0][1]))
    return None


def _pad(grid: Sequence[int]) -> tuple[int, int, int]:
    x, y, z = (*grid, 1, 1)[:3]
    return (int(x), int(y), int(z))


def _checked(kernel: str, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    for n, cap in zip(grid, _MAX_GRID, strict=False):
        if n < 1 or n > cap:
            raise GridError(f"{kernel}(): grid {list(grid)} is out of range (each axis 1..{list(_MAX_GRID)})")
    return grid


def explicit_grid(grid: object) -> tuple[int, ...]:
    """Validate a user-given grid: 1 to 3 positive ints."""
    dims = grid if isinstance(grid, (tuple, list)) else (grid,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in dims):
        raise GridError(f"a grid is 1 to 3 positive ints, e.g. .grid((8, 1, 1)); got {grid!r}")
    return tuple(int(n) for n in dims)
