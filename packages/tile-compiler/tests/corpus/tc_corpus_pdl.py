# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, E501
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Kernels for programmatic dependent launch: ``CompileOptions(pdl=True)`` puts the grid-dependency wait first, and
``tile.launch_dependents`` emits the scheduling hint (results unchanged: both are no-ops on the interpreter, and on
a GPU launched alone)."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f32


def scale_then_release(z: Mut[Tensor[f32, ("B",)]], x: Tensor[f32, (-1,)]):
    z.store(tile.load_tile_like(x, z) * 2.0)
    tile.launch_dependents()


def rowsum_loop(z: Mut[Tensor[f32, ("BM", 1)]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    tile.launch_dependents()  # early: the successor's prologue overlaps this whole loop
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM, 1), f32)
    for j in range(px.num_tiles[1]):
        acc = acc + tile.sum(px.load((tile.block_id()[0], j)), axis=1, keepdims=True)
    z.store(acc)


CASES = [
    Case(
        scale_then_release,
        {"B": 16},
        lambda r: {"z": poison((40,)), "x": rand(r, (40,))},
        lambda a: {"z": a["x"].astype(np.float64) * 2},
        hints={"pdl": True},
        bytecode=(13, 4),
    ),
    Case(
        rowsum_loop,
        {"BM": 8, "BN": 16},
        lambda r: {"z": poison((24, 1)), "x": rand(r, (24, 40))},
        lambda a: {"z": a["x"].astype(np.float64).sum(1, keepdims=True)},
        hints={"pdl": True},
        bytecode=(13, 4),
    ),
]
