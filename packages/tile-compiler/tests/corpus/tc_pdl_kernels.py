# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, E501
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Kernels for programmatic dependent launch: ``CompileOptions(pdl=True)`` puts the grid-dependency wait first, and
``tile.launch_dependents`` emits the scheduling hint."""

from __future__ import annotations

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
