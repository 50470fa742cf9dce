# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Sub-tiles of a block's own output tile (``z.subtiles``): a chunked rmsnorm with edge tiles in both dims, a 2-D
sub-tile grid stored and read back, sub-tiles of walked tiles, and run-time / constant sub-tile indices."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f16, f32, i32


@tile.function
def rms_rows(z, x, eps, BM, BN):
    bm = tile.block_id()[0]
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for j in range(zs.num_tiles[1]):
        t = px.load((bm, j)).astype(f32)
        acc = acc + t * t
    r = tile.rsqrt(tile.sum(acc, axis=1, keepdims=True) / x.extents[1].astype(f32) + eps)
    for j in range(zs.num_tiles[1]):
        zs.store((px.load((bm, j)).astype(f32) * r).astype(z.dtype), (0, j))


def rmsnorm_chunked(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], eps: f32, BN: Const[int]):
    rms_rows(z, x, eps, BM, BN)


def rmsnorm_chunked_f16(z: Mut[Tensor[f16, ("BM", "NT")]], x: Tensor[f16, (-1, -1)], eps: f32, BN: Const[int]):
    rms_rows(z, x, eps, BM, BN)


@unchecked
def rmsnorm_chunked_unchecked(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], eps: f32, BN: Const[int]):
    rms_rows(z, x, eps, BM, BN)


def subtile_grid_readback(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], SM: Const[int], SN: Const[int]):
    bm, bn, _ = tile.block_id()
    zs = z.subtiles((SM, SN))
    px = x.partition((SM, SN), padding="zero")
    for i in range(zs.num_tiles[0]):
        for j in range(zs.num_tiles[1]):
            zs.store(px.load((bm * (BM // SM) + i, bn * (BN // SN) + j)), (i, j))
    for i in range(zs.num_tiles[0]):
        for j in range(zs.num_tiles[1]):
            zs.store(zs.load((i, j)) * 2.0, (i, j))


def walked_subtiles(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], SN: Const[int]):
    for idx in z.tiles():
        m, n = idx
        zs = z.subtiles((BM, SN), at=idx)
        px = x.partition((BM, SN), padding="zero")
        for j in range(zs.num_tiles[1]):
            zs.store(px.load((m, n * (BN // SN) + j)) + 1.0, (0, j))


def subtile_at_scalar(z: Mut[Tensor[f32, ("BM", "BN")]], j: i32, SN: Const[int]):
    z.store(tile.zeros((BM, BN), f32))
    zs = z.subtiles((BM, SN))
    zs.store(tile.full((BM, SN), 5.0, f32), (0, j))
    zs.store(zs.load((0, 1)) + 3.0, (0, 1))


def _rms(a, eps=1e-5):
    x = a["x"].astype(np.float64)
    return {"z": (x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)).astype(a["x"].dtype)}


def _at_scalar(a):
    z = np.zeros(a["z"].shape, np.float32)
    for c in range(0, z.shape[1], 32):
        z[:, c + 16 : c + 24] = 5.0
        z[:, c + 8 : c + 16] += 3.0
    return {"z": z}


CASES = [
    Case(
        rmsnorm_chunked,
        {"BM": 8, "NT": 256, "BN": 64},
        lambda r: {"x": rand(r, (37, 200)), "z": poison((37, 200)), "eps": 1e-5},
        _rms,
    ),
    Case(
        rmsnorm_chunked_f16,
        {"BM": 4, "NT": 512, "BN": 128},
        lambda r: {"x": rand(r, (30, 400), "float16"), "z": poison((30, 400), "float16"), "eps": 1e-5},
        _rms,
        tol=Tol(k=400),
    ),
    Case(
        rmsnorm_chunked_unchecked,
        {"BM": 8, "NT": 256, "BN": 64},
        lambda r: {"x": rand(r, (37, 200)), "z": poison((37, 200)), "eps": 1e-5},
        _rms,
    ),
    Case(
        subtile_grid_readback,
        {"BM": 16, "BN": 32, "SM": 4, "SN": 8},
        lambda r: {"x": rand(r, (50, 41)), "z": poison((50, 41))},
        lambda a: {"z": a["x"] * 2},
    ),
    Case(
        walked_subtiles,
        {"BM": 16, "BN": 32, "SN": 8},
        lambda r: {"x": rand(r, (40, 70)), "z": poison((40, 70))},
        lambda a: {"z": a["x"] + 1},
    ),
    Case(
        subtile_at_scalar,
        {"BM": 8, "BN": 32, "SN": 8},
        lambda r: {"z": poison((8, 64)), "j": 2},
        _at_scalar,
    ),
]
