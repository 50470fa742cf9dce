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
