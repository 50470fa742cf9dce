# mypy: ignore-errors
# ruff: noqa: F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "BM" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Kernels with tuple parameters (loaded by path from the conftest): grouped GEMMs and their misuses."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f16, f32


@tile.entry
def grouped_gemm(
    Cs: tuple[Mut[Tensor[f32, ("BM", "BN")]], ...],
    As: tuple[Tensor[f16, (-1, -1)], ...],
    Bs: tuple[Tensor[f16, (-1, -1)], ...],
    BK: Const[int],
):
    # Persistent, as cuTile Python's sample: each block walks its share of every group's output tiles.
    for g in range(len(Cs)):
        pa = As[g].partition((BM, BK), padding="zero")
        pb = Bs[g].partition((BK, BN), padding="zero")
        for idx in Cs[g].tiles():
            acc = tile.zeros((BM, BN), f32)
            for k in range(pa.num_tiles[1]):
                acc = tile.mma(pa.load((idx[0], k)), pb.load((k, idx[1])), acc)
            Cs[g].store(acc, at=idx)


@tile.entry
def grouped_scale(outs: tuple[Mut[Tensor[f32, "B"]], ...], xs: tuple[Tensor[f32, -1], ...], s: f32):
    # Each group's own-tile store: the groups' grids must agree (one block per tile of each).
    for g in range(len(outs)):
        outs[g].store(tile.load_tile_like(xs[g], outs[g]) * s)


@tile.entry
def sum_all(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...]):
    acc = tile.zeros((B,), f32)
    for x in xs:  # iterating a tuple unrolls too
        acc = acc + tile.load_tile_like(x, z)
    z.store(acc)


@tile.entry
def first_plus_last(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...]):
    z.store(tile.load_tile_like(xs[0], z) + tile.load_tile_like(xs[-1], z) * len(xs))


@tile.entry
def runtime_index(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...], i: int):
    z.store(tile.load_tile_like(xs[i], z))  # runtime-index


@tile.entry
def runtime_range(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...], n: int):
    acc = tile.load_tile_like(xs[0], z)
    for g in range(n):  # runtime-range
        acc = acc + tile.load_tile_like(xs[g], z)
    z.store(acc)


@tile.entry
def break_in_unrolled(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...]):
    acc = tile.load_tile_like(xs[0], z)
    for g in range(len(xs)):  # break-unrolled
        acc = acc + tile.load_tile_like(xs[g], z)
        break
    z.store(acc)


@tile.entry
def store_to_input(z: Mut[Tensor[f32, "B"]], xs: tuple[Tensor[f32, -1], ...]):
    xs[0].store(tile.load_tile_like(xs[1], z))  # store-input
