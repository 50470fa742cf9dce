# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Memory: output load/store in place, load hints, gather/scatter and atomics through pointers (unchecked kernels),
device print and assert."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f32, i32

N = 1024
M2 = (64, 128)


def inplace_scale(z: Mut[Tensor[f32, "B"]], s: float):
    z.store(z.load() * s)


def hinted_loads(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    bm, bn, _ = tile.block_id()
    t = x.partition((BM, BN)).load((bm, bn), latency=2, allow_tma=True)
    z.store(t + 1.0, latency=3)


@unchecked
def gather(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], idx: Tensor[i32, -1]):
    i = tile.load_tile_like(idx, z)
    z.store(tile.gather(x.ptr() + i, mask=i < x.shape[0], padding=0.0))


@unchecked
def scatter_reverse(out: Tensor[f32, -1], x: Tensor[f32, -1], B: Const[int]):
    bid = tile.block_id()[0]
    t = x.partition((B,)).load((bid,))
    pos = x.shape[0] - 1 - (bid * B + tile.arange(B))
    tile.scatter(out.ptr() + pos, t, mask=pos >= 0)


@unchecked
def histogram(hist: Tensor[i32, -1], x: Tensor[i32, -1], B: Const[int]):
    t = x.partition((B,)).load((tile.block_id()[0],))
    tile.atomic_add(hist.ptr() + t, 1)


@unchecked
def atomic_flags(flags: Tensor[i32, -1]):
    bid = tile.block_id()[0]
    tile.atomic_cas(flags.ptr(), 0, 1)
    tile.atomic_max(flags.ptr() + 1, bid)
    tile.atomic_min(flags.ptr() + 2, bid)
    tile.atomic_xchg(flags.ptr() + 3, 7)
    tile.atomic_or(flags.ptr() + 4, 1 << bid)
    tile.atomic_and(flags.ptr() + 5, ~(1 << bid))
    tile.atomic_xor(flags.ptr() + 6, 1)


@unchecked
def count_between_stores(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], count: Tensor[i32, -1]):
    # The atomic joins z's token chain with the pointer chain (release) and both continue from it (acquire).
    z.store(tile.load_tile_like(x, z))
    tile.atomic_add(count.ptr() + tile.arange(1), 1)
    z.store(z.load() * 2.0)


def debug_print(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    bid = tile.block_id()[0]
    if bid == 0:
        tile.print("block", bid, "sum", tile.sum(t))
        tile.printf("first=%f\n", tile.max(t))
    z.store(t)


def checked_assert(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    tile.assert_(tile.min(t) >= -1.0, "input below -1")
    z.store(t)


def read_modify_write(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], rounds: int):
    for _ in range(rounds):
        z.store(z.load() + tile.load_tile_like(x, z))


def _flags_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"flags": np.array([1, 7, 0, 7, 255, 0x7FFFFF00, 0], "int32")}


CASES = [
    Case(inplace_scale, {"B": 128}, lambda r: {"z": rand(r, (N,)), "s": 3.0}, lambda a: {"z": a["z"] * 3}),
    Case(
        hinted_loads, {"BM": 16, "BN": 64}, lambda r: {"x": rand(r, M2), "z": poison(M2)}, lambda a: {"z": a["x"] + 1}
    ),
    Case(
        gather,
        {"B": 128},
        lambda r: {"x": rand(r, (N,)), "idx": r.integers(0, N, N).astype("int32"), "z": poison((N,))},
        lambda a: {"z": a["x"][a["idx"]]},
    ),
    Case(
        scatter_reverse,
        {"B": 128},
        lambda r: {"x": rand(r, (N,)), "out": poison((N,))},
        lambda a: {"out": a["x"][::-1]},
        grid=lambda a: (N // 128,),
    ),
    Case(
        histogram,
        {"B": 128},
        lambda r: {"x": r.integers(0, 16, N).astype("int32"), "hist": np.zeros(16, "int32")},
        lambda a: {"hist": np.bincount(a["x"], minlength=16).astype("int32")},
        grid=lambda a: (N // 128,),
    ),
    Case(
        atomic_flags,
        {},
        lambda r: {"flags": np.array([0, 0, 0, 0, 0, 0x7FFFFFFF, 0], "int32")},
        _flags_ref,
        grid=lambda a: (8,),
    ),
    Case(
        count_between_stores,
        {"B": 128},
        lambda r: {"x": rand(r, (N,)), "z": poison((N,)), "count": np.zeros(1, "int32")},
        lambda a: {"z": a["x"] * 2, "count": np.array([N // 128], "int32")},
    ),
    Case(debug_print, {"B": 128}, lambda r: {"x": rand(r, (N,)), "z": poison((N,))}, lambda a: {"z": a["x"]}),
    Case(checked_assert, {"B": 128}, lambda r: {"x": rand(r, (N,)), "z": poison((N,))}, lambda a: {"z": a["x"]}),
    Case(
        read_modify_write,
        {"B": 128},
        lambda r: {"x": rand(r, (N,)), "z": rand(r, (N,)), "rounds": 3},
        lambda a: {"z": a["z"] + 3 * a["x"]},
        tol=Tol(k=3),
    ),
]
