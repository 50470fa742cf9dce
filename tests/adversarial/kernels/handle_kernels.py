# mypy: ignore-errors
# ruff: noqa: F821, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Kernels the host-handle attacks launch (loaded by path from test_adversarial_handles.py)."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32, i32


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry
def fill(z: Mut[Tensor[f32, "B"]], value: f32):
    z.store(tile.full(z.shape, value, f32))


@tile.entry
def scale(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: i32):
    z.store(tile.load_tile_like(x, z) * n.astype(f32))
