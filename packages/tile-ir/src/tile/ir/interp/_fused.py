"""A fused multiply-add rounded once, in numpy (which has no fma).

numpy computes ``a * b + c`` with two roundings, and the second can land on a midpoint the exact value was not on,
so a few inputs per million come out one ulp off. Two error-free transformations make it exact:

- f32 and narrower: the product of two such values is exact in float64, and the sum rounded *to odd* in float64
  (nearest, then stepped to the odd neighbour when inexact) rounds correctly to any narrower type afterwards,
  because float64 carries more than two extra bits (Boldo and Melquiond, "Emulation of FMA and correctly rounded
  sums: proved algorithms using rounding to odd", IEEE TC 2008).
- f64: the product splits exactly into ``ph + pl`` (Dekker), and the three-term sum ``ph + pl + c`` is rounded
  once with the same paper's algorithm: ``TwoSum`` twice, the small parts added rounded to odd, one final
  nearest rounding.

Where the error terms are not exact (a product or sum that overflows, or a product in the subnormal range) the
plain double-rounded result is kept; those inputs are the ones where hardware fma and ``a * b + c`` also tend to
overflow or flush anyway.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import Array

__all__ = ["fma_f64", "fma_odd"]

_SPLIT = np.float64(134217729.0)  # 2**27 + 1: Veltkamp's splitter for 53-bit significands
_SPLIT_LIMIT = np.float64(2.0**996)  # beyond this the splitter's product overflows
_PRODUCT_FLOOR = np.float64(2.0**-969)  # below this the product's low part is not exact (2**-1022 * 2**53)


def _two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    s = a + b
    bv = s - a
    return s, (a - (s - bv)) + (b - bv)


def _to_odd(s: Array, err: Array) -> Array:
    """``s`` (a nearest-rounded sum whose exact value is ``s + err``) rounded to odd instead."""
    even = (s.view(np.int64) & 1) == 0
    step = np.isfinite(s) & (err != 0) & even
    return np.where(step, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def fma_odd(a: Array, b: Array, c: Array) -> Array:
    """``a * b + c`` for float64 arrays holding f32 (or narrower) values, rounded to odd in float64: rounding the
    result once more to the target type (any mode) gives the correctly rounded fma."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
        s, err = _two_sum(p, np.asarray(c, np.float64))
        return _to_odd(s, np.where(np.isfinite(err), err, 0.0))


def _split(x: Array) -> tuple[Array, Array]:
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def fma_f64(a: Array, b: Array, c: Array) -> Array:
    """``a * b + c`` on float64 arrays, rounded once to nearest even."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    with np.errstate(invalid="ignore", over="ignore"):
        plain = a * b + c
        ph = a * b
        (ah, al), (bh, bl) = _split(a), _split(b)
        pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl
        hi, lo = _two_sum(c, pl)  # c + pl = hi + lo exactly
        th, tl = _two_sum(ph, hi)  # ph + hi = th + tl exactly
        ts, terr = _two_sum(tl, lo)
        fused = th + _to_odd(ts, terr)
        exact = (
            np.isfinite(fused)
            & np.isfinite(pl)
            & (np.abs(a) < _SPLIT_LIMIT)
            & (np.abs(b) < _SPLIT_LIMIT)
            & ((np.abs(ph) >= _PRODUCT_FLOOR) | (a == 0) | (b == 0))
        )
        return np.where(exact & (fused != 0), fused, plain)  # a zero takes its IEEE sign from the plain sum
