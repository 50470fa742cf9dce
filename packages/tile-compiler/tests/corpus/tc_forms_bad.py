# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, SIM108
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Misuse of the forms in ``tc_corpus_forms``: each kernel fails to compile with a message at its own line."""

from __future__ import annotations

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32


def dtype_vs_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    if t == tile.f32:  # a tile compared with a dtype
        z.store(t)


def dtype_ordered(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    if t.dtype < tile.f32:
        z.store(t)


def in_runtime(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    if tile.block_id()[0] in (0, 1):
        z.store(t)


def batch_clash(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, -1]):
    a = tile.zeros((2, 16, 16), tile.f16)
    b = tile.zeros((4, 16, 16), tile.f16)
    z.store(a @ b)


def vector_matmul(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, -1]):
    a = tile.zeros((16,), tile.f16)
    b = tile.zeros((16, 16), tile.f16)
    z.store(a @ b)


def acc_batch_clash(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, -1]):
    a = tile.zeros((2, 16, 16), tile.f16)
    b = tile.zeros((16, 16), tile.f16)
    z.store(tile.mma(a, b, tile.zeros((16, 16), tile.f32)))


def four_dims(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, -1]):
    a = tile.zeros((2, 2, 16, 16), tile.f16)
    z.store(a @ a)


def tuple_to_single(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    s = (tile.zeros((16,), tile.f32), tile.zeros((16,), tile.f32))
    for _ in range(4):
        s = s[0]
    z.store(s[0])


def tuple_grows(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    s = (tile.zeros((16,), tile.f32), 1.0)
    for _ in range(4):
        s = (s[0], s[1], 2.0)
    z.store(s[0])


def tuple_with_a_tensor(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    s = (x, tile.zeros((16,), tile.f32))
    for _ in range(4):
        s = (x, s[1] + 1.0)
    z.store(s[1])


def tuple_leaf_changes_type(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    s = (tile.zeros((16,), tile.f32), 0)
    for _ in range(4):
        s = (s[0], tile.zeros((16,), tile.f32))
    z.store(s[0])


def branches_disagree(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.zeros((16,), tile.f32)
    if tile.block_id()[0] == 0:
        s = (t, t)
    else:
        u = t + 1.0
        s = (u, u, u)
    z.store(s[0])


@tile.function
def keep_value(e, acc):
    return tile.minimum(e[0], acc[0])


@tile.function
def pair_min(e, acc):
    return (tile.minimum(e[0], acc[0]), tile.minimum(e[1], acc[1]))


def identity_too_short(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    v, _ = tile.reduce((t, tile.arange(B)), 0, pair_min, (0.0,))
    z.store(tile.full((B,), v, f32))


def combiner_returns_one(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    v, _ = tile.reduce((t, tile.arange(B)), 0, keep_value, (0.0, 0))
    z.store(tile.full((B,), v, f32))


def int_identity_fraction(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    v, _ = tile.reduce((t, tile.arange(B)), 0, pair_min, (0.0, 1.5))
    z.store(tile.full((B,), v, f32))


def shapes_clash(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    v, _ = tile.reduce((t, tile.arange(2 * B)), 0, pair_min, (0.0, 0))
    z.store(tile.full((B,), v, f32))


def combiner_not_a_function(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    v, _ = tile.reduce((t, tile.arange(B)), 0, tile.minimum, (0.0, 0))
    z.store(tile.full((B,), v, f32))
