# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Forms the performance passes rewrite: products fused into ``fma`` (``_contract``) and stores left unordered
across loop iterations (``_store_scope``), plus the near misses each pass must leave alone. The cases' numerics run
on the interpreter and the GPU tier like every corpus case; ``test_compiler_perf_forms`` pins the emitted forms."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f32, i32


def madd(z: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1], b: Tensor[f32, -1], c: Tensor[f32, -1]):
    z.store(tile.load_tile_like(a, z) * tile.load_tile_like(b, z) + tile.load_tile_like(c, z))


def msub_both(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1], s: f32, m: Tensor[f32, -1]):
    x, mm = tile.load_tile_like(a, z), tile.load_tile_like(m, z)
    z.store(x * s - mm)  # fma(x, s, -m)
    w.store(mm - x * s)  # fma(-x, s, m)


def product_used_twice(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1], c: Tensor[f32, -1]):
    p = tile.load_tile_like(a, z) * 3.0
    z.store(p + tile.load_tile_like(c, z))
    w.store(p)


def modes_differ(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], v: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1]):
    x = tile.load_tile_like(a, z)
    z.store(tile.add(x * x, 1.0, rounding="zero"))  # a directed rounding: two exact steps
    w.store(tile.mul(x, x, flush_to_zero=True) + 1.0)  # the product flushes, the sum does not
    v.store(tile.add(tile.mul(x, x, flush_to_zero=True), 1.0, flush_to_zero=True))  # both flush: fused, flushing


def product_outside_loop(z: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1], N: Const[int]):
    p = tile.load_tile_like(a, z) * 2.0
    acc = tile.zeros((B,), f32)
    for _ in range(N):
        acc = acc + p  # the product stays outside the loop
    z.store(acc)


def chunks_stored(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    for j in range(zs.num_tiles[1]):
        zs.store(px.load((bm, j)) * 2.0, (0, j))


@unchecked
def chunks_stored_unchecked(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    for j in range(zs.num_tiles[1]):
        zs.store(px.load((bm, j)) * 2.0, (0, j))


def chunks_reversed(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    n = zs.num_tiles[1]
    for j in range(n):
        zs.store(px.load((bm, n - 1 - j)) * 2.0, (0, n - 1 - j))  # distinct, but not the loop variable itself


@unchecked
def chunks_stepped_unchecked(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], step: i32, BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    for j in range(0, zs.num_tiles[1], step):  # a run-time step: the variable is not known not to wrap
        zs.store(px.load((bm, j)) * 2.0, (0, j))


def walked_stores(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    px = x.partition((BM, BN), padding="zero")
    for idx in z.tiles():
        m, n = idx
        z.store(px.load((m, n)) + 1.0, at=idx)


def chunks_stored_twice(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    for j in range(zs.num_tiles[1]):
        zs.store(px.load((bm, j)), (0, j))
        zs.store(zs.load((0, j)) * 2.0, (0, j))  # reads this iteration's store back: stays ordered


def chunk_read_then_stored(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((BM, BN))
    px = x.partition((BM, BN), padding="zero")
    bm = tile.block_id()[0]
    zs.store(px.load((bm, 0)), (0, 0))
    for j in range(zs.num_tiles[1]):
        zs.store(zs.load((0, 0)) + px.load((bm, j)), (0, j))  # the read of chunk 0 precedes the store of chunk 0


def own_tile_stored_each_iteration(z: Mut[Tensor[f32, "B"]], a: Tensor[f32, -1], N: Const[int]):
    x = tile.load_tile_like(a, z)
    for i in range(N):
        z.store(x + i.astype(f32))  # one tile, every iteration: the last store must win


def _read_back(a):
    x = a["x"].astype(np.float64)
    first = 2 * x[:, :32]  # iteration 0 stores chunk 0 + x's chunk 0 over chunk 0
    return {"z": np.concatenate([first, x[:, 32:] + np.tile(first, 3)[:, : 100 - 32]], axis=1)}


def _chunks(a):
    return {"z": a["x"] * 2}


CASES = [
    Case(
        madd,
        {"B": 16},
        lambda r: {"z": poison((40,)), "a": rand(r, (40,)), "b": rand(r, (40,)), "c": rand(r, (40,))},
        lambda a: {"z": a["a"].astype(np.float64) * a["b"] + a["c"]},
    ),
    Case(
        msub_both,
        {"B": 16},
        lambda r: {"z": poison((40,)), "w": poison((40,)), "a": rand(r, (40,)), "s": 0.75, "m": rand(r, (40,))},
        lambda a: {"z": a["a"].astype(np.float64) * a["s"] - a["m"], "w": a["m"] - a["a"].astype(np.float64) * a["s"]},
    ),
    Case(
        product_used_twice,
        {"B": 16},
        lambda r: {"z": poison((40,)), "w": poison((40,)), "a": rand(r, (40,)), "c": rand(r, (40,))},
        lambda a: {"z": a["a"].astype(np.float64) * 3 + a["c"], "w": a["a"].astype(np.float64) * 3},
    ),
    Case(
        modes_differ,
        {"B": 16},
        lambda r: {"z": poison((40,)), "w": poison((40,)), "v": poison((40,)), "a": rand(r, (40,))},
        lambda a: {k: a["a"].astype(np.float64) ** 2 + 1 for k in ("z", "w", "v")},
    ),
    Case(
        product_outside_loop,
        {"B": 16, "N": 3},
        lambda r: {"z": poison((40,)), "a": rand(r, (40,))},
        lambda a: {"z": a["a"].astype(np.float64) * 6},
    ),
    Case(
        chunks_stored,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100))},
        _chunks,
    ),
    Case(
        chunks_stored_unchecked,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100))},
        _chunks,
    ),
    Case(
        chunks_reversed,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100))},
        _chunks,
    ),
    Case(
        chunks_stepped_unchecked,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100)), "step": 1},
        _chunks,
    ),
    Case(
        walked_stores,
        {"BM": 8, "BN": 16},
        lambda r: {"z": poison((20, 40)), "x": rand(r, (20, 40))},
        lambda a: {"z": a["x"] + 1},
    ),
    Case(
        chunks_stored_twice,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100))},
        _chunks,
    ),
    Case(
        chunk_read_then_stored,
        {"BM": 4, "NT": 128, "BN": 32},
        lambda r: {"z": poison((10, 100)), "x": rand(r, (10, 100))},
        _read_back,
    ),
    Case(
        own_tile_stored_each_iteration,
        {"B": 16, "N": 3},
        lambda r: {"z": poison((40,)), "a": rand(r, (40,))},
        lambda a: {"z": a["a"] + 2},
    ),
]
