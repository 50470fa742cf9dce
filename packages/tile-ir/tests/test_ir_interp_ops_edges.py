"""Edge cases of the interpreter's elementwise, conversion and reduction ops, each against a reference written here.

Each check was written for survivors of the whole ``interp-ops`` mutation run (``scripts/mutation.py --target
interp-ops``); its docstring names the mutants it kills, as ``module:line: change`` (tried with ``--match``).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tile.ir import Builder, FloatAttr, IntegerAttr, RoundingMode, Value, f32

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_interp_ops import TYPES, Arr, binary, run_ops, unary

TINY = float(np.finfo(np.float32).tiny)  # the smallest normal f32, 2**-126


def test_fpowi_keeps_f32_subnormals() -> None:
    """fpowi has no flush_to_zero: a subnormal base, or a subnormal power of a normal base, is kept.

    Kills ``_arith.py:45: False -> True`` (``float_kernel``'s ``ftz`` default, which only fpowi relies on)."""
    x = np.array([1e-40, 2.0**-70, -(2.0**-74), 3.0], np.float32)
    n = np.array([1, 2, 2, 2], np.int32)
    got = run_ops(lambda b, t: b.fpowi(t[0], t[1]), [x, n], np.zeros(4, np.float32))
    expect = [float(np.float32(float(v) ** int(e))) for v, e in zip(x, n, strict=True)]  # all exact in float64
    assert expect[:3] == [float(np.float32(1e-40)), 2.0**-140, 2.0**-148]
    assert got.tolist() == expect


@pytest.mark.parametrize(("dtype", "step"), [(np.float32, 2.0**-15), (np.float16, 2.0**-6)])
def test_fma_result_is_a_value_of_its_type_for_the_next_op(dtype: Any, step: float) -> None:
    """fma(s, s, 1) - 1 is 0: the exact 1 + s*s lies below half an ulp of 1, so the fma rounds it to 1.

    The store alone would round a wider fma result correctly; the next op sees it unrounded (subf, or cmpf, which
    does not round its operands to their type first). Kills the fma of f32 or f16 handed back as numpy's float64
    rounded-to-odd value (``float_kernel``'s fast path taken for a fused type narrower than f64):
    ``_arith.py:53: In -> NotIn``, ``_arith.py:53: Eq -> NotEq``, ``_arith.py:53: not x -> x``,
    ``_arith.py:54: Eq -> NotEq``, ``_arith.py:54: And -> Or``."""
    s = np.full(4, step, dtype)
    one = np.ones(4, dtype)
    exact = float(step) * float(step) + 1.0  # exact in float64
    assert float(dtype(exact)) == 1.0
    got = run_ops(lambda b, t: b.subf(b.fma(t[0], t[0], t[1]), t[1]), [s, one], np.zeros(4, dtype))
    assert got.tolist() == [0.0] * 4

    def equal(b: Builder, t: list[Value]) -> Value:  # cmpf reads its operands as they are, unrounded
        fused = b.fma(t[0], t[0], t[1])
        return b.cmpf(fused, t[1], comparison_predicate="equal", comparison_ordering="ordered")

    assert run_ops(equal, [s, one], np.zeros(4, np.bool_)).tolist() == [True] * 4


def test_flush_to_zero_flushes_a_subnormal_result_of_normal_inputs() -> None:
    """1.5 tiny - tiny = tiny / 2 exactly: flushed to a zero of its sign with flush_to_zero, kept without it (also
    under a directed rounding, which takes the wide path).

    Kills ``_arith.py:64: Eq -> NotEq`` (f32 results never flushed) and ``_arith.py:64: And -> Or`` (every f32 result
    of the wide path flushed)."""
    a = np.array([1.5 * TINY, TINY, 3 * TINY], np.float32)
    b = np.array([TINY, 1.5 * TINY, 2.5 * TINY], np.float32)
    flushed = binary("subf", a, b, flush_to_zero=True)
    assert flushed.tolist() == [0.0, 0.0, 0.0]
    assert np.signbit(flushed).tolist() == [False, True, False]
    kept = binary("subf", a, b, rounding_mode=RoundingMode.ZERO)
    assert kept.tolist() == [TINY / 2, -TINY / 2, TINY / 2]


def _signed_zero_max(x: float, y: float) -> float:
    if x == 0 and y == 0:
        return -0.0 if np.signbit(x) and np.signbit(y) else 0.0
    return max(x, y)


def _signed_zero_min(x: float, y: float) -> float:
    if x == 0 and y == 0:
        return -0.0 if np.signbit(x) or np.signbit(y) else 0.0
    return min(x, y)


def test_maxf_minf_with_one_zero_operand_compare_the_values() -> None:
    """maxf(0, 5) is 5 and minf(0, -3) is -3, in either operand order; only two zeros use the sign rule.

    Kills ``_arith.py:76: BitAnd -> BitOr`` (the signed-zero rule applied when either operand is zero)."""
    a = np.array([0.0, 5.0, -0.0, -3.0, 0.0, -0.0, 2.0, 0.0], np.float32)
    b = np.array([5.0, 0.0, -3.0, -0.0, -0.0, 0.0, 0.0, -2.0], np.float32)
    pairs = list(zip(a.tolist(), b.tolist(), strict=True))
    got_max, got_min = binary("maxf", a, b), binary("minf", a, b)
    assert got_max.tolist() == [_signed_zero_max(x, y) for x, y in pairs]
    assert np.signbit(got_max).tolist() == [bool(np.signbit(_signed_zero_max(x, y))) for x, y in pairs]
    assert got_min.tolist() == [_signed_zero_min(x, y) for x, y in pairs]
    assert np.signbit(got_min).tolist() == [bool(np.signbit(_signed_zero_min(x, y))) for x, y in pairs]


def test_shifts_by_bits_minus_one_and_by_the_width() -> None:
    """An arithmetic right shift by bits - 1 leaves the sign (0 or -1); a left shift of i64 by 64 or more leaves 0.

    Kills ``_arith.py:195: 1 -> 2`` (the signed shift capped at bits - 2) and ``_arith.py:181: GtE -> Gt`` (a left
    shift by exactly the width of i64 taken as a shift by 63)."""
    x = np.array([64, -128, 127, -65, 64, -128, 1, -1], np.int8)
    n = np.array([7, 7, 7, 7, 6, 6, 7, 7], np.int8)
    assert binary("shri", x, n, signedness="signed").tolist() == [int(v) >> int(k) for v, k in zip(x, n, strict=True)]
    wide = np.array([1, 3, -1, 5], np.int64)
    amount = np.array([64, 64, 100, 63], np.int64)
    expect = [((int(v) << int(k)) % 2**64) for v, k in zip(wide, amount, strict=True)]
    assert binary("shli", wide, amount).view(np.uint64).tolist() == expect


def test_itof_signed_negative_and_correctly_rounded() -> None:
    """itof: a signed source keeps its sign; i64 -> f32 rounds once (2**60 + 2**36 + 1 is just above the midpoint of
    2**60 and 2**60 + 2**37; through float64 it would become the midpoint and round to even, down); i32 -> f64 is
    exact; a directed rounding rounds 2**24 + 1 up or down.

    Kills ``_convert.py:80: And -> Or`` (a signed source read unsigned), ``_convert.py:81: In -> NotIn`` (nearest
    through float64, directed modes ignored), ``_convert.py:82: NotEq -> Eq`` (every destination through float32)."""
    signed = np.array([-1, -128, 5, 127], np.int8)
    assert unary("itof", signed, np.float32, signedness="signed").tolist() == [-1.0, -128.0, 5.0, 127.0]
    big = np.array([2**60 + 2**36 + 1, -(2**60 + 2**36 + 1)], np.int64)
    assert unary("itof", big, np.float32, signedness="signed").tolist() == [2.0**60 + 2.0**37, -(2.0**60 + 2.0**37)]
    odd = np.array([2**24 + 1, -(2**24 + 1)], np.int32)
    assert unary("itof", odd, np.float64, signedness="signed").tolist() == [2.0**24 + 1, -(2.0**24 + 1)]
    up = unary("itof", odd, np.float32, signedness="signed", rounding_mode=RoundingMode.POSITIVE_INF)
    assert up.tolist() == [2.0**24 + 2, -(2.0**24)]


def _reduce(x: Arr, identity: Any, body: Any) -> Arr:
    """Reduce the 1-D `x` with ``body(builder, element, accumulator)`` (as a (1, n) tile along dim 1)."""
    elem = TYPES[x.dtype]
    ident = IntegerAttr(elem, identity) if x.dtype.kind == "i" else FloatAttr.of(elem, identity)

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [ident]) as red:
            e, acc = red.args
            b.yield_([body(b, e, acc)])
        return red.results[0]

    return run_ops(build, [x.reshape(1, -1)], np.zeros(1, x.dtype))


