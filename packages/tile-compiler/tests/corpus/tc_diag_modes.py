# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics the compiler binds.
"""Kernels that misuse ordered partitions, math modes or load hints; ``# <-`` marks the line each error names.

``f16_math`` is valid: the per-kernel defaults must leave its f16 ops alone; ``max_bounded_loop`` is valid and must
keep an index check in the kernel (a maximum proves no upper bound).
"""

from __future__ import annotations

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f16, f32, i32


def order_not_permutation(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    p = x.partition((B, B), order=(1, 1))  # <-
    z.store(p.load((0, 0)))


def order_wrong_length(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    p = x.partition((B, B), order=(1, 0, 2))  # <-
    z.store(p.load((0, 0)))


def order_not_constant(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    i = tile.block_id()[0]
    p = x.partition((B, B), order=(i, 0))  # <-
    z.store(p.load((0, 0)))


def order_on_output(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    p = z.partition((B, B), order=(1, 0))  # <-
    z.store(p.load(tile.block_id()[:2]))


def ftz_on_f16(z: Mut[Tensor[f16, "B"]], x: Tensor[f16, -1]):
    z.store(tile.exp2(tile.load_tile_like(x, z), flush_to_zero=True))  # <-


def approx_on_f16(z: Mut[Tensor[f16, "B"]], x: Tensor[f16, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.truediv(t, t, rounding="approx"))  # <-


def rounding_on_sin(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.sin(tile.load_tile_like(x, z), rounding="approx"))  # <-


def ftz_on_exp(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.exp(tile.load_tile_like(x, z), flush_to_zero=True))  # <-


def bad_rounding_name(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.sqrt(tile.load_tile_like(x, z), rounding="fast"))  # <-


def full_on_sqrt(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.sqrt(tile.load_tile_like(x, z), rounding="full"))  # <-


def ftz_not_bool(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.rsqrt(tile.load_tile_like(x, z), flush_to_zero=1))  # <-


def modes_on_ints(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.add(t, t, rounding="zero"))  # <-


def ftz_on_int_maximum(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.maximum(t, 1, flush_to_zero=True))  # <-


def bad_latency_on_load_tile_like(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z, latency=11))  # <-


def f16_math(z: Mut[Tensor[f16, "B"]], x: Tensor[f16, -1]):
    t = tile.load_tile_like(x, z)
    z.store(t / (t * t + 1.0) + tile.sqrt(t) + tile.exp2(t))


def max_bounded_loop(z: Mut[Tensor[f32, ("B", 1)]], x: Tensor[f32, (-1, -1)], n: int):
    px = x.partition((B, B), padding="zero")
    acc = tile.zeros((B, 1), f32)
    for j in range(tile.maximum(n, px.num_tiles[1])):
        acc = acc + tile.sum(px.load((tile.block_id()[0], j)), axis=1, keepdims=True)
    z.store(acc)
