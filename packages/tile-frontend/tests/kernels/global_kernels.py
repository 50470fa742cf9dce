# mypy: ignore-errors
# ruff: noqa: F821, UP037
# Kernel-language source, not typed Python: shape strings such as "BM" are const generics that the compiler binds.
"""Kernels of the compile-time globals tests (``test_frontend_globals.py``), loaded by path from the conftest: each
reads module globals at compile time, which the tests rebind between calls."""

from __future__ import annotations

import enum
import types

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f16, f32


class Mode(enum.Enum):
    """A compile-time switch of `by_mode`."""

    DOUBLE = 1
    NEGATE = 2


SUB = (2,)  # the sub-tile shape of fill_sub
TABLE = [2]  # a mutable global: reading it is refused
NESTED = ((2, (3,)), f32)  # nested tuple with a dtype in it
SIZES = frozenset({4, 8})
MODE = Mode.DOUBLE


@tile.entry
def fill_sub(z: Mut[Tensor[f32, ("BM",)]]):
    """Every element of z is SUB[0], stored one (SUB) sub-tile at a time."""
    zs = z.subtiles(SUB)
    for j in range(zs.num_tiles[0]):
        zs.store(tile.full(SUB, SUB[0], f32), (j,))


@tile.entry
def fill_table(z: Mut[Tensor[f32, ("BM",)]]):
    """Reads the list TABLE: refused."""
    z.store(tile.full((BM,), TABLE[0], f32))  # reads TABLE


@tile.entry
def fill_nested(z: Mut[Tensor[f32, ("BM",)]]):
    """z = (NESTED[0][0] + NESTED[0][1][0]) in NESTED[1], plus 100 when 4 is in SIZES."""
    shape, dt = NESTED
    v = shape[0] + shape[1][0] + (100 if 4 in SIZES else 0)
    z.store(tile.full((BM,), v, dt).astype(f32))


@tile.entry
def by_mode(z: Mut[Tensor[f32, ("BM",)]], x: Tensor[f32, (-1,)]):
    """z = 2x or -x, chosen at compile time by the enum global MODE."""
    t = tile.load_tile_like(x, z)
    z.store(t * 2.0 if MODE == Mode.DOUBLE else -t)


HALF = f16


@tile.entry
def cast_through(z: Mut[Tensor[f32, ("BM",)]], x: Tensor[f32, (-1,)]):
    """z = x rounded through the dtype global HALF."""
    z.store(tile.load_tile_like(x, z).astype(HALF).astype(f32))


cfg = types.ModuleType("cfg")  # a namespace module: its attributes are read at compile time like globals
cfg.SUB = (2,)


@tile.entry
def fill_cfg(z: Mut[Tensor[f32, ("BM",)]]):
    """Every element of z is cfg.SUB[0], stored one (cfg.SUB) sub-tile at a time."""
    zs = z.subtiles(cfg.SUB)
    for j in range(zs.num_tiles[0]):
        zs.store(tile.full(cfg.SUB, cfg.SUB[0], f32), (j,))


def closure_kernel(sub):
    """A kernel reading the closure variable ``box`` (first ``sub``), and the function that rebinds it."""
    box = sub

    @tile.entry
    def fill_box(z: Mut[Tensor[f32, ("BM",)]]):
        zs = z.subtiles(box)
        for j in range(zs.num_tiles[0]):
            zs.store(tile.full(box, box[0], f32), (j,))

    def rebind(value):
        nonlocal box
        box = value

    return fill_box, rebind
