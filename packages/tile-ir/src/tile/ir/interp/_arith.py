"""Elementwise arithmetic, math functions, comparisons and select.

Floats: f32 and f64 compute natively in numpy; narrower floats compute in float32 and round once to their
type; a directed rounding mode computes in float64 and steps the nearest result by one ulp where it lies on
the wrong side (exact for every type narrower than f64; f64 itself always rounds to nearest). ``flush_to_zero``
flushes f32 subnormal inputs and results to signed zero. Integers wrap (two's complement) and are signless:
ops with a signedness attribute read their operands through an unsigned view when it says so. i1 is a 1-bit
integer (0/1 unsigned, 0/-1 signed) computed by `_i1` (numpy's bool arithmetic is logic, not arithmetic mod 2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType

from ._compile import Compiler, Env, Signal, Step, StepFactory, attr
from ._dtypes import Array, compute_dtype, from_wide, storage, unsigned_view
from ._fused import fma_f64, fma_odd
from ._i1 import binary as i1_binary
from ._i1 import widen as i1_widen

__all__ = ["HANDLERS", "element_of"]

Kernel = Callable[..., Array]

_F32_TINY = np.float32(np.finfo(np.float32).tiny)
_NEAREST = ("nearest_even", "approx", "full")


def element_of(op: Operation, result: int = 0) -> ScalarType:
    """The scalar element type of result `result` of `op`."""
    t = op.results[result].type
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType):
        raise TypeError(f"'{op.name}' result {result} is {t}, not a number tile")
    return t.element


def _flush(x: Array) -> Array:
    return np.where(np.abs(x) < _F32_TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def float_kernel(
    fn: Kernel, t: ScalarType, rounding: str = "nearest_even", ftz: bool = False, *, fused: bool = False
) -> Kernel:
    """Wrap the numpy function `fn` so it computes with Tile IR's rounding for element type `t`.

    `fused` marks an op rounded once although numpy would round twice (fma): for types narrower than f64
    `fn` is `_fused.fma_odd`, which takes float64 operands and returns the sum rounded to odd, so the one rounding to
    `t` afterwards is correct; f64 uses `_fused.fma_f64` natively.
    """
    native = t.name in ("f32", "f64") and rounding in _NEAREST and not (fused and t.name == "f32")
    native = native or (fused and t.name == "f64")  # f64 rounds to nearest whatever the mode (module docstring)
    wide = np.dtype(np.float64) if rounding not in _NEAREST or fused else compute_dtype(t)

    def run(*xs: Array) -> Array:
        if native and not ftz:
            return np.asarray(fn(*xs))
        args = [np.asarray(x, dtype=wide) for x in xs]
        if ftz:
            args = [_flush(a).astype(wide) for a in args]
        out = from_wide(fn(*args), t, rounding)
        return _flush(out) if ftz and t.name == "f32" else out

    return run


def _rsqrt(x: Array) -> Array:
    return np.asarray(1 / np.sqrt(x))


def _maxf(propagate: bool) -> Kernel:
    def run(a: Array, b: Array) -> Array:
        res = np.maximum(a, b) if propagate else np.fmax(a, b)
        both_zero = (a == 0) & (b == 0)
        return np.asarray(np.where(both_zero, np.where(np.signbit(a), b, a), res))

    return run


def _minf(propagate: bool) -> Kernel:
    def run(a: Array, b: Array) -> Array:
        res = np.minimum(a, b) if propagate else np.fmin(a, b)
        both_zero = (a == 0) & (b == 0)
        return np.asarray(np.where(both_zero, np.where(np.signbit(a), a, b), res))

    return run


_FLOAT_FNS: dict[str, Kernel] = {
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide, "remf": np.fmod,
    "negf": np.negative, "absf": np.abs, "ceil": np.ceil, "floor": np.floor,
    "cos": np.cos, "cosh": np.cosh, "sin": np.sin, "sinh": np.sinh, "tan": np.tan, "tanh": np.tanh,
    "log": np.log, "log2": np.log2, "exp": np.exp, "exp2": np.exp2, "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "pow": np.power, "atan2": np.arctan2,
}  # fmt: skip


def _float_op(op: Operation, c: Compiler) -> Step:
    t = element_of(op)
    if op.name in ("maxf", "minf"):
        fn = (_maxf if op.name == "maxf" else _minf)(bool(attr(op, "propagate_nan", False)))
    elif op.name == "fma":
        fn = fma_f64 if t.name == "f64" else fma_odd
    else:
        fn = _FLOAT_FNS[op.name]
    rounding, ftz = attr(op, "rounding_mode", "nearest_even"), bool(attr(op, "flush_to_zero", False))
    return _nary(op, c, float_kernel(fn, t, rounding, ftz, fused=op.name == "fma"))


def _fpowi(op: Operation, c: Compiler) -> Step:
    t = element_of(op)
    return _nary(op, c, float_kernel(lambda x, n: np.power(x, n.astype(x.dtype)), t))


def _nary(op: Operation, c: Compiler, kernel: Kernel) -> Step:
    """A step applying `kernel` to all operands and storing the single result."""
    ins = c.slots(op.operands)
    out = c.slot(op.results[0])
    if len(ins) == 1:
        (a,) = ins

        def unary(env: Env) -> Signal | None:
            env[out] = kernel(env[a])
            return None

        return unary
    if len(ins) == 2:
        a, b = ins

        def binary(env: Env) -> Signal | None:
            env[out] = kernel(env[a], env[b])
            return None

        return binary

    def nary(env: Env) -> Signal | None:
        env[out] = kernel(*[env[i] for i in ins])
        return None

    return nary


# ---- integers -------------------------------------------------------------------------------------------


def _wrap(t: ScalarType, fn: Callable[[Array, Array], Array], unsigned: bool = False) -> Kernel:
    dtype = storage(t)

    def run(a: Array, b: Array) -> Array:
        if unsigned:
            a, b = unsigned_view(a, t), unsigned_view(b, t)
        return np.asarray(fn(a, b)).astype(dtype, copy=False)

    return run


def _divide(rounding: str) -> Callable[[Array, Array], Array]:
    def run(a: Array, b: Array) -> Array:
        safe = np.where(b == 0, 1, b)
        floor = np.floor_divide(a, safe)
        inexact = np.remainder(a, safe) != 0
        if rounding == "negative_inf":
            return floor
        if rounding == "positive_inf":
            return np.asarray(floor + inexact)
        return np.asarray(floor + (inexact & ((a < 0) != (safe < 0))))

    return run


def _shift_amount(t: ScalarType, b: Array) -> Array:
    return np.asarray(np.minimum(unsigned_view(b, t).astype(np.uint64), np.uint64(t.bits)))


def _shli(t: ScalarType) -> Kernel:
    def run(a: Array, b: Array) -> Array:
        wide = unsigned_view(a, t).astype(np.uint64)
        n = _shift_amount(t, b)
        shifted = np.where(n >= t.bits, np.uint64(0), wide << np.minimum(n, np.uint64(63)))
        return np.asarray(shifted).astype(unsigned_view(np.zeros(0, storage(t)), t).dtype).view(storage(t))

    return run


def _shri(t: ScalarType, unsigned: bool) -> Kernel:
    def run(a: Array, b: Array) -> Array:
        n = _shift_amount(t, b).astype(np.int64)
        if unsigned:
            u = unsigned_view(a, t)
            out = np.where(n >= t.bits, 0, u >> np.minimum(n, t.bits - 1).astype(u.dtype))
            return np.asarray(out).astype(u.dtype).view(storage(t))
        s = np.asarray(a)
        return np.asarray(s >> np.minimum(n, t.bits - 1).astype(s.dtype)).astype(storage(t))

    return run


def _mulhii(t: ScalarType) -> Kernel:
    def run(a: Array, b: Array) -> Array:
        ua, ub = unsigned_view(a, t), unsigned_view(b, t)
        if t.bits < 64:
            prod = ua.astype(np.uint64) * ub.astype(np.uint64)
            return np.asarray(prod >> np.uint64(t.bits)).astype(ua.dtype).view(storage(t))
        hi = [(int(x) * int(y)) >> 64 for x, y in zip(np.ravel(ua), np.ravel(ub), strict=False)]
        return np.asarray(hi, dtype=np.uint64).reshape(np.shape(ua)).view(np.int64)

    return run


_SIMPLE: dict[str, Callable[[Array, Array], Array]] = {
    "addi": np.add, "subi": np.subtract, "muli": np.multiply, "andi": np.bitwise_and,
    "ori": np.bitwise_or, "xori": np.bitwise_xor, "maxi": np.maximum, "mini": np.minimum,
    "remi": lambda a, b: np.fmod(a, np.where(b == 0, 1, b)),
}  # fmt: skip
# i1: the functions beyond `_SIMPLE` on exact small integers (shift amounts are 0 or 1, the product at most 1)
_I1_MORE: dict[str, Callable[[Array, Array], Array]] = {
    "shli": np.left_shift, "shri": np.right_shift, "mulhii": lambda a, b: np.right_shift(a * b, 1),
}  # fmt: skip
_SIGNED_LHS, _SIGNED_RHS = ("maxi", "mini", "divi", "remi", "shri"), ("maxi", "mini", "divi", "remi")


def _i1_op(name: str, signed: bool, rounding: str) -> Kernel:
    fn = _divide(rounding) if name == "divi" else _SIMPLE.get(name) or _I1_MORE[name]
    return i1_binary(fn, signed and name in _SIGNED_LHS, signed and name in _SIGNED_RHS)


def _int_op(op: Operation, c: Compiler) -> Step:
    t = element_of(op)
    unsigned = attr(op, "signedness", "signed") == "unsigned"
    name = op.name
    if t.name == "i1":
        kernel = _i1_op(name, not unsigned, attr(op, "rounding", "zero"))
    elif name in _SIMPLE:
        kernel = _wrap(t, _SIMPLE[name], unsigned)
    elif name == "divi":
        kernel = _wrap(t, _divide(attr(op, "rounding", "zero")), unsigned)
    elif name == "shli":
        kernel = _shli(t)
    elif name == "shri":
        kernel = _shri(t, unsigned)
    else:
        kernel = _mulhii(t)
    return _nary(op, c, kernel)


def _int_unary(op: Operation, c: Compiler) -> Step:
    dtype = storage(element_of(op))
    fn = np.negative if op.name == "negi" else np.abs
    if element_of(op).name == "i1":  # -x and |x| keep the low bit of x: the identity (numpy has no bool negative)
        return _nary(op, c, np.asarray)
    return _nary(op, c, lambda a: np.asarray(fn(a)).astype(dtype, copy=False))


# ---- comparisons and select -----------------------------------------------------------------------------

_PREDICATES: dict[str, Callable[[Any, Any], Array]] = {
    "equal": np.equal, "not_equal": np.not_equal, "less_than": np.less,
    "less_than_or_equal": np.less_equal, "greater_than": np.greater, "greater_than_or_equal": np.greater_equal,
}  # fmt: skip


def _cmpf(op: Operation, c: Compiler) -> Step:
    pred = _PREDICATES[attr(op, "comparison_predicate")]
    ordered = attr(op, "comparison_ordering", "ordered") == "ordered"

    def run(a: Array, b: Array) -> Array:
        nan = np.isnan(np.asarray(a, dtype=np.float64)) | np.isnan(np.asarray(b, dtype=np.float64))
        res = pred(a, b)
        if pred is np.not_equal:
            res = res & ~nan
        return np.asarray(res & ~nan if ordered else res | nan)

    return _nary(op, c, run)


def _cmpi(op: Operation, c: Compiler) -> Step:
    pred = _PREDICATES[attr(op, "comparison_predicate")]
    lhs = op.operands[0].type
    unsigned = attr(op, "signedness", "signed") == "unsigned"
    elem = lhs.element if isinstance(lhs, TileType) else None
    if isinstance(elem, ScalarType) and elem.name == "i1":
        signed = not unsigned
        return _nary(op, c, lambda a, b: np.asarray(pred(i1_widen(a, signed), i1_widen(b, signed))))
    if unsigned and isinstance(elem, ScalarType):
        t = elem
        return _nary(op, c, lambda a, b: np.asarray(pred(unsigned_view(a, t), unsigned_view(b, t))))
    return _nary(op, c, lambda a, b: np.asarray(pred(a, b)))


def _select(op: Operation, c: Compiler) -> Step:
    return _nary(op, c, lambda cond, x, y: np.asarray(np.where(cond, x, y)))


HANDLERS: dict[str, StepFactory] = {
    **dict.fromkeys((*_FLOAT_FNS, "fma", "maxf", "minf"), _float_op),
    "fpowi": _fpowi,
    **dict.fromkeys(
        ("addi", "subi", "muli", "andi", "ori", "xori", "maxi", "mini", "remi", "divi", "shli", "shri", "mulhii"),
        _int_op,
    ),
    "negi": _int_unary,
    "absi": _int_unary,
    "cmpf": _cmpf,
    "cmpi": _cmpi,
    "select": _select,
}
