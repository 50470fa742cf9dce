# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Matrix multiply: K-loop GEMMs for f16/bf16/tf32/f8/int8, a swizzled tile order, a persistent GEMM, batched."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand, unchecked
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, bf16, f8e4m3fn, f16, f32, i8, i32, tf32

M, N, K = 128, 128, 256


def gemm(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


def gemm_f16_out(z: Mut[Tensor[f16, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc.astype(f16))


def gemm_bf16(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[bf16, (-1, -1)], y: Tensor[bf16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


def gemm_tf32(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], y: Tensor[f32, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)).astype(tf32), py.load((k, bn)).astype(tf32), acc)
    z.store(acc)


def gemm_int8(z: Mut[Tensor[i32, ("BM", "BN")]], x: Tensor[i8, (-1, -1)], y: Tensor[i8, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), i32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


def gemm_f8(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f8e4m3fn, (-1, -1)], y: Tensor[f8e4m3fn, (-1, -1)], BK: Const[int]
):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


def matmul_operator(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, "K")], y: Tensor[f16, ("K", -1)]):
    bm, bn, _ = tile.block_id()
    a = x.partition((BM, K)).load((bm, 0))
    b = y.partition((K, BN)).load((0, bn))
    z.store((a @ b).astype(f32) + tile.matmul(a, b).astype(f32) * 0.0)


def batched_gemm(z: Mut[Tensor[f32, (1, "BM", "BN")]], x: Tensor[f16, (-1, -1, "K")], y: Tensor[f16, (-1, "K", -1)]):
    b, bm, bn = tile.block_id()
    a = x.partition((1, BM, K)).load((b, bm, 0))
    c = y.partition((1, K, BN)).load((b, 0, bn))
    z.store(tile.mma(a, c, tile.zeros((1, BM, BN), f32)))


def gemm_swizzled(
    z: Mut[Tensor[f32, ("BM", "BN")]],
    x: Tensor[f16, (-1, -1)],
    y: Tensor[f16, (-1, -1)],
    BK: Const[int],
    GROUP: Const[int],
):
    # Grouped ("swizzled") tile order: consecutive tile numbers walk GROUP rows of tiles before moving right, so
    # blocks running together share input tiles in L2. z.tiles() hands each block distinct tiles: safe stores.
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    for idx in z.tiles(group=GROUP):
        m, n = idx
        acc = tile.zeros((BM, BN), f32)
        for k in range(px.num_tiles[1]):
            acc = tile.mma(px.load((m, k)), py.load((k, n)), acc)
        z.store(acc, at=idx)


def gemm_persistent(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]
):
    # Persistent: launch fewer blocks than tiles (e.g. one per SM); each loops over the tiles z.tiles() gives it.
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    for idx in z.tiles():
        acc = tile.zeros((BM, BN), f32)
        for k in range(px.num_tiles[1]):
            acc = tile.mma(px.load((idx[0], k)), py.load((k, idx[1])), acc)
        z.store(acc, at=idx)


@unchecked
def gemm_swizzled_scatter(
    c: Tensor[f32, (-1, -1)],
    a: Tensor[f16, (-1, -1)],
    b: Tensor[f16, (-1, -1)],
    BM: Const[int],
    BN: Const[int],
    BK: Const[int],
    GROUP: Const[int],
):
    pid = tile.block_id()[0]
    m, n = c.shape
    num_m = tile.cdiv(m, BM)
    per_group = GROUP * tile.cdiv(n, BN)
    first_m = pid // per_group * GROUP
    size_m = tile.minimum(num_m - first_m, GROUP)
    pm = first_m + pid % per_group % size_m
    pn = pid % per_group // size_m
    pa = a.partition((BM, BK), padding="zero")
    pb = b.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(pa.num_tiles[1]):
        acc = tile.mma(pa.load((pm, k)), pb.load((k, pn)), acc)
    rows = (pm * BM + tile.arange(BM)).reshape((BM, 1))
    cols = (pn * BN + tile.arange(BN)).reshape((1, BN))
    tile.scatter(c.ptr() + (rows * n + cols), acc, mask=(rows < m) & (cols < n))


