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
