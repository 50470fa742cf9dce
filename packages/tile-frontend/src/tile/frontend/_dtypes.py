"""Element types on the host: the kernel language's `DType` values mapped to numpy dtypes (ml_dtypes for bf16/f8).

Invariants: `numpy_dtype` and `dtype_of` are inverse on every storable dtype (tf32 is stored as f32 and reads back
as f32); anything a user may pass as a dtype (a `DType`, its name, a numpy dtype or scalar type) resolves through
`as_dtype`, and an unknown one raises `ArgumentError` listing the names that work.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tile.compiler._types import DTYPES
from tile.compiler.lang import DType
from tile.compiler.lang._annotations import TensorAnnotation
from tile.frontend._errors import ArgumentError

__all__ = ["as_dtype", "dtype_of", "is_dtype_like", "numpy_dtype"]

_EXTRA = {
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
_NUMPY: dict[str, np.dtype[Any]] = {name: np.dtype(_EXTRA.get(dt.numpy, dt.numpy)) for name, dt in DTYPES.items()}
_BY_NUMPY: dict[np.dtype[Any], DType] = {_NUMPY[n]: DTYPES[n] for n in DTYPES if n != "tf32"}
_ALIASES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "i1", "float": "f32"}
_ALIASES |= {f"int{n}": f"i{n}" for n in (8, 16, 32, 64)} | {f"uint{n}": f"u{n}" for n in (8, 16, 32, 64)}
_ALIASES |= {"int": "i64", "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "bool_": "i1"}


def numpy_dtype(dt: DType) -> np.dtype[Any]:
    """The numpy dtype that stores elements of ``dt`` on the host."""
    return _NUMPY[dt.name]


def dtype_of(np_dtype: np.dtype[Any]) -> DType:
    """The `DType` of a numpy dtype; `ArgumentError` when Tile has no such element type."""
    found = _BY_NUMPY.get(np.dtype(np_dtype))
    if found is None:
        raise ArgumentError(f"numpy dtype {np_dtype} has no Tile element type; convert with .astype(np.float32) first")
    return found


def is_dtype_like(obj: object) -> bool:
    """True for values `as_dtype` accepts (used to tell ``zeros(f32, shape)`` from ``zeros(shape, f32)``)."""
    if isinstance(obj, (DType, np.dtype)) or (isinstance(obj, type) and issubclass(obj, np.generic)):
        return True
    return isinstance(obj, str) and (obj in DTYPES or obj in _ALIASES)


def as_dtype(obj: object) -> DType:
    """Resolve ``obj`` (a `DType`, a name like ``"f16"``/``"float16"``, or a numpy dtype) to a `DType`."""
    if isinstance(obj, DType):
        # Tile's own instance only: `DType` is a public dataclass, and one made with other fields (an "f32" of 8
        # bits, a subclass) would size and address the memory one way while kernels compiled for its name read it
        # another (views Tile thinks disjoint overlap; two outputs write one element).
        found = DTYPES.get(obj.name) if type(obj.name) is str else None
        if found is not None and found == obj:
            return found
        raise ArgumentError(
            f"DType(name={obj.name!r}, bits={obj.bits!r}, ...) is not one of Tile's dtypes (a DType made elsewhere, "
            f"whose fields or class differ from Tile's own); use tile.{', tile.'.join(DTYPES)}"
        )
    if isinstance(obj, TensorAnnotation):
        return as_dtype(obj.dtype)
    if isinstance(obj, str):
        name = obj if obj in DTYPES else _ALIASES.get(obj)
        if name is not None:
            return DTYPES[name]
    else:
        try:
            return dtype_of(np.dtype(obj))  # type: ignore[call-overload]  # any dtype-like; TypeError handled below
        except TypeError:
            pass
    raise ArgumentError(f"{obj!r} is not a dtype; use one of tile.{', tile.'.join(DTYPES)} (or a numpy dtype)")
