# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Ordered (transposed) partition loads, floating-point modes, per-kernel math defaults, entry hints, and the
flash-attention forward written with all of them."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler import by_arch
from tile.compiler.lang import Const, Mut, Tensor, f16, f32

LOG2E = 1.4426950408889634
TINY = np.float32(2.0**-126)  # the smallest normal f32: below it, flush_to_zero makes zeros


def load_transposed(z: Mut[Tensor[f32, ("BD", "BN")]], k: Tensor[f32, (-1, -1)]):
    # z = k.T, a tile at a time: the view walks k's dim 1 along tile dim 0 (no permute of the loaded tile).
    i, j, _ = tile.block_id()
    z.store(k.partition((BD, BN), order=(1, 0), padding="zero").load((i, j), latency=3, allow_tma=True))


def colsum_transposed(z: Mut[Tensor[f32, ("BD", 1)]], k: Tensor[f32, (-1, -1)], BN: Const[int]):
    # Loops over num_tiles of an ordered view: its counts are in the view's dim order.
    pk = k.partition((BD, BN), order=(1, 0), padding="zero")
    acc = tile.zeros((BD, 1), f32)
    for j in range(pk.num_tiles[1]):
        acc = acc + tile.sum(pk.load((tile.block_id()[0], j)), axis=1, keepdims=True)
    z.store(acc)


def batched_transposed(z: Mut[Tensor[f32, (1, "BD", "BN")]], k: Tensor[f32, (-1, -1, -1)]):
    b, i, j = tile.block_id()
    z.store(k.partition((1, BD, BN), order=(0, 2, 1), padding="zero").load((b, i, j)))


def transposed_like(z: Mut[Tensor[f32, ("BD", "BN")]], k: Tensor[f32, (-1, -1)], x: Tensor[f32, (-1, -1)]):
    # The hints on the other load and store forms: tile.load_tile_like and the output's own-tile store.
    own = tile.load_tile_like(x, z, latency=2, allow_tma=False)
    z.store(own + k.partition((BD, BN), order=(1, 0)).load(tile.block_id()[:2]), latency=1, allow_tma=True)


def min_bounded_loop(
    z: Mut[Tensor[f32, ("BM", 1)]], x: Tensor[f32, (-1, -1)], y: Tensor[f32, (-1, -1)], n: int, BN: Const[int]
):
    # range(minimum(n, count)) stays inside x's column tiles (no check in the kernel), and y's through a host guard.
    px = x.partition((BM, BN), padding="zero")
    py = y.partition((BM, BN), padding="zero")
    acc = tile.zeros((BM, 1), f32)
    for j in range(tile.minimum(n, px.num_tiles[1])):
        t = px.load((tile.block_id()[0], j)) + py.load((tile.block_id()[0], j))
        acc = acc + tile.sum(t, axis=1, keepdims=True)
    z.store(acc)


def math_modes(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], y: Tensor[f32, (-1, -1)]):
    i, j, _ = tile.block_id()
    a = x.partition((BM, BN)).load((i, j))
    b = y.partition((BM, BN)).load((i, j))
    q = tile.truediv(a, b, rounding="approx", flush_to_zero=True) + tile.truediv(a, b, rounding="full")
    r = tile.sqrt(b, rounding="approx") + tile.sqrt(b, rounding="zero") + tile.rsqrt(b, flush_to_zero=True)
    e = tile.exp2(a, flush_to_zero=True) + tile.exp(a, rounding="approx") + tile.tanh(a, rounding="full")
    s = tile.add(a, b, rounding="zero") - tile.sub(a, b, rounding="positive_inf")
    p = tile.mul(a, b, rounding="negative_inf", flush_to_zero=True) + tile.fma(a, b, a, flush_to_zero=True)
    z.store(q + r + e + s + p + tile.maximum(a, b, flush_to_zero=True) + tile.minimum(a, b, flush_to_zero=False))


