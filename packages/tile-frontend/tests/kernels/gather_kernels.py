# mypy: ignore-errors
# ruff: noqa: F821, N803, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Kernels of the checked-gather tests (``test_frontend_gather.py`` and its GPU twin), loaded by path."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32, i64


@tile.entry
def lookup(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1], ids: Tensor["I", -1], PAD: Const[int]):
    """z[e] = x[ids[e]], or PAD where ids[e] is outside x: an embedding-style lookup by a tile of ids."""
    b = tile.block_id()[0]
    z.store(x.gather(ids.partition((B,)).load((b,)), padding=PAD))


@tile.entry
def window(z: Mut[Tensor["T", ("BM", "BN")]], x: Tensor["T", (-1, -1)], DY: Const[int], DX: Const[int]):
    """A shifted window: z[i, j] = x[i + DY, j + DX] (zero outside x); the two index tiles broadcast."""
    bm, bn = tile.block_id()[0], tile.block_id()[1]
    i = (bm * BM + tile.arange(BM) + DY).reshape((BM, 1))
    j = bn * BN + tile.arange(BN) + DX
    z.store(x.gather(i, j))


@tile.entry
def pick3(z: Mut[Tensor["T", "B"]], x: Tensor["T", (-1, -1, -1)], idx: Tensor[i64, (3, -1)]):
    """z[e] = x[idx[0, e], idx[1, e], idx[2, e]], -1 outside x (one index tile per dim, given as a tuple)."""
    b = tile.block_id()[0]
    p = idx.partition((1, B))
    coords = (p.load((0, b)).reshape((B,)), p.load((1, b)).reshape((B,)), p.load((2, b)).reshape((B,)))
    z.store(x.gather(coords, padding=-1))


@tile.entry
def stencil(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    """A 5-point Laplacian with zero boundary: z = 4 x - x[up] - x[down] - x[left] - x[right]."""
    bm, bn = tile.block_id()[0], tile.block_id()[1]
    i = (bm * BM + tile.arange(BM)).reshape((BM, 1))
    j = bn * BN + tile.arange(BN)
    centre = x.gather(i, j)
    around = x.gather(i - 1, j) + x.gather(i + 1, j) + x.gather(i, j - 1) + x.gather(i, j + 1)
    z.store(centre * 4.0 - around)


@tile.entry
def conv_im2col(  # noqa: PLR0917  # a kernel takes its consts positionally
    z: Mut[Tensor[f32, ("BP", "BO")]],
    x: Tensor["T", (-1, -1, -1)],
    w: Tensor["T", (-1, -1)],
    W: Const[int],
    K: Const[int],
    P: Const[int],
    BK: Const[int],
):
    """A KxK convolution (stride 1, zero padding P) as an im2col matmul.

    ``x`` is (C, H, W); ``w`` is the filter as (C*K*K, OC), row ``c*K*K + ky*K + kx``; ``z`` is (H*W, OC). Each block
    owns BP output pixels by BO output channels; the (BP, BK) patch tile of each step is gathered straight from ``x``
    (the image's border, the pixels past H*W and the reduction rows past C*K*K all read as zero).
    """
    bp, bo = tile.block_id()[0], tile.block_id()[1]
    pix = bp * BP + tile.arange(BP)
    oy = (pix // W).reshape((BP, 1))
    ox = (pix % W).reshape((BP, 1))
    pw = w.partition((BK, BO), padding="zero")
    acc = tile.zeros((BP, BO), f32)
    for kb in range(tile.cdiv(w.extents[0], BK)):
        kk = kb * BK + tile.arange(BK)
        c = kk // (K * K)
        ky = kk % (K * K) // K
        kx = kk % K
        patch = x.gather(c, oy + ky - P, ox + kx - P)
        acc = tile.mma(patch, pw.load((kb, bo)), acc)
    z.store(acc)


@tile.entry(unchecked=True)
def raw_lookup(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1], ids: Tensor["I", -1]):
    """The unchecked pointer form with no mask: what x.gather would be without its bounds mask."""
    b = tile.block_id()[0]
    z.store(tile.gather(x.ptr() + ids.partition((B,)).load((b,))))


@tile.entry
def scalar_of(z: Mut[Tensor["T", "B"]], x: Tensor["T", ()]):
    """A rank-0 tensor takes no index: its one element, broadcast into the tile."""
    z.store(x.gather())
