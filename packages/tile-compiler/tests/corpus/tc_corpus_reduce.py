# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Reductions and scans: sum/max/min/prod, argmax/argmin, custom combiners, cumulative sums, whole-tile sums."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32, i32

ROWS, COLS = 64, 128


@tile.function
def max_abs(a, b):
    return tile.maximum(tile.abs(a), tile.abs(b))


@tile.function
def running_max(a, b):
    return tile.maximum(a, b)


def row_sum(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.sum(t, axis=1))


def row_range(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.max(t, 1) - t.min(axis=1))


def row_prod(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.prod(t, axis=-1))


def row_argmax(z: Mut[Tensor[i32, "BM"]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.argmax(t, axis=1))


def row_argmin(z: Mut[Tensor[i32, "BM"]], x: Tensor[i32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(t.argmin(axis=1))


def row_max_abs(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.reduce(t, 1, max_abs, 0.0))


def row_cumsum(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.cumsum(t, axis=1))


def row_running_max(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.scan(t, 1, running_max, -1e30))


def row_cumprod(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(tile.cumprod(t, axis=1))


def total_sum(z: Mut[Tensor[f32, 1]], x: Tensor[f32, "N"]):
    s = tile.sum(x.partition((N,)).load((0,)))
    z.store(s.reshape((1,)))


def _x(rng: np.random.Generator, out_cols: int | None = None, dtype: str = "float32") -> dict[str, object]:
    shape = (ROWS, out_cols) if out_cols else (ROWS,)
    x = rand(rng, (ROWS, COLS)) if dtype == "float32" else rng.integers(-50, 50, (ROWS, COLS)).astype(dtype)
    return {"x": x, "z": poison(shape, "int32" if dtype != "float32" or out_cols == -1 else "float32")}


G = {"BM": 16, "N": COLS}
CASES = [
    Case(
        row_cumprod,
        G,
        lambda r: {"x": rand(r, (ROWS, COLS), lo=0.99, hi=1.01), "z": poison((ROWS, COLS))},
        lambda a: {"z": a["x"].astype("float64").cumprod(1)},
        tol=Tol(k=COLS),
    ),
    Case(row_sum, G, _x, lambda a: {"z": a["x"].sum(1)}, tol=Tol(k=COLS)),
    Case(row_range, G, _x, lambda a: {"z": a["x"].max(1) - a["x"].min(1)}),
    Case(
        row_prod,
        G,
        lambda r: {"x": rand(r, (ROWS, COLS), lo=0.99, hi=1.01), "z": poison((ROWS,))},
        lambda a: {"z": a["x"].astype("float64").prod(1)},
        tol=Tol(k=COLS),
    ),
    Case(
        row_argmax,
        G,
        lambda r: {"x": rand(r, (ROWS, COLS)), "z": poison((ROWS,), "int32")},
        lambda a: {"z": a["x"].argmax(1).astype("int32")},
    ),
    Case(
        row_argmin,
        G,
        lambda r: {"x": r.integers(-50, 50, (ROWS, COLS)).astype("int32"), "z": poison((ROWS,), "int32")},
        lambda a: {"z": a["x"].argmin(1).astype("int32")},
    ),
    Case(row_max_abs, G, _x, lambda a: {"z": np.abs(a["x"]).max(1)}),
    Case(
        row_cumsum,
        G,
        lambda r: {"x": rand(r, (ROWS, COLS)), "z": poison((ROWS, COLS))},
        lambda a: {"z": a["x"].astype("float64").cumsum(1)},
        tol=Tol(k=COLS),
    ),
    Case(
        row_running_max,
        G,
        lambda r: {"x": rand(r, (ROWS, COLS)), "z": poison((ROWS, COLS))},
        lambda a: {"z": np.maximum.accumulate(a["x"], 1)},
    ),
    Case(
        total_sum,
        {"N": 1024},
        lambda r: {"x": rand(r, (1024,)), "z": poison((1,))},
        lambda a: {"z": a["x"].astype("float64").sum(keepdims=True)},
        tol=Tol(k=1024),
    ),
]
