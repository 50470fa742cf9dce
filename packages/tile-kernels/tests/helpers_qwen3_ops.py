"""The float64 check of Qwen3's `prep_qkv` launch, shared by the CPU tests (``test_qwen3_ops.py``) and the GPU
tests (``test_qwen3_ops_gpu.py``)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

import tile.frontend as tile
from tile.kernels.qwen3 import _ops

U_BF16 = 2.0**-8
EPS = 1e-6


def _bf16(rng: np.random.Generator, *shape: int) -> np.ndarray[Any, Any]:
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def _tables(s: int, hd: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    inv = 1e4 ** (-np.arange(hd // 2, dtype=np.float64) * 2.0 / hd)
    angles = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _norm_rope(x: Any, w: Any, cos: Any, sin: Any) -> Any:
    # x (T, heads, hd) float64; cos/sin (T, hd/2) of the tokens' positions.
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w
    a, b = np.split(x, 2, axis=-1)
    c, s = cos[:, None], sin[:, None]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


def check_prep_qkv(
    t: int,
    heads: int,
    kv: int,
    *,
    hd: int,
    s: int,
    pos: int,
    seed: int = 0,
    tokens: int | None = None,
    group: int | None = None,
    occupancy: int | None = None,
    tables: str = "f32",
) -> None:
    """Run `prep_qkv` (cache tiles of ``tokens`` positions, default the whole cache; ``group`` query heads a block;
    RoPE ``tables`` of f32 or bf16) on random data and compare the queries and both caches with float64 numpy (of
    the tables as passed): the new rows within bf16 rounding, every other cache row untouched (bit for bit)."""
    rng = np.random.default_rng(seed)
    x = _bf16(rng, t, (heads + 2 * kv) * hd)
    wq, wk = _bf16(rng, 1, hd), _bf16(rng, 1, hd)
    kc, vc = _bf16(rng, kv, s, hd), _bf16(rng, kv, s, hd)
    cos, sin = (a.astype(ml_dtypes.bfloat16) if tables == "bf16" else a for a in _tables(s, hd))
    rows_form = {} if tokens is None else {"start": pos, "group": group, "occupancy": occupancy}
    made = _ops.prep_qkv(
        tile.from_numpy(kc),
        tile.from_numpy(vc),
        tile.from_numpy(x),
        tile.from_numpy(wq),
        tile.from_numpy(wk),
        heads=heads,
        cos=tile.from_numpy(cos),
        sin=tile.from_numpy(sin),
        pos=tile.from_numpy(np.array([pos], dtype=np.int32)),
        eps=EPS,
        tokens=tokens,
        **rows_form,
    )
    out = made.sync()
    q, k2, v2 = (out[i].unpartition().to_numpy().astype(np.float64) for i in range(3))
    f = x.astype(np.float64).reshape(t, heads + 2 * kv, hd)
    rows = slice(pos, pos + t)
    c64, s64 = cos[rows].astype(np.float64), sin[rows].astype(np.float64)
    want_q = _norm_rope(f[:, :heads], wq.astype(np.float64), c64, s64).reshape(t, heads * hd)
    want_k = _norm_rope(f[:, heads : heads + kv], wk.astype(np.float64), c64, s64).transpose(1, 0, 2)
    # One bf16 rounding of the result, plus the f32 arithmetic of the norm: 2 units of bf16 of each element's size.
    for got, want in ((q, want_q), (k2[:, rows], want_k)):
        np.testing.assert_array_less(np.abs(got - want), 2 * U_BF16 * np.abs(want) + 1e-6)
    np.testing.assert_array_equal(v2[:, rows], f[:, heads + kv :].transpose(1, 0, 2))  # values are copied as is
    keep = np.ones(s, dtype=bool)
    keep[rows] = False
    np.testing.assert_array_equal(k2[:, keep], kc.astype(np.float64)[:, keep])
    np.testing.assert_array_equal(v2[:, keep], vc.astype(np.float64)[:, keep])