def test_reduce_with_a_three_op_body() -> None:
    """A body of two ops and the yield (e - (-acc)) sums. Kills ``_reduce.py:39: 2 -> 3`` (a three-op body taken
    for the fast path's one op and yield: an unpacking error)."""
    x = np.array([1.0, 2.0, 3.0, 4.0, -0.5, 8.0, 0.25, 16.0], np.float32)
    got = _reduce(x, 0.0, lambda b, e, acc: b.subf(e, b.negf(acc)))
    assert got.tolist() == [float(sum(x.tolist()))]


@pytest.mark.parametrize("propagate", [False, True])
def test_min_reduce_propagates_nan_when_told(propagate: bool) -> None:
    """minf with propagate_nan gives NaN for a row holding one, else the smallest number (like np.fmin).

    Kills ``_reduce.py:53: True -> False`` (the ``("minf", True)`` key lost: a KeyError)."""
    x = np.array([[1.0, np.nan, -3.0, 2.0], [4.0, 0.5, 9.0, -1.0]], np.float32)

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [FloatAttr.of(f32, float("inf"))]) as red:
            e, acc = red.args
            b.yield_([b.minf(e, acc, propagate_nan=propagate)])
        return red.results[0]

    got = run_ops(build, [x], np.zeros(2, np.float32))
    assert np.isnan(got[0]) == propagate
    assert got.tolist()[1] == -1.0
    if not propagate:
        assert got.tolist()[0] == -3.0


