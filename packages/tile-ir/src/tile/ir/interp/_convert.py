"""Conversions between element types: ftof, ftoi, itof, exti, trunci, bitcast and the pointer casts.

Rounding follows the op's ``rounding_mode`` (see `_dtypes.from_wide`); ``ftoi`` truncates toward zero by default
and clamps (NaN to 0) when ``saturating``; without it an out-of-range value is undefined on the device and
wraps here. Sign- and zero-extension follow ``signedness``; an i1 reads as 0/-1 signed and 0/1 unsigned (exti,
itof), and an ftoi to i1 takes those values (saturating: clamps to [-1, 0] or [0, 1]) and keeps the low bit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType

from ._arith import element_of
from ._compile import Compiler, Env, Signal, Step, StepFactory, attr
from ._dtypes import Array, from_wide, storage, unsigned_view
from ._i1 import narrow, widen

__all__ = ["HANDLERS"]

_ROUND_TO_INT: dict[str, Callable[[Array], Array]] = {
    "nearest_int_to_zero": np.trunc,
    "zero": np.trunc,
    "nearest_even": np.rint,
    "negative_inf": np.floor,
    "positive_inf": np.ceil,
    "nearest_away": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
}


def _source(op: Operation) -> ScalarType:
    t = op.operands[0].type
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType):
        raise TypeError(f"'{op.name}' converts {t}, not a number tile")
    return t.element


def _step(op: Operation, c: Compiler, fn: Callable[[Array], Array]) -> Step:
    src, out = c.slot(op.operands[0]), c.slot(op.results[0])

    def step(env: Env) -> Signal | None:
        env[out] = fn(env[src])
        return None

    return step


def _ftof(op: Operation, c: Compiler) -> Step:
    src, dst = _source(op), element_of(op)
    rounding = attr(op, "rounding_mode", "nearest_even")
    wide = np.float64 if src.name == "f64" else np.float32
    return _step(op, c, lambda x: from_wide(np.asarray(x, dtype=wide), dst, rounding))


def _ftoi(op: Operation, c: Compiler) -> Step:
    dst = element_of(op)
    unsigned = attr(op, "signedness", "signed") == "unsigned"
    saturating = bool(attr(op, "saturating", False))
    round_fn = _ROUND_TO_INT[attr(op, "rounding_mode", "nearest_int_to_zero")]
    if dst.name == "i1":
        low, high = (0.0, 1.0) if unsigned else (-1.0, 0.0)

        def to_i1(x: Array) -> Array:
            r = round_fn(np.asarray(x, dtype=np.float64))
            if saturating:
                r = np.clip(np.nan_to_num(r, nan=0.0), low, high)
            with np.errstate(invalid="ignore"):  # NaN and the infinities: undefined unless saturating
                return narrow(np.asarray(r).astype(np.int64))

        return _step(op, c, to_i1)
    target = unsigned_view(np.zeros(0, storage(dst)), dst).dtype if unsigned else storage(dst)
    info = np.iinfo(target)

    def run(x: Array) -> Array:
        r = round_fn(np.asarray(x, dtype=np.float64))
        if saturating:
            r = np.clip(np.nan_to_num(r, nan=0.0), float(info.min), float(info.max))
        return np.asarray(r).astype(target).view(storage(dst))

    return _step(op, c, run)


def _itof(op: Operation, c: Compiler) -> Step:
    src, dst = _source(op), element_of(op)
    unsigned = attr(op, "signedness", "signed") == "unsigned"
    rounding = attr(op, "rounding_mode", "nearest_even")

    def integers(x: Array) -> Array:
        if src.name == "i1":
            return widen(x, not unsigned)
        return unsigned_view(x, src) if unsigned else np.asarray(x)

    def run(x: Array) -> Array:
        ints = integers(x)
        if rounding in ("nearest_even", "approx", "full"):
            return ints.astype(storage(dst)) if dst.name != "tf32" else from_wide(ints.astype(np.float32), dst)
        return from_wide(ints.astype(np.float64), dst, rounding)

    return _step(op, c, run)


def _exti(op: Operation, c: Compiler) -> Step:
    src, dst = _source(op), element_of(op)
    unsigned = attr(op, "signedness", "signed") == "unsigned"

    def run(x: Array) -> Array:
        if src.name == "i1":
            return widen(x, not unsigned).astype(storage(dst))
        if unsigned:
            u = unsigned_view(x, src)
            return u.astype(unsigned_view(np.zeros(0, storage(dst)), dst).dtype).view(storage(dst))
        return np.asarray(x).astype(storage(dst))

    return _step(op, c, run)


def _trunci(op: Operation, c: Compiler) -> Step:
    dst = element_of(op)
    if dst.name == "i1":
        return _step(op, c, narrow)
    return _step(op, c, lambda x: np.asarray(x).astype(storage(dst)))


def _bitcast(op: Operation, c: Compiler) -> Step:
    dtype = storage(element_of(op))
    return _step(op, c, lambda x: np.ascontiguousarray(x).view(dtype).reshape(np.shape(x)))


def _pointer_cast(op: Operation, c: Compiler) -> Step:
    return _step(op, c, lambda x: np.asarray(x).astype(np.int64))


HANDLERS: dict[str, StepFactory] = {
    "ftof": _ftof,
    "ftoi": _ftoi,
    "itof": _itof,
    "exti": _exti,
    "trunci": _trunci,
    "bitcast": _bitcast,
    "int_to_ptr": _pointer_cast,
    "ptr_to_int": _pointer_cast,
    "ptr_to_ptr": _pointer_cast,
}
