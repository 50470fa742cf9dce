"""Every integer op of the interpreter on i1, exhaustively, against a 1-bit two's complement model written here.

Tile IR's i1 is a 1-bit integer (cuda-tile Types.td): its one bit reads as 0/1 through an unsigned view and as
0/-1 through a signed view, and every result keeps only the low bit. So ``addi(1, 1)`` is 0, signed
``maxi(1, 0)`` is 0 (max(-1, 0)), signed ``exti`` of 1 is -1. The model below computes each op on Python integers
in the view its signedness names and keeps the low bit; conventions the spec leaves open (a shift by the width
or more, signed division overflow) follow what the interpreter does at every other width.

Kills (tried by hand, the fix in ``_arith``/``_convert`` reverted): ``addi`` on numpy bools (True + True stays
True), ``subi`` raising on bools, signed ``maxi``/``mini``/``cmpi``/``itof`` reading true as 1, a reduction whose
body adds i1 (parity) computed as or.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tile.ir import Builder, IntegerAttr, RegionOp, Value, f32, i1, tile

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_interp_ops import Arr, binary, run_ops, unary

# the four (lhs, rhs) pairs of bits
LHS = np.array([False, False, True, True])
RHS = np.array([False, True, False, True])
BITS = [(0, 0), (0, 1), (1, 0), (1, 1)]


def _view(bit: int, signed: bool) -> int:
    """The integer a stored bit means: 0/-1 signed, 0/1 unsigned."""
    return -bit if signed else bit


def _low(value: int) -> bool:
    """Wrap an exact integer to one bit (two's complement: the low bit)."""
    return bool(value & 1)


def _div(a: int, b: int, rounding: str) -> int:
    q = a / b
    if rounding == "positive_inf":
        return math.ceil(q)
    return math.floor(q) if rounding == "negative_inf" else math.trunc(q)


def _shr(a: int, n: int, signed: bool) -> int:
    # the interpreter's convention at every width: an amount >= the width gives 0, or the sign fill when signed
    return a >> min(n, 0) if signed else (0 if n >= 1 else a >> n)


MODEL: dict[str, Callable[[int, int, bool], int]] = {
    "addi": lambda a, b, s: a + b,
    "subi": lambda a, b, s: a - b,
    "muli": lambda a, b, s: a * b,
    "andi": lambda a, b, s: a & b,
    "ori": lambda a, b, s: a | b,
    "xori": lambda a, b, s: a ^ b,
    "maxi": lambda a, b, s: max(_view(a, s), _view(b, s)),
    "mini": lambda a, b, s: min(_view(a, s), _view(b, s)),
    "shli": lambda a, b, s: 0 if b >= 1 else a << b,  # the amount is unsigned
    "shri": lambda a, b, s: _shr(_view(a, s), b, s),
    "mulhii": lambda a, b, s: (a * b) >> 1,  # unsigned only
}
SIGNED_OPS = ("maxi", "mini", "shri")


def _expect(name: str, signed: bool) -> list[bool]:
    return [_low(MODEL[name](a, b, signed)) for a, b in BITS]


@pytest.mark.parametrize("name", ["addi", "subi", "muli", "andi", "ori", "xori", "shli", "mulhii"])
def test_signless_binary_ops_keep_the_low_bit(name: str) -> None:
    assert binary(name, LHS, RHS).tolist() == _expect(name, False)


@pytest.mark.parametrize("signedness", ["signed", "unsigned"])
@pytest.mark.parametrize("name", SIGNED_OPS)
def test_ops_with_a_signedness_read_true_as_minus_one_when_signed(name: str, signedness: str) -> None:
    got = binary(name, LHS, RHS, signedness=signedness)
    assert got.tolist() == _expect(name, signedness == "signed")


@pytest.mark.parametrize(
    ("signedness", "rounding"),
    [("signed", "zero"), ("signed", "positive_inf"), ("signed", "negative_inf"), ("unsigned", "zero"),
     ("unsigned", "positive_inf")],
)  # fmt: skip
def test_divi_and_remi_by_one_bit(signedness: str, rounding: str) -> None:
    """Division by the only nonzero divisor (1 unsigned, -1 signed); -1 / -1 = 1 wraps to 1 (the spec calls that
    signed overflow undefined; the interpreter wraps it as at every width)."""
    signed = signedness == "signed"
    a, b = np.array([False, True]), np.array([True, True])
    quotient = [_low(_div(_view(x, signed), _view(1, signed), rounding)) for x in (0, 1)]
    remainder = [_low(int(math.fmod(_view(x, signed), _view(1, signed)))) for x in (0, 1)]
    assert binary("divi", a, b, signedness=signedness, rounding=rounding).tolist() == quotient
    assert binary("remi", a, b, signedness=signedness).tolist() == remainder


@pytest.mark.parametrize("name", ["negi", "absi"])
def test_negi_and_absi_read_the_operand_as_signed(name: str) -> None:
    """-(-1) = 1 and |-1| = 1 both keep the bit set; the ops take no signedness (always signed input). On one bit
    both are the identity in either view (-1 and 1 share the low bit), so the view is not observable here."""
    fn: Callable[[int], int] = (lambda v: -v) if name == "negi" else abs
    x = np.array([False, True])
    assert unary(name, x).tolist() == [_low(fn(_view(v, True))) for v in (0, 1)]


@pytest.mark.parametrize("signedness", ["signed", "unsigned"])
@pytest.mark.parametrize(
    "predicate",
    ["equal", "not_equal", "less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal"],
)
def test_cmpi_orders_by_the_view_its_signedness_names(predicate: str, signedness: str) -> None:
    signed = signedness == "signed"
    compare: dict[str, Callable[[int, int], bool]] = {
        "equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y, "less_than": lambda x, y: x < y,
        "less_than_or_equal": lambda x, y: x <= y, "greater_than": lambda x, y: x > y,
        "greater_than_or_equal": lambda x, y: x >= y,
    }  # fmt: skip
    got = binary("cmpi", LHS, RHS, np.bool_, comparison_predicate=predicate, signedness=signedness)
    assert got.tolist() == [compare[predicate](_view(a, signed), _view(b, signed)) for a, b in BITS]


@pytest.mark.parametrize("signedness", ["signed", "unsigned"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_exti_sign_or_zero_extends_the_bit(signedness: str, dtype: type[np.generic]) -> None:
    signed = signedness == "signed"
    x = np.array([False, True])
    assert unary("exti", x, dtype, signedness=signedness).tolist() == [_view(v, signed) for v in (0, 1)]


@pytest.mark.parametrize("signedness", ["signed", "unsigned"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_itof_converts_the_view_its_signedness_names(signedness: str, dtype: type[np.generic]) -> None:
    signed = signedness == "signed"
    x = np.array([False, True])
    assert unary("itof", x, dtype, signedness=signedness).tolist() == [float(_view(v, signed)) for v in (0, 1)]


def test_trunci_to_i1_keeps_the_low_bit() -> None:
    x = np.array([0, 1, 2, 3, -1, -2, 127, -128], np.int8)
    assert unary("trunci", x, np.bool_).tolist() == [_low(int(v)) for v in x]


@pytest.mark.parametrize(("signedness", "values"), [("signed", [0.0, -1.0]), ("unsigned", [0.0, 1.0])])
def test_ftoi_to_i1_takes_the_values_of_the_view(signedness: str, values: list[float]) -> None:
    """The in-range values of each view convert exactly: -1.0 is true when signed, 1.0 when unsigned."""
    x = np.array(values, np.float32)
    assert unary("ftoi", x, np.bool_, signedness=signedness).tolist() == [False, True]
    assert unary("ftoi", x, np.bool_, signedness=signedness, saturating=True).tolist() == [False, True]


@pytest.mark.parametrize(
    ("signedness", "values", "expect"),
    [("signed", [-5.0, 0.0, 2.0], [True, False, False]), ("unsigned", [-5.0, 1.0, 2.0], [False, True, True])],
)
def test_saturating_ftoi_to_i1_clamps_to_the_view(signedness: str, values: list[float], expect: list[bool]) -> None:
    """Saturation clamps to [-1, 0] signed (-5.0 -> -1, 2.0 -> 0) and to [0, 1] unsigned (-5.0 -> 0, 2.0 -> 1)."""
    x = np.array(values, np.float32)
    assert unary("ftoi", x, np.bool_, signedness=signedness, saturating=True).tolist() == expect


# ---- reductions and scans -------------------------------------------------------------------------------

MATRIX = np.random.default_rng(11).integers(0, 2, (4, 7)).astype(np.bool_)


def _body(b: Builder, red: RegionOp, name: str, signedness: str | None) -> None:
    elem, acc = red.args
    attrs = {} if signedness is None else {"signedness": signedness}
    b.yield_([getattr(b, name)(elem, acc, **attrs)])


@pytest.mark.parametrize(
    ("name", "signedness", "identity"),
    [("addi", None, 0), ("muli", None, 1), ("maxi", "signed", 1), ("maxi", "unsigned", 0), ("mini", "signed", 0),
     ("mini", "unsigned", 1)],
)  # fmt: skip
def test_i1_reduce_combines_with_one_bit_arithmetic(name: str, signedness: str | None, identity: int) -> None:
    """A sum of bits is their parity, a signed max is 0 unless all are -1; dim 1 (7 wide) exercises padding."""
    signed = signedness == "signed"

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [IntegerAttr(i1, identity)]) as red:
            _body(b, red, name, signedness)
        return red.results[0]

    got = run_ops(build, [MATRIX], np.zeros(4, np.bool_))
    expect = []
    for row in MATRIX:
        acc = identity
        for v in row:
            acc = int(_low(MODEL[name](int(v), acc, signed)))
        expect.append(bool(acc))
    assert got.tolist() == expect


def test_i1_scan_of_addi_is_the_running_parity() -> None:
    def build(b: Builder, t: list[Value]) -> Value:
        with b.scan([t[0]], 1, [IntegerAttr(i1, 0)]) as sc:
            _body(b, sc, "addi", None)
        return sc.results[0]

    got = run_ops(build, [MATRIX], np.zeros(MATRIX.shape, np.bool_))
    assert got.tolist() == (np.cumsum(MATRIX, axis=1) % 2 == 1).tolist()


def test_an_i1_sum_feeds_a_float_conversion() -> None:
    """True + True through the whole path (addi, exti unsigned, itof) reads 0.0, not 1.0 or 2.0."""

    def build(b: Builder, t: list[Value]) -> Value:
        s = b.addi(t[0], t[1])
        return b.itof(s, signedness="unsigned", result_type=tile((4,), f32))

    got: Arr = run_ops(build, [LHS, RHS], np.zeros(4, np.float32))
    assert got.tolist() == [float(_low(a + b)) for a, b in BITS]


def test_an_i1_identity_keeps_only_its_low_bit() -> None:
    """An identity attribute is written masked to the width, so an i1 identity of 2 is 0: a parity over 7 bits
    (padded with the identity once) does not flip. Kills: the identity converted by truth value (2 -> True)."""

    def build(b: Builder, t: list[Value]) -> Value:
        with b.reduce([t[0]], 1, [IntegerAttr(i1, 2)]) as red:
            _body(b, red, "addi", None)
        return red.results[0]

    got = run_ops(build, [MATRIX], np.zeros(4, np.bool_))
    assert got.tolist() == (MATRIX.sum(axis=1) % 2 == 1).tolist()