def flush_explicit(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    z.store(tile.mul(t, 2.0, flush_to_zero=True))
    w.store(t * 2.0)


def flush_default(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    # Compiled with flush_to_zero=True: the operator flushes, the explicit False keeps subnormals.
    t = tile.load_tile_like(x, z)
    z.store(t * 2.0)
    w.store(tile.mul(t, 2.0, flush_to_zero=False))


def approx_default(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    # Compiled with approx=True: '/' and sqrt are approximate, the explicit rounding stays.
    a, b = tile.load_tile_like(x, z), tile.load_tile_like(y, z)
    z.store(a / b + tile.sqrt(b) + tile.truediv(a, b, rounding="nearest_even"))


def hinted(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + 1.0)


@tile.function
def attend(qt, pk, pv, bh, m, n_k, scale, BM, BN, D, CAUSAL, EVEN_K):
    """One (BM, D) tile of softmax(q k^T * scale) v, f32 accumulation, online softmax in base 2."""
    m_i = tile.full((BM, 1), -np.inf, f32)
    l_i = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    if CAUSAL:
        # Key tiles at or before the query tile's last row; the minimum with the tile count proves the loads in range.
        end = tile.minimum(tile.cdiv((m + 1) * BM, BN), pk.num_tiles[2])
        mask_start = tile.minimum(m * BM // BN, n_k // BN)  # key tiles from here on need the mask
    else:
        end = pk.num_tiles[2]
        mask_start = n_k // BN  # only a partial last key tile needs a mask
    rows = m * BM + tile.arange(BM).reshape((BM, 1))
    for j in range(end):
        kt = pk.load((bh, 0, j), latency=2).reshape((D, BN))  # K^T straight from memory
        s = tile.mma(qt, kt, tile.zeros((BM, BN), f32))
        if CAUSAL or not EVEN_K:  # noqa: SIM102 - a compile-time if: no mask code at all for full, even attention
            if j >= mask_start:
                cols = j * BN + tile.arange(BN).reshape((1, BN))
                keep = (cols < n_k) & (rows >= cols) if CAUSAL else cols < n_k
                s = tile.where(keep, s, -np.inf)
        m_ij = tile.maximum(m_i, tile.max(s, axis=1, keepdims=True) * scale)
        p = tile.exp2(s * scale - m_ij, flush_to_zero=True)
        alpha = tile.exp2(m_i - m_ij, flush_to_zero=True)
        l_i = l_i * alpha + tile.sum(p, axis=1, keepdims=True)
        vt = pv.load((bh, j, 0), latency=4).reshape((BN, D))
        acc = tile.mma(p.astype(f16), vt, acc * alpha)
        m_i = m_ij
    return tile.truediv(acc, l_i, rounding="approx", flush_to_zero=True)


def flash_attention_fast(
    o: Mut[Tensor[f16, (1, "BM", "D")]],
    q: Tensor[f16, (-1, -1, "D")],
    k: Tensor[f16, (-1, -1, "D")],
    v: Tensor[f16, (-1, -1, "D")],
    BN: Const[int],
    qk_scale: float,
):
    pk = k.partition((1, D, BN), order=(0, 2, 1), padding="zero")
    pv = v.partition((1, BN, D), padding="zero")
    for idx in o.tiles():
        bh, m, _ = idx
        qt = q.partition((1, BM, D)).load((bh, m, 0)).reshape((BM, D))
        out = attend(qt, pk, pv, bh, m, k.shape[1], qk_scale * LOG2E, BM, BN, D, False, False)
        o.store(out.astype(f16).reshape((1, BM, D)), at=idx)


def flash_attention_fast_causal(
    o: Mut[Tensor[f16, (1, "BM", "D")]],
    q: Tensor[f16, (-1, -1, "D")],
    k: Tensor[f16, (-1, -1, "D")],
    v: Tensor[f16, (-1, -1, "D")],
    BN: Const[int],
    qk_scale: float,
):
    pk = k.partition((1, D, BN), order=(0, 2, 1), padding="zero")
    pv = v.partition((1, BN, D), padding="zero")
    for idx in o.tiles():
        bh, m, _ = idx
        qt = q.partition((1, BM, D)).load((bh, m, 0)).reshape((BM, D))
        out = attend(qt, pk, pv, bh, m, k.shape[1], qk_scale * LOG2E, BM, BN, D, True, False)
        o.store(out.astype(f16).reshape((1, BM, D)), at=idx)


def _k(rng: np.random.Generator, z: tuple[int, ...], k: tuple[int, ...]) -> dict[str, object]:
    return {"z": poison(z), "k": rand(rng, k)}


def _xy(rng: np.random.Generator) -> dict[str, object]:
    return {"z": poison((32, 48)), "x": rand(rng, (32, 48)), "y": rand(rng, (32, 48), lo=0.5, hi=2.0)}


def _modes_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x, y = a["x"].astype(np.float64), a["y"].astype(np.float64)
    q = 2 * x / y
    r = 2 * np.sqrt(y) + 1 / np.sqrt(y)
    e = np.exp2(x) + np.exp(x) + np.tanh(x)
    s = (x + y) - (x - y) + x * y + (x * y + x)
    return {"z": q + r + e + s + np.maximum(x, y) + np.minimum(x, y)}


def _subnormal(rng: np.random.Generator) -> dict[str, object]:
    x = rand(rng, (64,))
    x[::3] = np.float32(3e-39) * np.sign(x[::3])  # subnormal f32: flushed to (signed) zero under flush_to_zero
    return {"z": poison((64,)), "w": poison((64,)), "x": x}


def _flush_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = a["x"]
    kept = x.astype(np.float64) * 2
    return {"z": np.where(np.abs(x) < TINY, 0.0, kept), "w": kept}


def _attn_inputs(rng: np.random.Generator, bh: int = 2, s: int = 88, d: int = 32) -> dict[str, object]:
    qkv = {n: rand(rng, (bh, s, d), "float16") for n in "qkv"}
    return {**qkv, "o": poison((bh, s, d), "float16"), "qk_scale": 1 / np.sqrt(d)}


def _attn_ref(a: dict[str, np.ndarray], causal: bool) -> dict[str, np.ndarray]:
    q, k, v = (a[n].astype(np.float64) for n in "qkv")
    s = q @ k.transpose(0, 2, 1) * a["qk_scale"]
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:])) > 0, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return {"o": p @ v / p.sum(-1, keepdims=True)}


CASES = [
    Case(load_transposed, {"BD": 16, "BN": 32}, lambda r: _k(r, (32, 48), (48, 32)), lambda a: {"z": a["k"].T}),
    Case(
        colsum_transposed,
        {"BD": 16, "BN": 32},
        lambda r: _k(r, (32, 1), (80, 32)),
        lambda a: {"z": a["k"].astype(np.float64).sum(0)[:, None]},
    ),
    Case(
        batched_transposed,
        {"BD": 16, "BN": 32},
        lambda r: _k(r, (3, 32, 48), (3, 48, 32)),
        lambda a: {"z": a["k"].transpose(0, 2, 1)},
    ),
    Case(
        transposed_like,
        {"BD": 16, "BN": 32},
        lambda r: {**_k(r, (32, 64), (64, 32)), "x": rand(r, (32, 64))},
        lambda a: {"z": a["x"].astype(np.float64) + a["k"].T},
    ),
    Case(
        min_bounded_loop,
        {"BM": 16, "BN": 16},
        lambda r: {"z": poison((32, 1)), "x": rand(r, (32, 72)), "y": rand(r, (32, 72)), "n": 3},
        lambda a: {"z": (a["x"].astype(np.float64) + a["y"])[:, :48].sum(1, keepdims=True)},
    ),
    Case(math_modes, {"BM": 16, "BN": 16}, _xy, _modes_ref, tol=Tol(rounded="approx")),
    Case(flush_explicit, {"B": 32}, _subnormal, _flush_ref, tol=Tol(exact=True)),
    Case(flush_default, {"B": 32}, _subnormal, _flush_ref, tol=Tol(exact=True), hints={"flush_to_zero": True}),
    Case(
        approx_default,
        {"B": 32},
        lambda r: {"z": poison((64,)), "x": rand(r, (64,)), "y": rand(r, (64,), lo=0.5, hi=2.0)},
        lambda a: {"z": 2 * a["x"].astype(np.float64) / a["y"] + np.sqrt(a["y"].astype(np.float64))},
        tol=Tol(rounded="approx"),
        hints={"approx": True},
    ),
    Case(
        hinted,
        {"B": 32},
        lambda r: {"z": poison((64,)), "x": rand(r, (64,))},
        lambda a: {"z": a["x"] + 1.0},
        hints={"occupancy": by_arch(sm_80=1, sm_90=2, default=4), "num_cta_in_cga": by_arch(sm_100=2)},
    ),
    *(
        Case(
            kernel,
            {"BM": 32, "BN": 16, "D": 32},
            _attn_inputs,
            lambda a, causal=causal: _attn_ref(a, causal),
            tol=Tol(k=88, rounded="float16"),  # 88 keys; P is cast to f16 for the second mma
            hints={"occupancy": 2},
        )
        for kernel, causal in ((flash_attention_fast, False), (flash_attention_fast_causal, True))
    ),
]
