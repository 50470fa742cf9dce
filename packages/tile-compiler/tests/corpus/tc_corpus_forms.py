# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Forms the ports of peer kernels need: an atomic in a ``while`` condition (a spin lock), dtype comparisons with
``==``, batch-broadcast matmul, multi-tile ``tile.reduce`` (arg-min with ties) and tuples carried through loops."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked

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


CASES = [
    Case(
        batch_broadcast_matmul,
        {"BB": 2, "F": 16, "X": 32},
        lambda r: {"w": rand(r, (16, 16), "float16"), "x": rand(r, (4, 16, 32), "float16"), "z": poison((4, 16, 32))},
        lambda a: {"z": 2 * np.matmul(a["w"].astype("float64"), a["x"].astype("float64")) + 1.0},
        rtol=2e-2,
        atol=2e-2,
    ),
    Case(
        dtype_dispatch,
        {"B": 128},
        lambda r: {"x": rand(r, (N,), "float16"), "z": poison((N,))},
        lambda a: {"z": a["x"].astype("float64") + 1.0},
        rtol=1e-3,
        atol=1e-3,
    ),
    Case(
        spin_lock_sum,
        {"B": 128},
        lambda r: {"lock": np.zeros(1, "int32"), "total": np.zeros(1, "float32"), "x": r.uniform(-1, 1, N).astype("float32")},
        lambda a: {"lock": np.zeros(1, "int32"), "total": np.array([a["x"].astype("float64").sum()])},
        grid=lambda a: (N // 128,),
        rtol=1e-4,
        atol=1e-4,
    ),
]
