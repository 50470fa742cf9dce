# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Elementwise kernels: arithmetic, math, comparisons/select, casts, integer and bitwise ops, broadcasting."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Mut, Tensor, f16, f32, i32

N = 1024
N2 = (64, 128)


def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tx = tile.load_tile_like(x, z)
    ty = tile.load_tile_like(y, z)
    z.store(tx + ty)


def axpy(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1], a: float):
    z.store(a * tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


def unary_math(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.exp(t) + tile.sin(t) * tile.cos(t) + tile.sqrt(tile.abs(t)) - tile.tanh(t) + tile.floor(t * 4.0))


def relu6(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.minimum(tile.maximum(t, 0.0), 6.0))


def leaky_select(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.where(t > 0.0, t, t * 0.125))


def cast_f16(z: Mut[Tensor[f16, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z).astype(f16))


def int_arith(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1], y: Tensor[i32, -1]):
    a = tile.load_tile_like(x, z)
    b = tile.load_tile_like(y, z)
    z.store((a * 3 + b) // 4 - (a >> 1) + (b << 2) + tile.maximum(a, b) + a % 7 - b % -5 + a % (tile.abs(b) + 1))


def bitwise(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1], y: Tensor[i32, -1]):
    a = tile.load_tile_like(x, z)
    b = tile.load_tile_like(y, z)
    z.store((a & b) | (a ^ 15) ^ ~b)


def add_row_vector(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], b: Tensor[f32, -1]):
    bm, bn, _ = tile.block_id()
    t = x.partition((BM, BN)).load((bm, bn))
    v = b.partition((BN,)).load((bn,))
    z.store(t + v)


def fma_pow(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    a = tile.load_tile_like(x, z)
    b = tile.load_tile_like(y, z)
    z.store(tile.fma(a, b, 1.0) + tile.pow(tile.abs(a), 2.0) - tile.exp2(b) + tile.log(tile.abs(a) + 1.0))


def scalar_mix(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: int, s: float):
    bid = tile.block_id()[0]
    t = tile.load_tile_like(x, z)
    z.store(t * s + (bid + n).astype(f32))


def nan_guard(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    magnitude = tile.bitcast(tile.bitcast(t, i32) & 0x7FFFFFFF, f32)
    z.store(tile.where(tile.isnan(t), -5.0, tile.clamp(t, -0.5, 0.5) + magnitude))


def _nan_inputs(rng: np.random.Generator) -> dict[str, object]:
    x = rand(rng, (N,), lo=-2, hi=2)
    x[::7] = np.nan
    return {"x": x, "z": poison((N,))}


def _nan_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = a["x"]
    return {"z": np.where(np.isnan(x), -5.0, np.clip(x, -0.5, 0.5) + np.abs(x))}


def math_misc(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tile.static_assert(B % 2 == 0, "B must be even")
    a = tile.load_tile_like(x, z)
    b = tile.load_tile_like(y, z)
    z.store(tile.tan(a * 0.5) + tile.sinh(a) - tile.cosh(b) + tile.ceil(a * 3.0) + tile.negative(b) + tile.atan2(a, b))


def _math_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = a["x"].astype("float64"), a["y"].astype("float64")
    return {"z": np.tan(x * 0.5) + np.sinh(x) - np.cosh(y) + np.ceil(x * 3) - y + np.arctan2(x, y)}


def _f(rng: np.random.Generator, *names: str, n: int = N, lo: float = -1, hi: float = 1) -> dict[str, object]:
    out: dict[str, object] = {k: rand(rng, (n,), lo=lo, hi=hi) for k in names}
    out["z"] = poison((n,))
    return out


def _i(rng: np.random.Generator) -> dict[str, object]:
    return {
        "x": rng.integers(-1000, 1000, N).astype("int32"),
        "y": rng.integers(-1000, 1000, N).astype("int32"),
        "z": poison((N,), "int32"),
    }


def _int_arith_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = a["x"], a["y"]
    python_mod = x % 7 - y % -5 + x % (np.abs(y) + 1)
    return {"z": ((x * 3 + y) // 4 - (x >> 1) + (y << 2) + np.maximum(x, y) + python_mod).astype("int32")}


def _unary_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t = a["x"].astype("float64")
    return {"z": np.exp(t) + np.sin(t) * np.cos(t) + np.sqrt(np.abs(t)) - np.tanh(t) + np.floor(t * 4)}


def _fma_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = a["x"].astype("float64"), a["y"].astype("float64")
    return {"z": x * y + 1 + np.abs(x) ** 2 - np.exp2(y) + np.log(np.abs(x) + 1)}


CASES = [
    Case(nan_guard, {"B": 128}, _nan_inputs, _nan_ref),
    Case(math_misc, {"B": 128}, lambda r: _f(r, "x", "y"), _math_ref, tol=Tol(rounded="approx")),
    Case(add, {"B": 128}, lambda r: _f(r, "x", "y"), lambda a: {"z": a["x"] + a["y"]}),
    Case(axpy, {"B": 256}, lambda r: {**_f(r, "x", "y"), "a": 1.5}, lambda a: {"z": a["a"] * a["x"] + a["y"]}),
    Case(unary_math, {"B": 128}, lambda r: _f(r, "x"), _unary_ref, tol=Tol(rounded="approx")),
    Case(relu6, {"B": 128}, lambda r: _f(r, "x", lo=-8, hi=8), lambda a: {"z": np.clip(a["x"], 0, 6)}),
    Case(leaky_select, {"B": 64}, lambda r: _f(r, "x"), lambda a: {"z": np.where(a["x"] > 0, a["x"], a["x"] / 8)}),
    Case(
        cast_f16,
        {"B": 128},
        lambda r: {**_f(r, "x"), "z": poison((N,), "float16")},
        lambda a: {"z": a["x"].astype("float16")},
    ),
    Case(int_arith, {"B": 128}, _i, _int_arith_ref),
    Case(bitwise, {"B": 128}, _i, lambda a: {"z": (a["x"] & a["y"]) | (a["x"] ^ 15) ^ ~a["y"]}),
    Case(
        add_row_vector,
        {"BM": 16, "BN": 32},
        lambda r: {"x": rand(r, N2), "b": rand(r, (N2[1],)), "z": poison(N2)},
        lambda a: {"z": a["x"] + a["b"][None, :]},
    ),
    Case(fma_pow, {"B": 128}, lambda r: _f(r, "x", "y"), _fma_ref, tol=Tol(rounded="approx")),
    Case(
        scalar_mix,
        {"B": 128},
        lambda r: {**_f(r, "x"), "n": 3, "s": 0.5},
        lambda a: {"z": a["x"] * a["s"] + (np.arange(N) // 128 + a["n"]).astype("float32")},
    ),
]
