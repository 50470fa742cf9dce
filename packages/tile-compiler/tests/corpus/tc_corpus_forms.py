# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Forms the ports of peer kernels need: an atomic in a ``while`` condition (a spin lock), dtype comparisons with
``==``, batch-broadcast matmul, multi-tile ``tile.reduce`` (arg-min with ties), tuples carried through loops and
Python ``math`` functions of constants (folded at compile time)."""

from __future__ import annotations

import math

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, bf16, f16, f32, i32

N = 1024


@unchecked
def spin_lock_sum(lock: Tensor[i32, -1], total: Tensor[f32, -1], x: Tensor[f32, -1], B: Const[int]):
    # Every block adds its tile's sum to total[0] under a lock taken by the atomic in the loop condition: the
    # read-modify-write below must stay after the acquire, and the release after it.
    s = tile.sum(x.partition((B,)).load((tile.block_id()[0],)))
    while tile.atomic_cas(lock.ptr(), 0, 1) == 1:
        pass
    t = total.ptr()
    tile.scatter(t, tile.gather(t) + s)
    tile.atomic_xchg(lock.ptr(), 0)


def dtype_dispatch(z: Mut[Tensor[f32, "B"]], x: Tensor[f16, -1]):
    # dtype comparisons fold at compile time: only the branch for f16 inputs is compiled.
    t = tile.load_tile_like(x, z)
    if x.dtype == f32:
        z.store(t * 2.0)
    elif x.dtype in (f16, bf16) and z.dtype != f16:
        z.store(t.astype(f32) + 1.0)
    else:
        tile.static_assert(False, "unreachable for f16 inputs")


def generic_dtype_branch(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1]):
    t = tile.load_tile_like(x, z)
    if t.dtype == f32:
        z.store(tile.exp(t))
    else:
        z.store(-t)


def batch_broadcast_matmul(
    z: Mut[Tensor[f32, ("BB", "F", "X")]], w: Tensor[f16, (-1, -1)], x: Tensor[f16, (-1, -1, -1)]
):
    # One (F, F) weight against a batch of (F, X) tiles: (1, F, F) @ (BB, F, X) broadcasts the batch like NumPy,
    # and so does a 2-D operand of tile.mma into a batched accumulator.
    wt = w.partition((F, F)).load((0, 0))
    xt = tile.load_tile_like(x, z)
    once = tile.reshape(wt, (1, F, F)) @ xt
    twice = tile.mma(wt, xt, tile.full((BB, F, X), 1.0, f32))
    z.store(once.astype(f32) + twice)


def tuple_carried(
    best: Mut[Tensor[f32, "BM"]], where: Mut[Tensor[i32, "BM"]], x: Tensor[f32, (-1, -1)], BN: Const[int]
):
    # Tuples carried through a for loop (a running (min, argmin) per row), a while loop whose body picks the next
    # tuple in an if, and a for loop left with break.
    bm = tile.block_id()[0]
    px = x.partition((BM, BN))
    state = (tile.full((BM,), 3.0e38, f32), tile.zeros((BM,), i32))
    for j in range(px.num_tiles[1]):
        t = px.load((bm, j))
        m, a = tile.min(t, axis=1), tile.argmin(t, axis=1) + j * BN
        v, i = state
        state = (tile.where(m < v, m, v), tile.where(m < v, a, i))
    ns = (bm + 1, 0)
    while ns[0] > 1:
        if ns[0] % 2 == 1:
            ns = (ns[0] // 2, ns[1] + 2)
        else:
            ns = (ns[0] // 2, ns[1] + 1)
    acc = (0, 0.0)
    for k in range(10):
        if k == 3:
            break
        acc = (acc[0] + k, acc[1] + 1.0)
    best.store(state[0] + (acc[1] - 3.0))
    where.store(state[1] + 1000 * ns[1] + 10000 * acc[0])


def _tuple_carried_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, bm = a["x"], 16
    steps = []
    for row in range(x.shape[0]):
        n, s = row // bm + 1, 0
        while n > 1:
            s, n = s + (2 if n % 2 else 1), n // 2
        steps.append(s)
    where = np.argmin(x, axis=1) + 1000 * np.array(steps) + 10000 * 3
    return {"best": x.min(axis=1), "where": where.astype("int32")}


@tile.function
def first_min(e, acc):
    # Associative and commutative: on equal values the smaller index wins, whatever order the hardware combines in.
    (ev, ei), (av, ai) = e, acc
    take = (ev < av) | ((ev == av) & (ei < ai))
    return (tile.where(take, ev, av), tile.where(take, ei, ai))


@tile.function
def first_max(e, acc):
    (ev, ei), (av, ai) = e, acc
    take = (ev > av) | ((ev == av) & (ei < ai))
    return (tile.where(take, ev, av), tile.where(take, ei, ai))


def reduce_pairs(
    low: Mut[Tensor[f32, "BM"]],
    at: Mut[Tensor[i32, "BM"]],
    run: Mut[Tensor[i32, ("BM", "N")]],
    x: Tensor[f32, (-1, -1)],
):
    # Arg-min over a row with many ties (values come in steps of 0.5), and a running arg-max along the row: one
    # reduce/scan over (values, indices) with one combiner.
    t = tile.load_tile_like(x, run)
    v, i = tile.reduce((t, tile.arange(N)), axis=1, fn=first_min, identity=(3.0e38, 2**31 - 1))
    _, prefix = tile.scan((t, tile.arange(N)), axis=1, fn=first_max, identity=(-3.0e38, 2**31 - 1))
    low.store(v)
    at.store(i)
    run.store(prefix)


def _reduce_pairs_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = a["x"].astype("float64")
    prefix = np.array([[int(np.argmax(row[: j + 1])) for j in range(x.shape[1])] for row in x], "int32")
    return {"low": x.min(axis=1), "at": np.argmin(x, axis=1).astype("int32"), "run": prefix}


def gelu_math_constants(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    # A port's constants written as Python writes them: math.sqrt / math.log2 of constants fold to numbers.
    v = tile.load_tile_like(x, z)
    g = 0.5 * v * (1.0 + tile.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)))
    z.store(g + tile.exp2(v * math.log2(math.e)) * math.floor(0.5))  # math.floor folds to the int 0: the term is 0


def load_at_walked_index(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    # An input partition loads at the index a `z.tiles()` walk hands out, as it is (not unpacked first).
    px = x.partition((BM, BN), padding="zero")
    for idx in z.tiles():
        z.store(px.load(idx) * 2.0 + z.partition((BM, BN)).load(idx), at=idx)


def cat_spellings(z: Mut[Tensor[f32, (4, 16)]], x: Tensor[f32, (4, 4)]):
    # tile.cat(x, y, axis) and cuTile's tile.cat((x, y), axis), the axis by position or keyword.
    t = x.partition((4, 4)).load((0, 0))
    h = tile.cat((t, t * 2.0), 1)
    z.store(tile.cat((h, tile.cat(t, t + 1.0, 1)), axis=1))


def nan_maximum(z: Mut[Tensor[f32, (2, "B")]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    # maxf/minf give the non-NaN operand by default (numpy's fmax); propagate_nan=True gives NaN (numpy's maximum).
    b = tile.block_id()[0]
    tx, ty = x.partition((B,)).load((b,)), y.partition((B,)).load((b,))
    keep = tile.maximum(tx, ty) + tile.minimum(tx, ty, propagate_nan=False) * 0.0
    spread = tile.minimum(tx, ty, propagate_nan=True) + tile.maximum(tx, math.nan) * 0.0  # const NaN: folded away
    z.store(tile.cat(keep.reshape((1, B)), spread.reshape((1, B)), 0))


def nan_row_max(z: Mut[Tensor[f32, (4, 2)]], x: Tensor[f32, (4, 16)]):
    # A row reduction skips NaNs by default (numpy's nanmax); propagate_nan=True gives NaN (numpy's max).
    t = x.partition((4, 16)).load((0, 0))
    skip = tile.max(t, axis=1, keepdims=True) + t.min(1, True) * 0.0
    z.store(tile.cat(skip, tile.min(t, axis=1, keepdims=True, propagate_nan=True), 1))


def _nan_maximum_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = a["x"].astype("float64"), a["y"].astype("float64")
    return {"z": np.stack([np.fmax(x, y) + np.fmin(x, y) * 0.0, np.minimum(x, y) + x * 0.0])}


def _nan_inputs(r: np.random.Generator) -> dict[str, np.ndarray]:
    x, y = rand(r, (128,)), rand(r, (128,))
    x[::3], y[::5] = np.nan, np.nan
    return {"x": x, "y": y, "z": poison((2, 128))}


def _gelu_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    v = a["x"].astype("float64")
    return {"z": 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))}


CASES = [
    Case(nan_maximum, {"B": 128}, _nan_inputs, _nan_maximum_ref, tol=Tol()),
    Case(
        nan_row_max,
        {},
        lambda r: {"x": np.where(np.arange(64).reshape(4, 16) % 7 == 3, np.nan, rand(r, (4, 16))), "z": poison((4, 2))},
        lambda a: {"z": np.stack([np.nanmax(a["x"], 1), np.min(a["x"], 1)], 1).astype("float64")},
        tol=Tol(),
    ),
    Case(
        cat_spellings,
        {},
        lambda r: {"x": rand(r, (4, 4)), "z": poison((4, 16))},
        lambda a: {"z": np.concatenate([a["x"], 2 * a["x"], a["x"], a["x"] + 1.0], axis=1).astype("float64")},
        tol=Tol(),
    ),
    Case(
        load_at_walked_index,
        {"BM": 16, "BN": 16},
        lambda r: {"x": rand(r, (40, 72)), "z": np.ones((40, 72), "float32")},
        lambda a: {"z": 2 * a["x"].astype("float64") + 1.0},
        grid=lambda a: (5,),
        tol=Tol(),
    ),
    Case(
        gelu_math_constants,
        {"B": 128},
        lambda r: {"x": rand(r, (1000,)), "z": poison((1000,))},
        _gelu_ref,
        tol=Tol(k=8),
    ),
    Case(
        reduce_pairs,
        {"BM": 16, "N": 64},
        lambda r: {
            "x": (r.integers(-4, 4, (64, 64)) / 2).astype("float32"),
            "low": poison((64,)),
            "at": poison((64,), "int32"),
            "run": poison((64, 64), "int32"),
        },
        _reduce_pairs_ref,
    ),
    Case(
        tuple_carried,
        {"BM": 16, "BN": 32},
        lambda r: {"x": rand(r, (128, 256)), "best": poison((128,)), "where": poison((128,), "int32")},
        _tuple_carried_ref,
    ),
    Case(
        batch_broadcast_matmul,
        {"BB": 2, "F": 16, "X": 32},
        lambda r: {"w": rand(r, (16, 16), "float16"), "x": rand(r, (4, 16, 32), "float16"), "z": poison((4, 16, 32))},
        lambda a: {"z": 2 * np.matmul(a["w"].astype("float64"), a["x"].astype("float64")) + 1.0},
        tol=Tol(k=16, rounded="float16"),
    ),
    Case(
        dtype_dispatch,
        {"B": 128},
        lambda r: {"x": rand(r, (N,), "float16"), "z": poison((N,))},
        lambda a: {"z": a["x"].astype("float64") + 1.0},
        tol=Tol(),
    ),
    Case(
        spin_lock_sum,
        {"B": 128},
        lambda r: {
            "lock": np.zeros(1, "int32"),
            "total": np.zeros(1, "float32"),
            "x": r.uniform(-1, 1, N).astype("float32"),
        },
        lambda a: {"lock": np.zeros(1, "int32"), "total": np.array([a["x"].astype("float64").sum()])},
        grid=lambda a: (N // 128,),
        tol=Tol(k=N),
    ),
]
