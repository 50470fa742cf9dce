# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, UP037, PLR0917, E501, SIM108, PT009
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Neural-network kernels: softmax, layernorm (whole row and column-looped), rmsnorm, flash attention (plain and
causal)."""

from __future__ import annotations

import numpy as np
from tc_corpus_case import Case, poison, rand
from tc_tol import Tol

import tile.compiler.lang as tile
from tile.compiler.lang import Const, Mut, Tensor, f16, f32

ROWS, COLS = 64, 256


def softmax(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]):
    t = x.partition((BM, N), padding="neg_inf").load((tile.block_id()[0], 0))
    e = tile.exp(t - tile.max(t, axis=1, keepdims=True))
    z.store(e / tile.sum(e, axis=1, keepdims=True))


def layernorm(
    z: Mut[Tensor[f32, ("BM", "N")]],
    x: Tensor[f32, (-1, "N")],
    w: Tensor[f32, "N"],
    b: Tensor[f32, "N"],
    eps: Const[float],
):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    mean = tile.sum(t, axis=1, keepdims=True) / N
    d = t - mean
    var = tile.sum(d * d, axis=1, keepdims=True) / N
    z.store(d * tile.rsqrt(var + eps) * w.partition((N,)).load((0,)) + b.partition((N,)).load((0,)))


def layernorm_looped(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], eps: Const[float]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BN), padding="zero")
    n = x.shape[1].astype(f32)
    total = tile.zeros((BM, 1), f32)
    squares = tile.zeros((BM, 1), f32)
    for j in range(px.num_tiles[1]):
        t = px.load((bm, j))
        total = total + tile.sum(t, axis=1, keepdims=True)
        squares = squares + tile.sum(t * t, axis=1, keepdims=True)
    mean = total / n
    var = squares / n - mean * mean
    z.store((px.load((bm, bn)) - mean) * tile.rsqrt(var + eps))


def rmsnorm(z: Mut[Tensor[f16, ("BM", "N")]], x: Tensor[f16, (-1, "N")], w: Tensor[f16, "N"], eps: Const[float]):
    t = x.partition((BM, N)).load((tile.block_id()[0], 0)).astype(f32)
    ms = tile.sum(t * t, axis=1, keepdims=True) / N
    scale = w.partition((N,)).load((0,)).astype(f32)
    z.store((t * tile.rsqrt(ms + eps) * scale).astype(f16))


def flash_attention(
    o: Mut[Tensor[f32, ("BM", "D")]],
    q: Tensor[f16, (-1, "D")],
    k: Tensor[f16, (-1, "D")],
    v: Tensor[f16, (-1, "D")],
    BN: Const[int],
    scale: Const[float],
):
    qt = q.partition((BM, D)).load((tile.block_id()[0], 0))
    pk = k.partition((BN, D), padding="zero")
    pv = v.partition((BN, D), padding="zero")
    m_i = tile.full((BM, 1), -1e30, f32)
    l_i = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(pk.num_tiles[0]):
        s = tile.mma(qt, pk.load((j, 0)).T, tile.zeros((BM, BN), f32)) * scale
        m_new = tile.maximum(m_i, tile.max(s, axis=1, keepdims=True))
        p = tile.exp(s - m_new)
        alpha = tile.exp(m_i - m_new)
        l_i = l_i * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.mma(p.astype(f16), pv.load((j, 0)), acc * alpha)
        m_i = m_new
    o.store(acc / l_i)


def flash_attention_causal(
    o: Mut[Tensor[f32, ("BM", "D")]],
    q: Tensor[f16, (-1, "D")],
    k: Tensor[f16, (-1, "D")],
    v: Tensor[f16, (-1, "D")],
    BN: Const[int],
    scale: Const[float],
):
    bm = tile.block_id()[0]
    qt = q.partition((BM, D)).load((bm, 0))
    pk = k.partition((BN, D), padding="zero")
    pv = v.partition((BN, D), padding="zero")
    rows = (bm * BM + tile.arange(BM)).reshape((BM, 1))
    m_i = tile.full((BM, 1), -1e30, f32)
    l_i = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(tile.cdiv((bm + 1) * BM, BN)):
        s = tile.mma(qt, pk.load((j, 0)).T, tile.zeros((BM, BN), f32)) * scale
        cols = (j * BN + tile.arange(BN)).reshape((1, BN))
        s = tile.where(cols <= rows, s, -1e30)
        m_new = tile.maximum(m_i, tile.max(s, axis=1, keepdims=True))
        p = tile.exp(s - m_new)
        alpha = tile.exp(m_i - m_new)
        l_i = l_i * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.mma(p.astype(f16), pv.load((j, 0)), acc * alpha)
        m_i = m_new
    o.store(acc / l_i)


def _softmax_ref(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = a["x"].astype("float64")
    e = np.exp(x - x.max(1, keepdims=True))
    return {"z": e / e.sum(1, keepdims=True)}


def _ln(x: np.ndarray, eps: float) -> np.ndarray:
    x = x.astype("float64")
    mean = x.mean(1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(1, keepdims=True) + eps)


def _attn_inputs(rng: np.random.Generator) -> dict[str, object]:
    s, d = 256, 64
    return {
        "q": rand(rng, (s, d), "float16"),
        "k": rand(rng, (s, d), "float16"),
        "v": rand(rng, (s, d), "float16"),
        "o": poison((s, d)),
    }


def _attn_ref(a: dict[str, np.ndarray], causal: bool = False) -> dict[str, np.ndarray]:
    q, k, v = (a[n].astype("float64") for n in "qkv")
    s = q @ k.T * 0.125
    if causal:
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    return {"o": p @ v / p.sum(1, keepdims=True)}


def _rows(rng: np.random.Generator, **extra: object) -> dict[str, object]:
    return {"x": rand(rng, (ROWS, COLS)), "z": poison((ROWS, COLS)), **extra}


G = {"BM": 4, "N": COLS}
CASES = [
    Case(softmax, G, _rows, _softmax_ref, tol=Tol(k=COLS, rounded="approx")),
    Case(
        layernorm,
        {**G, "eps": 1e-5},
        lambda r: _rows(r, w=rand(r, (COLS,)), b=rand(r, (COLS,))),
        lambda a: {"z": _ln(a["x"], 1e-5) * a["w"] + a["b"]},
        tol=Tol(k=COLS),
    ),
    Case(
        layernorm_looped,
        {"BM": 16, "BN": 64, "eps": 1e-5},
        _rows,
        lambda a: {"z": _ln(a["x"], 1e-5)},
        tol=Tol(k=COLS),
    ),
    Case(
        rmsnorm,
        {**G, "eps": 1e-6},
        lambda r: {
            "x": rand(r, (ROWS, COLS), "float16"),
            "w": rand(r, (COLS,), "float16"),
            "z": poison((ROWS, COLS), "float16"),
        },
        lambda a: {
            "z": (a["x"] / np.sqrt((a["x"].astype("float64") ** 2).mean(1, keepdims=True) + 1e-6) * a["w"]).astype(
                "float16"
            )
        },
        tol=Tol(k=COLS),
    ),
    Case(
        flash_attention,
        {"BM": 64, "BN": 64, "D": 64, "scale": 0.125},
        _attn_inputs,
        _attn_ref,
        tol=Tol(k=256, rounded="float16"),
    ),
    Case(
        flash_attention_causal,
        {"BM": 64, "BN": 64, "D": 64, "scale": 0.125},
        _attn_inputs,
        lambda a: _attn_ref(a, causal=True),
        tol=Tol(k=256, rounded="float16"),
    ),
]
