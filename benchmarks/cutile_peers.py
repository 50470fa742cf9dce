"""cuTile Python's versions of the benchmarked kernels (the peer), imported only when cuda-tile is present.

A module of its own because cuTile resolves the kernels' annotations (``ct.Constant[int]``) in the
defining module's globals: with ``from __future__ import annotations`` and a function-local
``import cuda.tile as ct`` (as in bench_frontend.py) that lookup fails.
"""

from typing import Any

import cuda.tile as ct


@ct.kernel  # type: ignore[untyped-decorator]  # cuda.tile ships no type information
def ct_add(a: Any, b: Any, c: Any, TILE: ct.Constant[int]) -> None:  # noqa: N803 - cuTile's constant naming
    bid = ct.bid(0)
    ct.store(c, index=(bid,), tile=ct.load(a, index=(bid,), shape=(TILE,)) + ct.load(b, index=(bid,), shape=(TILE,)))


@ct.kernel  # type: ignore[untyped-decorator]  # cuda.tile ships no type information
def ct_gemm(A: Any, B: Any, C: Any, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]) -> None:  # noqa: N803, PLR0917 - matrix names; cuTile passes constants positionally
    bidx, bidy = ct.bid(0), ct.bid(1)
    acc = ct.full((tm, tn), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
        a = ct.load(A, index=(bidx, k), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, bidy), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bidx, bidy), tile=acc.astype(C.dtype))


INV_LN2 = 1.4426950408889634  # log2(e): exp(x) == exp2(x * log2(e))


@ct.kernel(occupancy=2)  # type: ignore[untyped-decorator]  # cuda.tile ships no type information
def ct_fmha(  # noqa: PLR0917 - cuTile passes constants positionally
    Q: Any,  # noqa: N803 - cuTile's tensor naming
    K: Any,  # noqa: N803
    V: Any,  # noqa: N803
    Out: Any,  # noqa: N803
    qk_scale: float,
    TILE_D: ct.Constant[int],  # noqa: N803
    H: ct.Constant[int],  # noqa: N803
    TILE_M: ct.Constant[int],  # noqa: N803
    TILE_N: ct.Constant[int],  # noqa: N803
    CAUSAL: ct.Constant[bool],  # noqa: N803
    EVEN_K: ct.Constant[bool],  # noqa: N803
) -> None:
    """cuTile Python's FMHA sample algorithm (samples/AttentionFMHA.py, no GQA, queries from position 0): K loaded
    transposed through ``order=``, ``exp2`` with flush-to-zero, approximate final division, occupancy 2; grid
    ``(cdiv(S, TILE_M), B * H)``, Q/K/V/Out of shape (B, H, S, D)."""
    bm, bh = ct.bid(0), ct.bid(1)
    b, h = bh // H, bh % H
    scale = qk_scale * INV_LN2
    rows = (bm * TILE_M + ct.arange(TILE_M, dtype=ct.int32))[:, None]
    cols0 = ct.arange(TILE_N, dtype=ct.int32)[None, :]
    m_i = ct.full((TILE_M, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.full((TILE_M, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TILE_M, TILE_D), 0.0, dtype=ct.float32)
    q = ct.load(Q, index=(b, h, bm, 0), shape=(1, 1, TILE_M, TILE_D)).reshape((TILE_M, TILE_D))
    n_k = K.shape[2]
    if CAUSAL:
        mask_start = min((bm * TILE_M) // TILE_N, n_k // TILE_N)
        end = ct.cdiv(min((bm + 1) * TILE_M, n_k), TILE_N)
    else:
        mask_start = n_k // TILE_N
        end = ct.cdiv(n_k, TILE_N)
    for j in range(0, end):
        k = ct.load(K, index=(b, h, 0, j), shape=(1, 1, TILE_D, TILE_N), order=(0, 1, 3, 2), latency=2)
        qk = ct.mma(q, k.reshape((TILE_D, TILE_N)), ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32))
        if (CAUSAL or not EVEN_K) and j >= mask_start:
            cols = j * TILE_N + cols0
            keep = ct.full((TILE_M, TILE_N), True, dtype=ct.bool_)
            if not EVEN_K:
                keep = keep & (cols < n_k)
            if CAUSAL:
                keep = keep & (rows >= cols)
            qk = qk + ct.where(keep, 0.0, -float("inf"))
        m_ij = max(m_i, ct.max(qk, axis=-1, keepdims=True) * scale)
        p = ct.exp2(qk * scale - m_ij, flush_to_zero=True)
        alpha = ct.exp2(m_i - m_ij, flush_to_zero=True)
        l_i = l_i * alpha + ct.sum(p, axis=-1, keepdims=True)
        v = ct.load(V, index=(b, h, j, 0), shape=(1, 1, TILE_N, TILE_D), latency=4).reshape((TILE_N, TILE_D))
        acc = ct.mma(p.astype(Q.dtype), v, acc * alpha)
        m_i = m_ij
    acc = ct.truediv(acc, l_i, flush_to_zero=True, rounding_mode=ct.RoundingMode.APPROX)
    ct.store(Out, index=(b, h, bm, 0), tile=acc.reshape((1, 1, TILE_M, TILE_D)).astype(Out.dtype))


@ct.kernel(occupancy=ct.ByTarget(sm_100=16))  # type: ignore[untyped-decorator]  # cuda.tile ships no type information
def ct_rmsnorm(x: Any, w: Any, out: Any, N: ct.Constant[int], eps: ct.Constant[float], TILE: ct.Constant[int]) -> None:  # noqa: N803, PLR0917 - cuTile's constant naming; cuTile passes constants positionally
    """cuTile Python's chunked RMSNorm (its rms_norm sample's form): one row per block, two passes over column
    chunks of TILE (sum of squares, then normalise and store), untiled (allow_tma=False) loads and stores with
    latency 1. The sample's per-row Rstd output is left out, as in Tile's kernel."""
    row = ct.bid(0)
    acc = ct.full((1, TILE), 0.0, dtype=ct.float32)
    chunks = ct.cdiv(x.shape[1], TILE)
    for j in range(chunks):
        xj = ct.load(x, index=(row, j), shape=(1, TILE), allow_tma=False, latency=1, padding_mode=ct.PaddingMode.ZERO)
        xj = ct.astype(xj, ct.float32)
        acc += xj * xj
    r = ct.rsqrt(ct.sum(acc, axis=1, keepdims=True) / N + eps)
    for j in range(chunks):
        wj = ct.astype(ct.load(w, index=(j,), shape=(TILE,), allow_tma=False, latency=1), ct.float32)
        xj = ct.astype(ct.load(x, index=(row, j), shape=(1, TILE), allow_tma=False, latency=1), ct.float32)
        ct.store(out, index=(row, j), tile=ct.astype(xj * r * wj, x.dtype), allow_tma=False, latency=1)
