"""Arithmetic on 1-bit integers (i1), which the interpreter stores as numpy bools.

Tile IR's i1 is a 1-bit two's complement integer: its bit reads as 0 or 1 through an unsigned view and as 0 or -1
through a signed view, and every result keeps only the low bit (cuda-tile ``Types.td``). numpy's bool arithmetic is
logic instead (``True + True`` is True, ``-True`` raises), so the integer ops on i1 run here: `widen` reads each
operand as small integers in the view the op's signedness names, the op's own numpy function computes on them, and
`narrow` keeps the low bit. The ops' conventions beyond the spec (a shift by the width or more, signed overflow)
come out as at every other width: ``1 << 1`` and ``1 >> 1`` are 0, ``-1 >> 1`` is -1, ``-1 / -1`` wraps to -1.
``negi`` and ``absi`` are the identity on i1 (-x and |x| keep the low bit of x, in either view). The handlers pick
these kernels when the op is compiled, so no other type pays for them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._dtypes import Array

__all__ = ["binary", "narrow", "widen"]


def widen(x: Array, signed: bool) -> Array:
    """The i1 values `x` as int8 integers: 0/-1 when `signed`, 0/1 otherwise."""
    v = np.asarray(x).astype(np.int8)
    return np.negative(v) if signed else v


def narrow(v: Array) -> Array:
    """Wrap the integers `v` to i1 (their low bit), as the interpreter stores i1."""
    return np.asarray(np.bitwise_and(v, 1)).astype(np.bool_)


def binary(fn: Callable[[Array, Array], Array], signed_lhs: bool, signed_rhs: bool) -> Callable[[Array, Array], Array]:
    """The i1 kernel of the integer function `fn`, reading each operand through the view given."""

    def run(a: Array, b: Array) -> Array:
        return narrow(fn(widen(a, signed_lhs), widen(b, signed_rhs)))

    return run
