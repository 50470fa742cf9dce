# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Inlined ``@tile.function`` helpers (local and from another module), Const parameters of each kind, helpers with
run-time branches and early returns."""

from __future__ import annotations

import numpy as np
import tc_corpus_lib as lib
from tc_corpus_case import Case, poison, rand
from tc_corpus_lib import scaled_clamp
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f32

N = 1024


@tile.function
def pick(t, mode):
    if mode == 0:
        return t * 2.0
    return t + 1.0


@tile.function
def unit_scale(t, k):
    return lib.clamp(t * k, 0.0, 1.0)


def gelu_kernel(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(lib.gelu(tile.load_tile_like(x, z)))


def clamp_kernel(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], alpha: Const[float]):
    z.store(unit_scale(tile.load_tile_like(x, z), alpha) + scaled_clamp(tile.load_tile_like(x, z), s=4.0))


def branchy_helper(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], mode: int):
    z.store(pick(tile.load_tile_like(x, z), mode))


def const_params(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], reps: Const[int], bias: Const[float], neg: Const[bool]):
    t = tile.load_tile_like(x, z)
    for _ in range(reps):
        t = t + bias
    z.store(-t if neg else t)


def _gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype("float64")
    return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def _x(rng: np.random.Generator, **extra: object) -> dict[str, object]:
    return {"x": rand(rng, (N,), lo=-2, hi=2), "z": poison((N,)), **extra}


CASES = [
    Case(gelu_kernel, {"B": 128}, _x, lambda a: {"z": _gelu(a["x"])}, tol=Tol(rounded="approx")),
    Case(
        clamp_kernel,
        {"B": 128, "alpha": 0.5},
        _x,
        lambda a: {"z": np.clip(a["x"] * 0.5, 0, 1) + np.clip(a["x"] * 4, -1, 1)},
    ),
    Case(branchy_helper, {"B": 128}, lambda r: _x(r, mode=1), lambda a: {"z": a["x"] + 1}),
    Case(const_params, {"B": 128, "reps": 3, "bias": 0.25, "neg": True}, _x, lambda a: {"z": -(a["x"] + 0.75)}),
]
