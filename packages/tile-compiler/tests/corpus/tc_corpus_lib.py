# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Helper functions in their own module: kernels elsewhere in the corpus call them across modules."""

from __future__ import annotations

import tile.compiler.lang as tile


@tile.function
def gelu(x):
    return 0.5 * x * (1.0 + tile.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@tile.function
def clamp(x, lo, hi):
    return tile.minimum(tile.maximum(x, lo), hi)


@tile.function
def scaled_clamp(x, s=2.0):
    return clamp(x * s, -1.0, 1.0)
