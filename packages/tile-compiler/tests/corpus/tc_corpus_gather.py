# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Checked gathers of inputs (``x.gather(i0, ..., padding=)``): broadcast row and column index tiles, a tuple of
indices with an int among them; indices outside the tensor read the padding (misuse: ``tc_gather_bad``)."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32


def gather_2d(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    i = tile.arange(B).reshape((B, 1))
    z.store(x.gather(i, tile.arange(B) - 1, padding=-1.0))


def gather_tuple(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, (-1, -1)]):
    z.store(x.gather((tile.arange(B), 3)))


def gather_masked(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    """Even positions of x (zero at odd ones and past the end): the caller's mask ANDed with the bounds."""
    i = tile.block_id()[0] * B + tile.arange(B)
    z.store(x.gather(i, mask=i % 2 == 0, padding=0.0))


def window_sum(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    """z[e] = x[e] + x[e + 1] + x[e + 2] + x[e + 3] (zero past the end), read in a loop."""
    e = tile.block_id()[0] * B + tile.arange(B)
    acc = tile.zeros((B,), f32)
    for s in range(4):
        acc = acc + x.gather(e + s)
    z.store(acc)


def _padded(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, pad: float) -> np.ndarray:
    """x[rows, cols] (broadcast), ``pad`` where a row or column is outside x, in float64."""
    rows, cols = np.broadcast_arrays(rows, cols)
    inside = (rows >= 0) & (rows < x.shape[0]) & (cols >= 0) & (cols < x.shape[1])
    picked = x[np.where(inside, rows, 0), np.where(inside, cols, 0)].astype("float64")
    return np.where(inside, picked, pad)


CASES = [
    Case(
        gather_2d,
        {"B": 16},
        lambda r: {"x": rand(r, (10, 20)), "z": poison((16, 16))},
        lambda a: {"z": _padded(a["x"], np.arange(16)[:, None], np.arange(16)[None, :] - 1, -1.0)},
        tol=Tol(),
    ),
    Case(
        gather_tuple,
        {"B": 8},
        lambda r: {"x": rand(r, (5, 7)), "z": poison((8,))},
        lambda a: {"z": _padded(a["x"], np.arange(8), np.full(8, 3), 0.0)},
        tol=Tol(),
    ),
    Case(
        gather_masked,
        {"B": 16},
        lambda r: {"x": rand(r, (40,)), "z": poison((40,))},
        lambda a: {"z": np.where(np.arange(40) % 2 == 0, a["x"], 0).astype("float64")},
        tol=Tol(),
    ),
    Case(
        window_sum,
        {"B": 16},
        lambda r: {"x": rand(r, (40,)), "z": poison((40,))},
        lambda a: {"z": sum(np.append(a["x"], np.zeros(3))[s : s + 40].astype("float64") for s in range(4))},
        tol=Tol(k=4),
    ),
]