def test_reduce_body_rounding_and_flush_are_kept() -> None:
    """A two-element reduction runs its body once: addf rounding up gives 1 + 2**-23 for 1 + 2**-30, and addf with
    flush_to_zero gives 0 for two subnormals (numpy's sum would give 1 and tiny).

    Kills the fast path taken for such bodies: ``_reduce.py:54: Eq -> NotEq``, ``_reduce.py:54: not x -> x``,
    ``_reduce.py:54: And -> Or``, ``_reduce.py:55: not x -> x``."""
    x = np.array([1.0, 2.0**-30], np.float32)
    up = _reduce(x, 0.0, lambda b, e, acc: b.addf(e, acc, rounding_mode=RoundingMode.POSITIVE_INF))
    assert up.tolist() == [1.0 + 2.0**-23]
    sub = np.array([TINY / 2, TINY / 4], np.float32)
    flushed = _reduce(sub, 0.0, lambda b, e, acc: b.addf(e, acc, flush_to_zero=True))
    assert flushed.tolist() == [0.0]


def _sums_in_any_order(values: list[float], dtype: Any) -> set[float]:
    """Every result of adding `values` pairwise in any order and grouping, each addition rounded to `dtype`."""
    if len(values) == 1:
        return {values[0]}
    found: set[float] = set()
    rest = list(range(1, len(values)))
    for size in range(len(values)):  # the group holding values[0] takes `size` of the others
        for others in itertools.combinations(rest, size):
            group = {0, *others}
            if len(group) == len(values):
                continue
            left = _sums_in_any_order([values[i] for i in sorted(group)], dtype)
            right = _sums_in_any_order([v for i, v in enumerate(values) if i not in group], dtype)
            found |= {float(dtype(np.float64(a) + np.float64(b))) for a in left for b in right}
    return found


def test_f16_sum_rounds_at_every_step() -> None:
    """Each f16 addf of a reduction body rounds to f16: for these four values every order and grouping of the adds
    gives 1184, while the exact sum 1183 (what numpy's f16 reduce gives, accumulating in float32) is an f16 too.

    Kills ``_reduce.py:39: NotIn -> In`` (f16 reductions sent to numpy's reduce)."""
    values = [318.5, 213.5, 105.875, 545.5]
    assert _sums_in_any_order(values, np.float16) == {1184.0}
    assert float(np.float16(sum(values))) == 1183.0
    got = _reduce(np.array(values, np.float16), 0.0, lambda b, e, acc: b.addf(e, acc))
    assert got.tolist() == [1184.0]


def test_unsigned_max_reduce() -> None:
    """maxi unsigned over i8 [-1, 1, 2, 3] is 255 (stored as -1). Kills ``_reduce.py:55: NotEq -> Eq`` and
    ``_reduce.py:55: Or -> And`` (an unsigned body taken for numpy's signed maximum)."""
    x = np.array([1, -1, 2, 3], np.int8)
    got = _reduce(x, 0, lambda b, e, acc: b.maxi(e, acc, signedness="unsigned"))
    assert got.view(np.uint8).tolist() == [max(int(v) & 0xFF for v in x)]


def test_generic_scan_along_the_first_of_two_dims() -> None:
    """A scan whose body has no numpy ufunc (e - (-acc)) along dim 0 of a (4, 2) tile is the column-wise prefix sum.

    Kills ``_reduce.py:119: 1 -> 2`` (the identity fill shaped with the dims after ``dim + 1``, wrong unless ``dim``
    is the last)."""
    x = np.arange(1, 9, dtype=np.float32).reshape(4, 2)

    def build(b: Builder, t: list[Value]) -> Value:
        with b.scan([t[0]], 0, [FloatAttr.of(f32, 0.0)]) as sc:
            e, acc = sc.args
            b.yield_([b.subf(e, b.negf(acc))])
        return sc.results[0]

    expect = [[sum(x[: i + 1, j].tolist()) for j in range(2)] for i in range(4)]
    assert run_ops(build, [x], np.zeros((4, 2), np.float32)).tolist() == expect


def test_mmaf_f64_multiplies_in_float64() -> None:
    """(1 + 2**-40) * 1 + 2**-45 in f64 keeps every bit (float32 would give 1).

    Kills ``_reduce.py:165: Eq -> NotEq`` (f64 multiplied in float32)."""
    a = np.array([[1 + 2.0**-40, 0.0], [0.0, 3.0]], np.float64)
    eye = np.eye(2, dtype=np.float64)
    acc = np.full((2, 2), 2.0**-45, np.float64)
    got = run_ops(lambda b, t: b.mmaf(t[0], t[1], t[2]), [a, eye, acc], np.zeros((2, 2), np.float64))
    assert got.tolist() == [[1 + 2.0**-40 + 2.0**-45, 2.0**-45], [2.0**-45, 3.0 + 2.0**-45]]
