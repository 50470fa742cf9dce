"""Op semantics of the interpreter, one family at a time, against numpy references.

Each test builds a one-block kernel that loads whole input arrays as tiles, applies the ops under test and
stores the result, so the same path (views, loads, stores) a compiled kernel takes is exercised too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from tile.ir import Builder, FloatAttr, IntegerAttr, RoundingMode, Value, f32, i32, tile

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_interp_ops import I32, TYPES, Arr, binary, run_ops, unary

F = np.array([1.5, -2.25, 0.0, -0.0, 3.0, 1e-3, 7.5, -100.0], np.float32)
G = np.array([0.5, 4.0, -0.0, 0.0, -3.0, 2.0, np.nan, 8.0], np.float32)


@pytest.mark.parametrize(("name", "ref"), [
    ("addf", np.add), ("subf", np.subtract), ("mulf", np.multiply), ("divf", np.divide),
    ("remf", np.fmod), ("pow", np.power), ("atan2", np.arctan2),
])  # fmt: skip
def test_float_binary_ops_match_numpy_f32(name: str, ref: Any) -> None:
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(binary(name, F, G), ref(F, G))


def test_maxf_minf_nan_and_signed_zero_rules() -> None:
    np.testing.assert_array_equal(binary("maxf", F, G)[[2, 3, 6]], [0.0, 0.0, 7.5])
    assert not np.signbit(binary("maxf", F, G)[[2, 3]]).any(), "+0 is greater than -0"
    assert np.signbit(binary("minf", F, G)[[2, 3]]).all()
    assert np.isnan(binary("maxf", F, G, propagate_nan=True)[6])


@pytest.mark.parametrize(
    "name", ["exp", "exp2", "log", "log2", "sin", "cos", "tanh", "sqrt", "rsqrt", "floor", "ceil", "absf", "negf"]
)
def test_float_unary_ops_match_numpy(name: str) -> None:
    x = np.linspace(0.1, 4.0, 16, dtype=np.float32)
    special: dict[str, Callable[[Arr], Arr]] = {"rsqrt": lambda v: 1 / np.sqrt(v), "absf": np.abs, "negf": np.negative}
    ref = special[name] if name in special else getattr(np, name)
    np.testing.assert_allclose(unary(name, x), ref(x), rtol=2e-7)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_arithmetic_rounds_once_to_its_type(dtype: Any) -> None:
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(64).astype(dtype), rng.standard_normal(64).astype(dtype)
    expect = (a.astype(np.float64) * b.astype(np.float64)).astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(binary("mulf", a, b), expect)


_UP = float(np.nextafter(np.float32(1), np.float32(2)))


@pytest.mark.parametrize(("mode", "above", "below"), [
    ("nearest_even", 1.0, -1.0), ("zero", 1.0, -1.0), ("negative_inf", 1.0, -_UP), ("positive_inf", _UP, -1.0),
])  # fmt: skip
def test_directed_rounding_of_addf(mode: str, above: float, below: float) -> None:
    """1 + 2**-30 is not representable in f32: each mode picks its neighbour (and mirrors for negatives)."""
    one, tiny = np.full(2, 1.0, np.float32), np.full(2, 2.0**-30, np.float32)
    assert binary("addf", one, tiny, rounding_mode=mode).tolist() == [above, above]
    assert binary("addf", -one, -tiny, rounding_mode=mode).tolist() == [below, below]


def test_flush_to_zero_flushes_f32_subnormals() -> None:
    tiny = np.full(2, 1e-40, np.float32)
    assert binary("addf", tiny, np.zeros(2, np.float32)).tolist() == tiny.tolist()
    assert binary("addf", tiny, np.zeros(2, np.float32), flush_to_zero=True).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(("ordering", "expect"), [("ordered", [False, True, False]), ("unordered", [True, True, True])])
def test_cmpf_ordering_decides_nan(ordering: str, expect: list[bool]) -> None:
    a = np.array([np.nan, 1.0, np.nan, 2.0], np.float32)
    b = np.array([1.0, 2.0, np.nan, 1.0], np.float32)
    res = binary("cmpf", a, b, np.bool_, comparison_predicate="less_than", comparison_ordering=ordering)
    assert res[:3].tolist() == expect
    assert not res[3]


A = np.array([7, -7, 7, -7, 0, -128, 5, -1], np.int8)
B = np.array([2, 2, -2, -2, 3, -1, 5, 3], np.int8)


@pytest.mark.parametrize(("rounding", "expect"), [
    ("zero", [3, -3, -3, 3, 0, -128, 1, 0]),
    ("negative_inf", [3, -4, -4, 3, 0, -128, 1, -1]),
    ("positive_inf", [4, -3, -3, 4, 0, -128, 1, 0]),
])  # fmt: skip
def test_divi_signed_rounding_modes(rounding: str, expect: list[int]) -> None:
    assert binary("divi", A, B, signedness="signed", rounding=rounding).tolist() == expect


def test_integer_ops_are_signless_and_wrap() -> None:
    assert (
        binary("divi", A, B, signedness="unsigned").tolist()
        == (A.view(np.uint8) // B.view(np.uint8)).astype(np.int8).tolist()
    )
    assert binary("remi", A, B, signedness="signed").tolist() == [1, -1, 1, -1, 0, 0, 0, -1]
    assert binary("addi", A, B).tolist() == (A + B).tolist()
    assert (
        binary("maxi", A, B, signedness="unsigned").tolist()
        == np.maximum(A.view(np.uint8), B.view(np.uint8)).view(np.int8).tolist()
    )
    assert (
        binary("cmpi", A, B, np.bool_, comparison_predicate="less_than", signedness="unsigned").tolist()
        == (A.view(np.uint8) < B.view(np.uint8)).tolist()
    )
    shift = np.array([1, 1, 7, 0, 9, 3, 2, 1], np.int8)
    assert binary("shri", A, shift, signedness="signed").tolist() == [3, -4, 0, -7, 0, -16, 1, -1]
    assert binary("shri", A, shift, signedness="unsigned").tolist() == [3, 124, 0, -7, 0, 16, 1, 127]
    assert binary("shli", A, shift).tolist() == [14, -14, -128, -7, 0, 0, 20, -2]


def test_mulhii_is_the_high_half_of_the_unsigned_product() -> None:
    a = np.array([2**31 - 2**32, 3, -1, 65536], np.int32)
    b = np.array([2, 5, -1, 65536], np.int32)
    assert binary("mulhii", a, b).tolist() == [1, 0, -2, 1]
    a64, b64 = np.array([-1, 2**62], np.int64), np.array([-1, 8], np.int64)
    assert binary("mulhii", a64, b64).tolist() == [-2, 2]


def test_conversions_round_extend_and_truncate() -> None:
    x = np.array([1.7, -1.7, 2.5, -3.5, 1e10, -1e10, np.nan, 0.2], np.float32)
    assert unary("ftoi", x[:6], np.int32, signedness="signed").tolist()[:4] == [1, -1, 2, -3]
    sat = unary("ftoi", x, np.int32, signedness="signed", saturating=True).tolist()
    assert sat[4:7] == [2**31 - 1, -(2**31), 0]
    assert unary("ftof", x, np.float16).tolist()[:4] == x[:4].astype(np.float16).tolist()
    to_bf16_zero = unary(
        "ftof", np.array([1.0 + 2**-9, -(1.0 + 2**-9)], np.float32), ml_dtypes.bfloat16, rounding_mode="zero"
    )
    assert to_bf16_zero.astype(np.float32).tolist() == [1.0, -1.0]
    assert unary("itof", np.array([-1, 3], np.int32), np.float32, signedness="unsigned").tolist() == [2.0**32, 3.0]
    assert unary("exti", A, np.int32, signedness="signed").tolist() == A.tolist()
    assert unary("exti", A, np.int32, signedness="unsigned").tolist() == A.view(np.uint8).tolist()
    assert unary("trunci", np.array([300, -129], np.int32), np.int8).tolist() == [44, 127]
    assert unary("bitcast", np.array([1.0], np.float32), np.int32).tolist() == [0x3F800000]


def test_shape_ops() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    out = np.zeros((4, 2), np.float32)
    np.testing.assert_array_equal(
        run_ops(lambda b, t: b.permute(t[0], permutation=[1, 0], result_type=tile((4, 2), f32)), [x], out), x.T
    )
    out = np.zeros((8,), np.float32)
    np.testing.assert_array_equal(
        run_ops(lambda b, t: b.reshape(t[0], result_type=tile((8,), f32)), [x], out), x.ravel()
    )
    out = np.zeros((4, 4), np.float32)
    np.testing.assert_array_equal(
        run_ops(lambda b, t: b.cat(t[0], t[0], dim=0, result_type=tile((4, 4), f32)), [x], out), np.concatenate([x, x])
    )

    def extract(b: Builder, t: list[Value]) -> Value:
        return b.call("extract", t[0], [b.constant(1, I32), b.constant(1, I32)], result_type=tile((1, 2), f32)).results[
            0
        ]

    np.testing.assert_array_equal(run_ops(extract, [x], np.zeros((1, 2), np.float32)), x[1:2, 2:4])
    iota = run_ops(
        lambda b, t: b.addi(t[0], b.iota(result_type=tile((8,), i32))),
        [np.full(8, 10, np.int32)],
        np.zeros(8, np.int32),
    )
    assert iota.tolist() == list(range(10, 18))


def _sum_body(b: Builder, red: Any, op: str = "addf") -> None:
    elem, acc = red.args
    b.yield_([getattr(b, op)(elem, acc)])


@pytest.mark.parametrize(("dtype", "dim"), [(np.float32, 0), (np.float32, 1), (np.float16, 1)])
def test_reduce_sum_fast_and_generic_paths(dtype: Any, dim: int) -> None:
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(dtype)
    shape = (8,) if dim == 0 else (4,)
    elem = TYPES[np.dtype(dtype)]

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], dim, [FloatAttr.of(elem, 0.0)]) as red:
            _sum_body(b, red)
        return red.results[0]

    got = run_ops(build, [x], np.zeros(shape, dtype))
    np.testing.assert_allclose(got.astype(np.float64), x.astype(np.float64).sum(axis=dim), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("propagate", [None, False, True])
def test_max_reduce_skips_nan_unless_told_to_propagate_it(propagate: bool | None) -> None:
    """``maxf`` without ``propagate_nan`` (absent means false) returns the largest number, like ``np.fmax``; with it,
    NaN. (The mutant making ``_ufunc_of``'s fallback for an absent flag true is equivalent: the op catalog's default
    is read first.)"""
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, 0.5, -1.0]], np.float32)
    flag = {} if propagate is None else {"propagate_nan": propagate}

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [FloatAttr.of(f32, float("-inf"))]) as red:
            elem, acc = red.args
            b.yield_([b.maxf(elem, acc, **flag)])
        return red.results[0]

    got = run_ops(build, [x], np.zeros(2, np.float32))
    if propagate:
        assert np.isnan(got).all()
    else:
        assert got.tolist() == [3.0, 0.5]


def test_a_generic_reduce_over_a_dim_of_one_returns_the_values() -> None:
    """A body numpy has no ufunc for (round toward zero) takes the generic pairwise path; a dim of length 1 has
    nothing to combine. Mutant killed (scripts/mutation.py): ``size == 0`` into ``size == 1`` in ``_tree`` (the
    identity returned instead of the values)."""
    x = np.array([[1.5], [-2.25], [7.0], [0.125]], np.float32)

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [FloatAttr.of(f32, 0.0)]) as red:
            elem, acc = red.args
            b.yield_([b.addf(elem, acc, rounding_mode=RoundingMode.ZERO)])
        return red.results[0]

    assert run_ops(build, [x], np.zeros(4, np.float32)).tolist() == [1.5, -2.25, 7.0, 0.125]


def test_two_operand_reduce_computes_argmax() -> None:
    x = np.array([3.0, 9.0, -1.0, 9.0, 4.0, 0.0, 2.0, 8.0], np.float32)

    def build(b: Builder, t: list[Value]) -> Value:
        idx = b.iota(result_type=tile((8,), i32))
        with b.reduce([t[0], idx], 0, [FloatAttr.of(f32, float("-inf")), IntegerAttr(i32, 0)]) as red:
            v, acc_v, i, acc_i = red.args
            gt = b.cmpf(v, acc_v, comparison_predicate="greater_than", comparison_ordering="ordered")
            eq = b.cmpf(v, acc_v, comparison_predicate="equal", comparison_ordering="ordered")
            lower = b.cmpi(i, acc_i, comparison_predicate="less_than", signedness="signed")
            take = b.ori(gt, b.andi(eq, lower))
            b.yield_([b.select(take, v, acc_v), b.select(take, i, acc_i)])
        return b.reshape(red.results[1], result_type=tile((1,), i32))

    assert run_ops(build, [x], np.zeros(1, np.int32)).tolist() == [1]


@pytest.mark.parametrize(("dtype", "reverse"), [(np.float32, False), (np.float32, True), (np.float16, False)])
def test_scan_is_an_inclusive_prefix(dtype: Any, reverse: bool) -> None:
    x = np.arange(1, 9, dtype=dtype)
    elem = TYPES[np.dtype(dtype)]

    def build(b: Builder, t: list[Value]) -> Value:
        with b.scan([t[0]], 0, [FloatAttr.of(elem, 0.0)], reverse=reverse) as sc:
            _sum_body(b, sc)
        return sc.results[0]

    expect = np.cumsum(x[::-1])[::-1] if reverse else np.cumsum(x)
    assert run_ops(build, [x], np.zeros(8, dtype)).tolist() == expect.tolist()


def test_mmaf_bf16_and_batched_and_mmai() -> None:
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 4, 8)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((2, 8, 4)).astype(ml_dtypes.bfloat16)
    acc = np.ones((2, 4, 4), np.float32)
    got = run_ops(lambda bb, t: bb.mmaf(t[0], t[1], t[2]), [a, b, acc], np.zeros((2, 4, 4), np.float32))
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)) + 1, rtol=1e-5)
    ia = rng.integers(-128, 127, (4, 8)).astype(np.int8)
    ib = rng.integers(-128, 127, (8, 4)).astype(np.int8)
    iacc = np.zeros((4, 4), np.int32)
    got_i = run_ops(
        lambda bb, t: bb.mmai(t[0], t[1], t[2], signedness_lhs="unsigned", signedness_rhs="signed"),
        [ia, ib, iacc],
        np.zeros((4, 4), np.int32),
    )
    assert got_i.tolist() == (ia.view(np.uint8).astype(np.int64) @ ib.astype(np.int64)).tolist()


def test_fma_rounds_once() -> None:
    """(1 + 2**-12)**2 - (1 + 2**-11) = 2**-24 exactly; two roundings in f32 would give 0."""
    a = np.full(2, 1 + 2.0**-12, np.float32)
    c = np.full(2, -(1 + 2.0**-11), np.float32)
    out = run_ops(lambda b, t: b.fma(t[0], t[0], t[1]), [a, c], np.zeros(2, np.float32))
    assert out.tolist() == [2.0**-24, 2.0**-24]


def test_mmaf_f16_accumulator_rounds_to_f16() -> None:
    a = np.full((2, 4), 1.0, np.float16)
    b = np.full((4, 2), 2.0**-11, np.float16)
    acc = np.full((2, 2), 1.0, np.float16)
    got = run_ops(lambda bb, t: bb.mmaf(t[0], t[1], t[2]), [a, b, acc], np.zeros((2, 2), np.float16))
    assert got.tolist() == np.full((2, 2), np.float16(1 + 4 * 2.0**-11)).tolist()


def test_i1_bytes_load_as_booleans() -> None:
    raw = np.array([0, 1, 2, 255], np.uint8)
    out = np.zeros(4, np.int32)
    flags = raw.view(np.bool_)
    got = run_ops(lambda b, t: b.exti(t[0], signedness="unsigned", result_type=tile((4,), i32)), [flags], out)
    assert got.tolist() == [0, 1, 1, 1]


def test_conversions_round_as_asked_and_wide_shifts_reach_the_top_bit() -> None:
    """Mutants killed (scripts/mutation.py): ``nearest_away`` rounding half toward zero (``+ 0.5`` into ``- 0.5``),
    an f64 source rounded to f32 before the requested rounding (``src.name == "f64"`` into ``!=``: two roundings),
    and an unsigned right shift by bits - 1 capped at bits - 2."""
    halves = np.array([2.5, -2.5, 0.5, -0.5, 1.4, -1.6, 3.5, 0.0], np.float32)
    away = unary("ftoi", halves, np.int32, signedness="signed", rounding_mode="nearest_away")
    assert away.tolist() == [3, -3, 1, -1, 1, -2, 4, 0]
    just_above = np.array([1 + 2.0**-24 + 2.0**-40, -(1 + 2.0**-24 + 2.0**-40)], np.float64)
    assert unary("ftof", just_above, np.float32, rounding_mode="zero").tolist() == [1.0, -1.0]
    top = np.array([-128, -1] * 4, np.int8)
    assert binary("shri", top, np.full(8, 7, np.int8), signedness="unsigned").tolist() == [1, 1] * 4
    # a logical shift by the width or more leaves nothing, also of a set top bit (``n >= bits`` into ``>``)
    assert binary("shri", top, np.array([8, 9] * 4, np.int8), signedness="unsigned").tolist() == [0, 0] * 4
