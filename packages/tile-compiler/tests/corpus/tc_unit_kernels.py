# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, B007, RET508
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds.
"""Small kernels the unit tests of parse, resolve, typecheck and lower inspect (no numeric role)."""

from __future__ import annotations

import tc_corpus_lib as lib

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Ptr, Tensor, f16, f32, i8, i32


def every_param_kind(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, 64)], n: int, s: float, flag: bool, k: Const[int]
):
    z.store(tile.zeros((BM, BN), f32) + s)


def promotes(z: Mut[Tensor[f32, "B"]], x: Tensor[f16, -1], y: Tensor[f32, -1], a: Tensor[i8, -1], b: Tensor[i32, -1]):
    t = tile.load_tile_like(x, z) + tile.load_tile_like(y, z)
    u = tile.load_tile_like(a, z) + tile.load_tile_like(b, z)
    z.store(t + u.astype(f32) * (B * 2))


def broadcasts(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], v: Tensor[f32, -1]):
    bm, bn, _ = tile.block_id()
    z.store(x.partition((BM, BN)).load((bm, bn)) * v.partition((BN,)).load((bn,)))


def runtime_if(z: Mut[Tensor[f32, "B"]], n: int):
    t = tile.zeros((B,), f32)
    if n > 3:
        t = t + 1.0
    z.store(t)


def static_if(z: Mut[Tensor[f32, "B"]], on: Const[bool]):
    t = tile.zeros((B,), f32)
    if on:
        t = t + 1.0
    z.store(t)


def carried_loop(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: int):
    acc = tile.zeros((B,), f32)
    for i in range(n):
        acc = acc + tile.load_tile_like(x, z)
    z.store(acc)


def storing_loop(z: Mut[Tensor[f32, "B"]], n: int):
    for i in range(n):
        z.store(tile.zeros((B,), f32))


def breaking_loop(z: Mut[Tensor[f32, "B"]], n: int):
    acc = tile.zeros((B,), f32)
    for i in range(n):
        if i > 5:
            break
        acc = acc + 1.0
    z.store(acc)


@tile.function
def twice(t):
    return t * 2.0


def inlines(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(lib.clamp(twice(tile.load_tile_like(x, z)), 0.0, 1.0))


def raw_pointer(z: Mut[Tensor[f32, "B"]], p: Ptr[f32]):
    z.store(tile.gather(p + tile.arange(B)))


def reduces(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, (-1, 16)]):
    z.store(tile.max(x.partition((B, 16)).load((tile.block_id()[0], 0)), axis=1))


def generic_dtype(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1]):
    z.store(tile.load_tile_like(x, z) + tile.ones((B,), T))


def both_branches_exit(z: Mut[Tensor[f32, "B"]], n: int):
    acc = tile.zeros((B,), f32)
    for i in range(n):
        acc = acc + 1.0
        if i > 2:
            break
        else:
            continue
    z.store(acc)


def reads_past_the_end(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((B,)).load((tile.block_id()[0] + 1,)))


def k_loop(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    px = x.partition((B, B))
    acc = tile.zeros((B, B), f32)
    for k in range(px.num_tiles[1]):
        acc = acc + px.load((tile.block_id()[0], k))
    z.store(acc)


def grouped_tiles(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    px = x.partition((B, B))
    for idx in z.tiles(group=2):
        m = idx[0]
        acc = tile.zeros((B, B), f32)
        for k in range(px.num_tiles[1]):
            acc = acc + px.load((m, k))
        z.store(acc, at=idx)


def walks_rank3(z: Mut[Tensor[f32, (1, "B", "B")]]):
    for idx in z.tiles():
        z.store(tile.zeros((1, B, B), f32), at=idx)


def walks_and_skips(z: Mut[Tensor[f32, (1, "B", "B")]]):
    for idx in z.tiles():
        if idx[0] == 0:
            continue
        z.store(tile.zeros((1, B, B), f32), at=idx)


def const_index(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((B,)).load((3,)))


def loop_to_const(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    acc = tile.zeros((B,), f32)
    for i in range(4):
        acc = acc + x.partition((B,)).load((i,))
    z.store(acc)


def loop_to_scalar(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: int):
    acc = tile.zeros((B,), f32)
    for i in range(n):
        acc = acc + x.partition((B,)).load((i,))
    z.store(acc)


def k_loop_step_2(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    px = x.partition((B, B))
    acc = tile.zeros((B, B), f32)
    for k in range(0, px.num_tiles[1], 2):
        acc = acc + px.load((tile.block_id()[0], k))
    z.store(acc)


def k_loop_huge_step(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    px = x.partition((B, B))
    acc = tile.zeros((B, B), f32)
    for k in range(1, px.num_tiles[1], 2**31 - 1):
        acc = acc + px.load((tile.block_id()[0], k))
    z.store(acc)


def huge_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.zeros((1099511627776,), f32))


def copies_by_walk(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    for idx in z.tiles():
        z.store(x.partition((B, B)).load((idx[0], idx[1])), at=idx)
