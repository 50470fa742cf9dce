"""The interpreter's fma rounds once, checked against exact rational arithmetic (`fractions.Fraction`)."""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tile.ir.interp._fused import fma_f64, fma_odd

sys.path.insert(0, str(Path(__file__).parent))  # helpers_ir_* live beside the tests (importlib import mode)

from helpers_ir_interp_ops import run_ops


def _nearest_f32(q: Fraction) -> float:
    """``q`` rounded once to float32, nearest even (float(q) then float32 would round twice)."""
    guess = np.float32(float(q))
    cands = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.array(c).view(np.int32)) & 1))
    return float(best)


def _values(rng: np.random.Generator, n: int, bits: int) -> np.ndarray[Any, Any]:
    """Random floats with random exponents (so sums cancel and products straddle the addend's ulp)."""
    dtype = np.float32 if bits == 32 else np.float64
    mant = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    out: np.ndarray[Any, Any] = (mant * np.exp2(rng.integers(-40, 40, n))).astype(dtype)
    return out


# a * b + c lies just below a midpoint between two floats whose upper neighbour is even: one rounding to float64
# lands on the midpoint, and the second rounding (ties to even) then goes up, one ulp from the fused result.
F32_HARD = (np.float32(2.0**-24 * (1 + 2.0**-23)), np.float32(1 - 2.0**-23), np.float32(1 + 2.0**-23))
F64_HARD = (2.0**-53 * (1 + 2.0**-52), 1 - 2.0**-52, 1 + 2.0**-52)


# The other direction: a * b + c just *above* a midpoint whose lower neighbour is even (products of 24-bit and 53-bit
# integers found by search: 14303618 * 9839293 = 2**47 + 106746, 7408072323745623 * 5475759068560661 = 2**105 + r,
# r < 2**52). One rounding to float64 lands on the midpoint and ties-to-even then goes down.
F32_UP = (np.float32(14303618 * 2.0**-24), np.float32(9839293 * 2.0**-47), np.float32(1.0))
F64_UP = (7408072323745623 * 2.0**-52, 5475759068560661 * 2.0**-106, 1.0)


def test_f32_hard_case_above_the_midpoint_rounds_up() -> None:
    """Kills mutants of the round-to-odd step's direction (``err > 0``) and parity test (``& 1``)."""
    a, b, c = (np.array([x], np.float64) for x in F32_UP)
    assert np.float32(fma_odd(a, b, c)[0]) == np.float32(1 + 2.0**-23)
    assert np.float32(a[0] * b[0] + c[0]) == np.float32(1.0)


def test_f64_hard_case_above_the_midpoint_rounds_up() -> None:
    a, b, c = (np.array([x]) for x in F64_UP)
    assert fma_f64(a, b, c)[0] == 1 + 2.0**-52
    assert a[0] * b[0] + c[0] == 1.0


def test_out_of_range_operands_fall_back_to_the_plain_sum() -> None:
    """Where the error terms are not exact (the splitter overflows, the product is subnormal) the result is numpy's
    ``a * b + c``, finite where that is: never the NaN an overflowed split would give."""
    a = np.array([2.0**1000, 2.0**-600, 3.0, 2.0**996])
    b = np.array([2.0**-990, 2.0**-500, 2.0**1023, 1.5])
    c = np.array([1.0, 2.0**-1074, 1.0, -(2.0**996)])
    got = fma_f64(a, b, c)
    assert np.isfinite(got[[0, 1, 3]]).all()
    assert got[0] == 2.0**10 + 1
    assert got[1] == 2.0**-1074
    assert got[2] == np.inf
    assert got[3] == 2.0**995


def test_f32_hard_case_rounds_once() -> None:
    """Kills a mutant (or a revert) computing ``a * b + c`` in float64 and rounding twice: that gives 1 + 2**-22."""
    a, b, c = (np.array([x], np.float64) for x in F32_HARD)
    assert np.float32(fma_odd(a, b, c)[0]) == np.float32(1 + 2.0**-23)
    assert np.float32(a[0] * b[0] + c[0]) == np.float32(1 + 2.0**-22)  # the double rounding the test guards against


def test_f64_hard_case_rounds_once() -> None:
    a, b, c = (np.array([x]) for x in F64_HARD)
    assert fma_f64(a, b, c)[0] == 1 + 2.0**-52
    assert a[0] * b[0] + c[0] == 1 + 2.0**-51


@pytest.mark.parametrize("seed", range(3))
def test_random_f32_match_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = (_values(rng, 400, 32) for _ in range(3))
    got = fma_odd(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64)).astype(np.float32)
    exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c, strict=True)]
    want = [_nearest_f32(q) for q in exact]
    assert got.tolist() == want


@pytest.mark.parametrize("seed", range(3))
def test_random_f64_match_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = (_values(rng, 400, 64) for _ in range(3))
    got = fma_f64(a, b, c)
    triples = zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    want = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in triples]
    assert got.tolist() == want


def test_specials_follow_ieee() -> None:
    """inf and nan propagate as in ``a * b + c``; an exact zero keeps the sign IEEE gives it."""
    a = np.array([np.inf, 0.0, np.nan, 1.0, -0.0])
    b = np.array([2.0, np.inf, 1.0, 1.0, 1.0])
    c = np.array([1.0, 1.0, 1.0, -1.0, -0.0])
    for fn in (fma_f64, fma_odd):
        got = fn(a, b, c)
        assert got[0] == np.inf
        assert np.isnan(got[1:3]).all()
        assert got[3] == 0.0
        assert not np.signbit(got[3])
        assert got[4] == 0.0
        assert np.signbit(got[4])


@pytest.mark.parametrize(
    ("dtype", "hard", "want"), [(np.float32, F32_HARD, 1 + 2.0**-23), (np.float64, F64_HARD, 1 + 2.0**-52)]
)
def test_fma_op_rounds_once(dtype: type, hard: tuple[float, float, float], want: float) -> None:
    """The Tile IR ``fma`` op (through the interpreter) on the hard cases, f32 and f64."""
    operands: list[np.ndarray[Any, Any]] = [np.full(2, x, dtype) for x in hard]
    out = run_ops(lambda bb, t: bb.fma(t[0], t[1], t[2]), operands, np.zeros(2, dtype))
    assert out.tolist() == [want, want]
