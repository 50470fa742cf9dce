# mypy: ignore-errors
# ruff: noqa: F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "BM" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Kernels of the sub-tile tests (``test_frontend_subtiles.py``), loaded by path from the conftest."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32, i32


@tile.function
def sum_sq(px, bm, count, BM, BN):
    acc = tile.zeros((BM, BN), f32)
    for j in range(count):
        t = px.load((bm, j)).astype(f32)
        acc = acc + t * t
    return tile.sum(acc, axis=1, keepdims=True)


@tile.entry
def rmsnorm_chunked(
    z: Mut[Tensor["T", ("BM", "NT")]], x: Tensor["T", (-1, -1)], w: Tensor["T", -1], eps: f32, BN: Const[int]
):
    """Each block owns rows (BM, NT) of z; it reads and writes them in (BM, BN) chunks."""
    bm = tile.block_id()[0]
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    pw = w.partition((BN,), padding="zero")
    n = x.extents[1].astype(f32)
    r = tile.rsqrt(sum_sq(px, bm, zs.num_tiles[1], BM, BN) / n + eps)
    for j in range(zs.num_tiles[1]):
        t = px.load((bm, j)).astype(f32) * r * pw.load((j,)).astype(f32).reshape((1, BN))
        zs.store(t.astype(z.dtype), (0, j))


@tile.entry
def store_then_read_back(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], SM: Const[int], SN: Const[int]):
    """Copy x in (SM, SN) pieces, then read each piece back, double it and store it again (2-D sub-tile grid)."""
    bm, bn, _ = tile.block_id()
    zs = z.subtiles((SM, SN))
    px = x.partition((SM, SN), padding="zero")
    ri, rj = BM // SM, BN // SN
    for i in range(zs.num_tiles[0]):
        for j in range(zs.num_tiles[1]):
            zs.store(px.load((bm * ri + i, bn * rj + j)), (i, j))
    for i in range(zs.num_tiles[0]):
        for j in range(zs.num_tiles[1]):
            zs.store(zs.load((i, j)) * 2.0, (i, j))


@tile.entry
def walked_subtiles(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], SN: Const[int]):
    """z.tiles() hands this block whole tiles; each is stored in (BM, SN) pieces at the tile's own sub-tiles."""
    for idx in z.tiles():
        m, n = idx
        zs = z.subtiles((BM, SN), at=idx)
        px = x.partition((BM, SN), padding="zero")
        for j in range(zs.num_tiles[1]):
            zs.store(px.load((m, n * (BN // SN) + j)) + 1.0, (0, j))


@tile.entry
def constant_bound_loop(z: Mut[Tensor[f32, ("BM", "BN")]], SN: Const[int]):
    """A loop to the constant sub-tile count: the indices are checked in the kernel (and pass)."""
    zs = z.subtiles((BM, SN))
    for j in range(BN // SN):
        zs.store(tile.zeros((BM, SN), f32) + (j + 1).astype(f32), (0, j))


@tile.entry
def at_runtime_index(z: Mut[Tensor[f32, ("BM", "BN")]], j: i32, SN: Const[int]):
    """Sub-tile j (a run-time scalar) of each owned tile; zeros elsewhere."""
    z.store(tile.zeros((BM, BN), f32))
    zs = z.subtiles((BM, SN))
    zs.store(tile.full((BM, SN), 5.0, f32), (0, j))


@tile.entry
def at_constant_index(z: Mut[Tensor[f32, ("BM", "BN")]], SN: Const[int], J: Const[int]):
    z.store(tile.zeros((BM, BN), f32))
    zs = z.subtiles((BM, SN))
    zs.store(tile.full((BM, SN), 5.0, f32), (0, J))


@tile.entry
def at_neighbours_subtile(z: Mut[Tensor[f32, ("BM", "BN")]], SM: Const[int]):
    """Block 0 names sub-tile row BM // SM, the first of block 1's tile; block 1 its own first sub-tile."""
    zs = z.subtiles((SM, BN))
    zs.store(tile.full((SM, BN), 1.0, f32), ((1 - tile.block_id()[0]) * (BM // SM), 0))  # NEIGHBOUR


@tile.entry(unchecked=True)
def at_neighbours_subtile_unchecked(z: Mut[Tensor[f32, ("BM", "BN")]], SM: Const[int]):
    """The same with every check off: blocks 0 and 1 both write block 1's first sub-tile (a race)."""
    zs = z.subtiles((SM, BN))
    zs.store(tile.full((SM, BN), 1.0, f32), ((1 - tile.block_id()[0]) * (BM // SM), 0))


@tile.entry(unchecked=True)
def rmsnorm_chunked_unchecked(
    z: Mut[Tensor["T", ("BM", "NT")]], x: Tensor["T", (-1, -1)], w: Tensor["T", -1], eps: f32, BN: Const[int]
):
    bm = tile.block_id()[0]
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    pw = w.partition((BN,), padding="zero")
    n = x.extents[1].astype(f32)
    r = tile.rsqrt(sum_sq(px, bm, zs.num_tiles[1], BM, BN) / n + eps)
    for j in range(zs.num_tiles[1]):
        t = px.load((bm, j)).astype(f32) * r * pw.load((j,)).astype(f32).reshape((1, BN))
        zs.store(t.astype(z.dtype), (0, j))


# -- misuse: each is a compile error ----------------------------------------------------------------------------


@tile.entry
def sub_larger_than_tile(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, 2 * BN))  # SUB-LARGER
    zs.store(tile.zeros((BM, 2 * BN), f32), (0, 0))


@tile.entry
def sub_wrong_rank(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM,))  # SUB-RANK
    zs.store(tile.zeros((BM,), f32), (0,))


@tile.entry
def sub_not_pow2(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, 3))  # SUB-POW2
    zs.store(tile.zeros((BM, 3), f32), (0, 0))


@tile.entry
def subtiles_of_input(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    xs = x.subtiles((BM, BN))  # SUB-INPUT
    z.store(xs.load((0, 0)))


@tile.entry
def subtiles_then_walk(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, BN))
    zs.store(tile.zeros((BM, BN), f32), (0, 0))
    for idx in z.tiles():  # SUB-SCHEME
        z.store(tile.zeros((BM, BN), f32), at=idx)


@tile.entry
def subtiles_at_other_outputs_tile(z: Mut[Tensor[f32, ("BM", "BN")]], w: Mut[Tensor[f32, ("BM", "BN")]]):
    for idx in w.tiles():
        w.store(tile.zeros((BM, BN), f32), at=idx)
        zs = z.subtiles((BM, BN), at=idx)  # SUB-OTHER-AT
        zs.store(tile.zeros((BM, BN), f32), (0, 0))


@tile.entry
def sub_store_wrong_dtype(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, BN))
    zs.store(tile.zeros((BM, BN), i32), (0, 0))  # SUB-DTYPE


@tile.entry
def sub_store_wrong_shape(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, BN // 2))
    zs.store(tile.zeros((BM, BN), f32), (0, 0))  # SUB-SHAPE


@tile.entry
def sub_index_arity(z: Mut[Tensor[f32, ("BM", "BN")]]):
    zs = z.subtiles((BM, BN // 2))
    zs.store(tile.zeros((BM, BN // 2), f32), (0,))  # SUB-ARITY
