# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Control flow: while, if/else on scalars, break, continue, early return, compile-time branches, stepped and
nested loops."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f32, i32

N = 1024
R, C = 64, 256


def while_halvings(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    n = tile.block_id()[0] + 1
    steps = 0
    while n > 1:
        n = n // 2
        steps += 1
    z.store(tile.load_tile_like(x, z) + steps)


def if_else_parity(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    if tile.block_id()[0] % 2 == 0:
        y = t * 2.0
    else:
        y = t - 1.0
    z.store(y)


def for_break(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, -1)], limit: float, BN: Const[int]):
    bm = tile.block_id()[0]
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM,), f32)
    for j in range(px.num_tiles[1]):
        acc = acc + tile.sum(px.load((bm, j)), axis=1)
        if tile.max(acc) > limit:
            break
    z.store(acc)


def for_continue(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    bm = tile.block_id()[0]
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM,), f32)
    for j in range(px.num_tiles[1]):
        if j % 2 == 1:
            continue
        acc = acc + tile.sum(px.load((bm, j)), axis=1)
    z.store(acc)


def early_return(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], active: int):
    if tile.block_id()[0] >= active:
        return
    z.store(tile.load_tile_like(x, z) * 3.0)


def static_branch(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], square: Const[bool]):
    t = tile.load_tile_like(x, z)
    if square:
        t = t * t
    else:
        t = -t
    z.store(t)


def stepped_loop(z: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    bm = tile.block_id()[0]
    px = x.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM,), f32)
    for j in range(1, px.num_tiles[1], 2):
        acc = acc + tile.sum(px.load((bm, j)), axis=1)
    z.store(acc)


def nested_loops(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], reps: int):
    t = tile.load_tile_like(x, z)
    acc = tile.zeros((B,), f32)
    for _ in range(reps):
        for j in range(4):
            acc = acc + t * (j + 1).astype(f32)
    z.store(acc)


def while_with_break(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1], cap: int):
    i = 0
    total = 0
    while True:
        i += 1
        if i > cap:
            break
        total = total + i
    z.store(tile.load_tile_like(x, z) * 0 + total)


def _tiles_until(a: dict[str, np.ndarray], bm: int, bn: int, stop: float | None, keep: object) -> np.ndarray:
    x = a["x"].astype("float64")
    out = np.zeros(x.shape[0])
    for r in range(0, x.shape[0], bm):
        acc = np.zeros(bm)
        for j in range(x.shape[1] // bn):
            if not keep(j):  # type: ignore[operator]  # a predicate
                continue
            acc = acc + x[r : r + bm, j * bn : (j + 1) * bn].sum(1)
            if stop is not None and acc.max() > stop:
                break
        out[r : r + bm] = acc
    return out


def _i(rng: np.random.Generator) -> dict[str, object]:
    return {"x": rng.integers(-100, 100, N).astype("int32"), "z": poison((N,), "int32")}


def _early_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    z = a["z"].copy()
    z[: a["active"] * 128] = a["x"][: a["active"] * 128] * 3
    return {"z": z}


def _parity_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    even = (np.arange(N) // 128) % 2 == 0
    return {"z": np.where(even, a["x"] * 2, a["x"] - 1)}


TILES = {"BM": 16, "BN": 32}
CASES = [
    Case(
        while_halvings,
        {"B": 128},
        _i,
        lambda a: {"z": a["x"] + np.floor(np.log2(np.arange(N) // 128 + 1)).astype("int32")},
    ),
    Case(if_else_parity, {"B": 128}, lambda r: {"x": rand(r, (N,)), "z": poison((N,))}, _parity_ref),
    Case(
        for_break,
        TILES,
        lambda r: {"x": rand(r, (R, C), lo=0, hi=1), "z": poison((R,)), "limit": 40.0},
        lambda a: {"z": _tiles_until(a, 16, 32, 40.0, lambda j: True)},
        tol=Tol(k=C),
    ),
    Case(
        for_continue,
        TILES,
        lambda r: {"x": rand(r, (R, C)), "z": poison((R,))},
        lambda a: {"z": _tiles_until(a, 16, 32, None, lambda j: j % 2 == 0)},
        tol=Tol(k=C),
    ),
    Case(early_return, {"B": 128}, lambda r: {"x": rand(r, (N,)), "z": poison((N,)), "active": 5}, _early_ref),
    Case(
        static_branch,
        {"B": 128, "square": True},
        lambda r: {"x": rand(r, (N,)), "z": poison((N,))},
        lambda a: {"z": a["x"] * a["x"]},
    ),
    Case(
        stepped_loop,
        TILES,
        lambda r: {"x": rand(r, (R, C)), "z": poison((R,))},
        lambda a: {"z": _tiles_until(a, 16, 32, None, lambda j: j % 2 == 1)},
        tol=Tol(k=C),
    ),
    Case(
        nested_loops,
        {"B": 128},
        lambda r: {"x": rand(r, (N,)), "z": poison((N,)), "reps": 3},
        lambda a: {"z": a["x"] * 30},
        tol=Tol(k=30),
    ),
    Case(while_with_break, {"B": 128}, lambda r: {**_i(r), "cap": 10}, lambda a: {"z": a["x"] * 0 + 55}),
]