@unchecked
def gemm_persistent_scatter(
    c: Tensor[f32, (-1, -1)],
    a: Tensor[f16, (-1, -1)],
    b: Tensor[f16, (-1, -1)],
    BM: Const[int],
    BN: Const[int],
    BK: Const[int],
):
    m, n = c.shape
    tiles_n = tile.cdiv(n, BN)
    pa = a.partition((BM, BK), padding="zero")
    pb = b.partition((BK, BN), padding="zero")
    for t in range(tile.block_id()[0], tile.cdiv(m, BM) * tiles_n, tile.num_blocks()[0]):
        pm = t // tiles_n
        pn = t % tiles_n
        acc = tile.zeros((BM, BN), f32)
        for k in range(pa.num_tiles[1]):
            acc = tile.mma(pa.load((pm, k)), pb.load((k, pn)), acc)
        rows = (pm * BM + tile.arange(BM)).reshape((BM, 1))
        cols = (pn * BN + tile.arange(BN)).reshape((1, BN))
        tile.scatter(c.ptr() + (rows * n + cols), acc, mask=(rows < m) & (cols < n))


def _mk(dtype: str, out: str = "float32", name: str = "z") -> object:
    def make(rng: np.random.Generator) -> dict[str, object]:
        if dtype == "int8":
            x, y = (rng.integers(-8, 8, s).astype("int8") for s in ((M, K), (K, N)))
        else:
            import ml_dtypes  # noqa: F401  # registers bfloat16/float8 with numpy

            x, y = (rand(rng, s).astype(dtype) for s in ((M, K), (K, N)))
        return {"x": x, "y": y, name: poison((M, N), out)}

    return make


def _ref(a: dict[str, np.ndarray], out: str = "float32", name: str = "z") -> dict[str, np.ndarray]:
    return {name: (a["x"].astype("float64") @ a["y"].astype("float64")).astype(out)}


def _xyz(rng: np.random.Generator) -> dict[str, object]:
    return {
        "x": rand(rng, (M + 32, K), "float16"),
        "y": rand(rng, (K, N + 64), "float16"),
        "z": poison((M + 32, N + 64)),
    }


def _cab(rng: np.random.Generator) -> dict[str, object]:
    return {
        "a": rand(rng, (M + 32, K), "float16"),
        "b": rand(rng, (K, N + 64), "float16"),
        "c": poison((M + 32, N + 64)),
    }


def _cab_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"c": a["a"].astype("float64") @ a["b"].astype("float64")}


T = {"BM": 64, "BN": 64, "BK": 32}
TOL_GEMM = Tol(k=K)  # f32 accumulator over K
CASES = [
    Case(gemm, T, _mk("float16"), _ref, tol=TOL_GEMM),
    Case(gemm_f16_out, T, _mk("float16", "float16"), lambda a: _ref(a, "float16"), tol=TOL_GEMM),
    Case(gemm_bf16, T, _mk("bfloat16"), _ref, tol=TOL_GEMM),
    Case(gemm_tf32, T, _mk("float32"), _ref, tol=Tol(k=K, rounded="tf32")),  # operands rounded to tf32
    Case(gemm_int8, T, _mk("int8", "int32"), lambda a: _ref(a, "int32")),
    Case(gemm_f8, T, _mk("float8_e4m3fn"), _ref, archs=("sm_90", "sm_100"), tol=Tol(acc="fp8_mma", k=K)),
    Case(matmul_operator, {"BM": 32, "BN": 64, "K": K}, _mk("float16"), _ref, tol=Tol(k=K, rounded="float16")),
    Case(
        batched_gemm,
        {"BM": 32, "BN": 32, "K": 64},
        lambda r: {
            "x": rand(r, (2, 64, 64), "float16"),
            "y": rand(r, (2, 64, 64), "float16"),
            "z": poison((2, 64, 64)),
        },
        lambda a: {"z": a["x"].astype("float64") @ a["y"].astype("float64")},
        tol=Tol(k=64),
    ),
    Case(gemm_swizzled, {**T, "GROUP": 2}, _xyz, _ref, tol=TOL_GEMM),
    Case(gemm_persistent, T, _xyz, _ref, grid=lambda a: (2, 2), tol=TOL_GEMM),
    Case(
        gemm_swizzled_scatter,
        {**T, "GROUP": 4},
        _cab,
        _cab_ref,
        grid=lambda a: (-(-a["c"].shape[0] // 64) * -(-a["c"].shape[1] // 64),),
        tol=TOL_GEMM,
    ),
    Case(gemm_persistent_scatter, T, _cab, _cab_ref, grid=lambda a: (5,), tol=TOL_GEMM),
]
