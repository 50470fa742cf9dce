# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Factories and shape ops: iota, full, reshape, transpose/permute, expand_dims, broadcast_to, cat, extract."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f32, i32

N = 1024
M2 = (64, 128)


def iota_fill(z: Mut[Tensor[i32, "B"]]):
    bid = tile.block_id()[0]
    z.store(tile.arange(B) + bid * B)


def full_fill(z: Mut[Tensor[f32, "B"]], v: float):
    z.store(tile.full((B,), v) + tile.ones((B,)))


def reshape_roundtrip(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    bm, bn, _ = tile.block_id()
    t = x.partition((BM, BN)).load((bm, bn))
    z.store(t.reshape((BM * BN,)).reshape((BM, BN)) * 2.0)


def transpose(z: Mut[Tensor[f32, ("BN", "BM")]], x: Tensor[f32, (-1, -1)]):
    bn, bm, _ = tile.block_id()
    t = x.partition((BM, BN)).load((bm, bn))
    z.store(t.T)


def transpose_fn(z: Mut[Tensor[f32, ("BN", "BM")]], x: Tensor[f32, (-1, -1)]):
    bn, bm, _ = tile.block_id()
    z.store(tile.transpose(x.partition((BM, BN)).load((bm, bn))))


def permute3(z: Mut[Tensor[f32, ("BN", "BM")]], x: Tensor[f32, (-1, -1)]):
    bn, bm, _ = tile.block_id()
    t = tile.expand_dims(x.partition((BM, BN)).load((bm, bn)), 0)
    z.store(tile.permute(t, (2, 0, 1)).reshape((BN, BM)))


def scale_columns(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], c: Tensor[f32, -1]):
    bm, bn, _ = tile.block_id()
    t = x.partition((BM, BN)).load((bm, bn))
    col = c.partition((BM,)).load((bm,))
    z.store(t * tile.broadcast_to(col.reshape((BM, 1)), (BM, BN)))


def cat_halves(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    bid = tile.block_id()[0]
    h = B // 2
    z.store(tile.cat(x.partition((h,)).load((bid,)), y.partition((h,)).load((bid,)), 0))


def extract_second_quarter(z: Mut[Tensor[f32, "Q"]], x: Tensor[f32, -1]):
    bid = tile.block_id()[0]
    t = x.partition((4 * Q,)).load((bid,))
    z.store(tile.extract(t, (1,), (Q,)))


def _cat_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    h = 64
    blocks = [np.concatenate([a["x"][i * h : (i + 1) * h], a["y"][i * h : (i + 1) * h]]) for i in range(N // 128)]
    return {"z": np.concatenate(blocks)}


def _extract_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    q = 32
    return {"z": np.concatenate([a["x"][i * 4 * q + q : i * 4 * q + 2 * q] for i in range(len(a["z"]) // q)])}


CASES = [
    Case(
        transpose_fn,
        {"BM": 32, "BN": 16},
        lambda r: {"x": rand(r, M2), "z": poison(M2[::-1])},
        lambda a: {"z": a["x"].T},
    ),
    Case(iota_fill, {"B": 128}, lambda r: {"z": poison((N,), "int32")}, lambda a: {"z": np.arange(N, dtype="int32")}),
    Case(full_fill, {"B": 256}, lambda r: {"z": poison((N,)), "v": 2.5}, lambda a: {"z": np.full(N, 3.5, "float32")}),
    Case(
        reshape_roundtrip,
        {"BM": 16, "BN": 32},
        lambda r: {"x": rand(r, M2), "z": poison(M2)},
        lambda a: {"z": a["x"] * 2},
    ),
    Case(
        transpose, {"BM": 32, "BN": 16}, lambda r: {"x": rand(r, M2), "z": poison(M2[::-1])}, lambda a: {"z": a["x"].T}
    ),
    Case(
        permute3, {"BM": 16, "BN": 32}, lambda r: {"x": rand(r, M2), "z": poison(M2[::-1])}, lambda a: {"z": a["x"].T}
    ),
    Case(
        scale_columns,
        {"BM": 16, "BN": 64},
        lambda r: {"x": rand(r, M2), "c": rand(r, (M2[0],)), "z": poison(M2)},
        lambda a: {"z": a["x"] * a["c"][:, None]},
    ),
    Case(
        cat_halves,
        {"B": 128},
        lambda r: {"x": rand(r, (N // 2,)), "y": rand(r, (N // 2,)), "z": poison((N,))},
        _cat_ref,
    ),
    Case(extract_second_quarter, {"Q": 32}, lambda r: {"x": rand(r, (N,)), "z": poison((N // 4,))}, _extract_ref),
]
