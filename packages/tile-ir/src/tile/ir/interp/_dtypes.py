"""Element types of Tile IR as numpy dtypes, and the rounding rules the interpreter applies.

Invariants: a tile of element type T is held as an ndarray of ``storage(T)``; integers are signless and stored
in the *signed* numpy type of their width (ops that read them as unsigned take an unsigned view); pointers are
int64 virtual byte addresses; tf32 values are float32 arrays whose mantissas carry 10 bits. Arithmetic on types
narrower than f32 is computed in float32 and rounded once to the result type: f32 has more than 2p+2 bits for
every such p, so the double rounding is innocuous for + - * / and sqrt.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from tile.ir._types import ElementType, Padding, PointerType, ScalarType

from ._errors import InterpError

__all__ = [
    "Array",
    "compute_dtype",
    "from_wide",
    "is_float",
    "padding_value",
    "poison_value",
    "round_tf32",
    "storage",
    "unsigned_view",
]

Array = npt.NDArray[Any]

_STORAGE: dict[str, npt.DTypeLike] = {
    "i1": np.bool_,
    "i4": ml_dtypes.int4,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "f32": np.float32,
    "tf32": np.float32,
    "f64": np.float64,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "f4E2M1FN": ml_dtypes.float4_e2m1fn,
}
_UNSIGNED: dict[str, npt.DTypeLike] = {
    "i1": np.bool_,
    "i4": ml_dtypes.uint4,
    "i8": np.uint8,
    "i16": np.uint16,
    "i32": np.uint32,
    "i64": np.uint64,
}
# Bit patterns that step a value by one unit in the last place, per storage width.
_BITS: dict[int, npt.DTypeLike] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def storage(t: ElementType) -> np.dtype[Any]:
    """Return the numpy dtype holding elements of `t` (int64 addresses for pointers)."""
    if isinstance(t, PointerType):
        return np.dtype(np.int64)
    found = _STORAGE.get(t.name)
    if found is None:
        raise InterpError(f"element type {t} has no numpy equivalent; the interpreter cannot run it")
    return np.dtype(found)


def is_float(t: ElementType) -> bool:
    """True for floating-point element types."""
    return isinstance(t, ScalarType) and t.is_float


def unsigned_view(x: Array, t: ScalarType) -> Array:
    """Reinterpret the signless integers `x` as unsigned integers of the same width."""
    return np.asarray(x).view(np.dtype(_UNSIGNED[t.name]))


def compute_dtype(t: ScalarType) -> np.dtype[Any]:
    """Return the dtype arithmetic on `t` runs in: float64 for f64, float32 for every narrower float."""
    return np.dtype(np.float64 if t.name == "f64" else np.float32)


def round_tf32(x: Array) -> Array:
    """Round float32 values to tf32 precision (10 mantissa bits), to nearest even; inf and NaN pass through."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bias = np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))
    rounded = ((bits + bias) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), rounded, x).astype(np.float32)


def _step(r: Array, toward_zero: Array, away: Array) -> Array:
    """Move each element of `r` one ulp toward zero or away from zero where the masks say so."""
    bits = r.view(np.dtype(_BITS[r.dtype.itemsize])).copy()
    one = bits.dtype.type(1)
    magnitude_nonzero = r != 0
    bits = np.where(toward_zero & magnitude_nonzero, bits - one, bits)
    bits = np.where(away & np.isfinite(r), bits + one, bits)
    return np.asarray(bits).view(r.dtype)


def from_wide(x: Array, t: ScalarType, rounding: str = "nearest_even") -> Array:
    """Round wide (float32/float64) values `x` to element type `t` with an IEEE rounding mode.

    ``approx`` and ``full`` round to nearest, which is within the tolerance both promise.
    """
    target = storage(t)
    r = np.asarray(x).astype(target)
    if t.name == "tf32":
        r = round_tf32(r)
    if rounding in ("nearest_even", "approx", "full", "nearest_int_to_zero") or t.name == "f64":
        return r
    back = r.astype(np.float64)
    wide = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(wide) & np.isfinite(back)
    if rounding == "zero":
        toward, away = finite & (np.abs(back) > np.abs(wide)), np.zeros_like(finite)
    elif rounding == "negative_inf":
        over = finite & (back > wide)
        toward, away = over & (back > 0), over & (back <= 0)
    elif rounding == "positive_inf":
        under = finite & (back < wide)
        toward, away = under & (back < 0), under & (back >= 0)
    else:
        raise InterpError(f"rounding mode {rounding!r} is not defined for a conversion to {t}")
    if t.name == "tf32":
        # A tf32 ulp is 2**13 float32 ulps: step in float32 bits by that amount.
        bits = r.view(np.uint32).astype(np.int64)
        unit = np.int64(1 << 13)
        bits = bits - np.where(toward, unit, 0) + np.where(away, unit, 0)
        return bits.astype(np.uint32).view(np.float32)
    return _step(r, toward, away)


def padding_value(padding: Padding | None, t: ElementType) -> Any:
    """Return the fill of out-of-bounds view elements (`None` padding: the poison value)."""
    if padding is None:
        return poison_value(t)
    if not is_float(t):
        if padding is Padding.ZERO:
            return 0
        raise InterpError(f"padding {padding} is not defined for integer element type {t}")
    return {
        Padding.ZERO: 0.0,
        Padding.NEG_ZERO: -0.0,
        Padding.NAN: float("nan"),
        Padding.POS_INF: float("inf"),
        Padding.NEG_INF: float("-inf"),
    }[padding]


def poison_value(t: ElementType) -> Any:
    """Return the value an unspecified element reads as: NaN for floats, the most negative integer otherwise.

    A conspicuous value makes a kernel that consumes undefined data fail its numerical checks on the CPU too.
    """
    if is_float(t):
        return float("nan")
    if isinstance(t, ScalarType) and t.name == "i1":
        return False
    info = np.iinfo(storage(t)) if not isinstance(t, PointerType) else np.iinfo(np.int64)
    return int(info.min)
