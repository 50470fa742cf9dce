# mypy: ignore-errors
# ruff: noqa: RUF100, F821, N803, N806, UP037, PLR0917, E501
# Kernel-language source: shape strings such as "BM" are const generics the compiler binds (declared below for type
# checkers, as in examples/). tests/test_peer_ports.py runs these against numpy float64.
"""Kernels of other projects (NVIDIA/cutile-python's samples and tests, NVlabs/cutile-rs's examples), written the way
Tile's docs teach: the output partition owns each block's tile, inputs are read through partitions, and only the
kernels that must add into shared memory (split-K, histogram, embedding backward, im2col gathers) are unchecked."""

from __future__ import annotations

import math

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f16, f32, i32, u32

BM: int
BN: int
B: int
NT: int
BT: int
D: int


# -- LayerNorm forward and backward (cutile-python test/kernels/layer_norm.py) ------------------------------------
@tile.entry
def ln_fwd(
    y: Mut[Tensor[f32, (1, "NT")]],
    mean: Mut[Tensor[f32, (1,)]],
    rstd: Mut[Tensor[f32, (1,)]],
    x: Tensor[f32, (-1, -1)],
    w: Tensor[f32, -1],
    b: Tensor[f32, -1],
    eps: float,
    BN: Const[int],
) -> None:
    bm = tile.block_id()[0]
    px, pw, pb = (
        x.partition((1, BN), padding="zero"),
        w.partition((BN,), padding="zero"),
        b.partition((BN,), padding="zero"),
    )
    n = x.extents[1].astype(f32)
    ys = y.subtiles((1, BN))
    acc = tile.zeros((1, BN), f32)
    for j in range(ys.num_tiles[1]):
        acc += px.load((bm, j))
    mu = tile.sum(acc, axis=1, keepdims=True) / n
    var = tile.zeros((1, BN), f32)
    for j in range(ys.num_tiles[1]):
        c = tile.where(j * BN + tile.arange(BN) < x.extents[1], px.load((bm, j)) - mu, 0.0)
        var += c * c
    r = tile.rsqrt(tile.sum(var, axis=1, keepdims=True) / n + eps)
    mean.store(mu.reshape((1,)))
    rstd.store(r.reshape((1,)))
    for j in range(ys.num_tiles[1]):
        t = (px.load((bm, j)) - mu) * r
        ys.store(t * pw.load((j,)).reshape((1, BN)) + pb.load((j,)).reshape((1, BN)), (0, j))


@tile.entry
def ln_bwd_dx(
    dx: Mut[Tensor[f32, (1, "NT")]],
    dy: Tensor[f32, (-1, -1)],
    x: Tensor[f32, (-1, -1)],
    w: Tensor[f32, -1],
    mean: Tensor[f32, -1],
    rstd: Tensor[f32, -1],
    BN: Const[int],
) -> None:
    bm = tile.block_id()[0]
    px, pdy = x.partition((1, BN), padding="zero"), dy.partition((1, BN), padding="zero")
    pw = w.partition((BN,), padding="zero")
    mu = mean.partition((1,)).load((bm,)).reshape((1, 1))
    r = rstd.partition((1,)).load((bm,)).reshape((1, 1))
    n = x.extents[1].astype(f32)
    dxs = dx.subtiles((1, BN))
    c1 = tile.zeros((1, BN), f32)
    c2 = tile.zeros((1, BN), f32)
    for j in range(dxs.num_tiles[1]):
        xhat = tile.where(j * BN + tile.arange(BN) < x.extents[1], (px.load((bm, j)) - mu) * r, 0.0)
        wdy = pw.load((j,)).reshape((1, BN)) * pdy.load((bm, j))
        c1 += xhat * wdy
        c2 += wdy
    a = tile.sum(c1, axis=1, keepdims=True) / n
    c = tile.sum(c2, axis=1, keepdims=True) / n
    for j in range(dxs.num_tiles[1]):
        xhat = (px.load((bm, j)) - mu) * r
        dxs.store((pw.load((j,)).reshape((1, BN)) * pdy.load((bm, j)) - (xhat * a + c)) * r, (0, j))


@tile.entry
def ln_bwd_dwdb(
    dw: Mut[Tensor[f32, "BN"]],
    db: Mut[Tensor[f32, "BN"]],
    dy: Tensor[f32, (-1, -1)],
    x: Tensor[f32, (-1, -1)],
    mean: Tensor[f32, -1],
    rstd: Tensor[f32, -1],
    BM: Const[int],
) -> None:
    # cuTile accumulates dW/dB under a lock per row group; here each block owns BN columns and walks every row.
    bn = tile.block_id()[0]
    px, pdy = x.partition((BM, BN), padding="zero"), dy.partition((BM, BN), padding="zero")
    pm, pr = mean.partition((BM,), padding="zero"), rstd.partition((BM,), padding="zero")
    aw = tile.zeros((BM, BN), f32)
    ab = tile.zeros((BM, BN), f32)
    for i in range(px.num_tiles[0]):
        g = pdy.load((i, bn))
        aw += g * (px.load((i, bn)) - pm.load((i,)).reshape((BM, 1))) * pr.load((i,)).reshape((BM, 1))
        ab += g
    dw.store(tile.sum(aw, axis=0))
    db.store(tile.sum(ab, axis=0))


# -- RMSNorm backward (cutile-python test/kernels/rms_norm.py's forward, differentiated) -------------------------
@tile.entry
def rms_bwd(
    dx: Mut[Tensor[f32, ("BM", "NT")]],
    dy: Tensor[f32, (-1, -1)],
    x: Tensor[f32, (-1, -1)],
    w: Tensor[f32, -1],
    eps: float,
) -> None:
    bm = tile.block_id()[0]
    t = x.partition((BM, NT), padding="zero").load((bm, 0))
    g = dy.partition((BM, NT), padding="zero").load((bm, 0)) * w.partition((NT,), padding="zero").load((0,))
    n = x.extents[1].astype(f32)
    r = tile.rsqrt(tile.sum(t * t, axis=1, keepdims=True) / n + eps)
    dx.store(r * g - r * r * r * t * (tile.sum(g * t, axis=1, keepdims=True) / n))


# -- batched matmul (cutile-python samples/BatchMatMul.py, cutile-rs batch_matmul.rs) -----------------------------
@tile.entry
def bmm(
    c: Mut[Tensor[f32, (1, "BM", "BN")]], a: Tensor[f16, (-1, -1, -1)], b: Tensor[f16, (-1, -1, -1)], BK: Const[int]
) -> None:
    bb, bm, bn = tile.block_id()
    pa, pb = a.partition((1, BM, BK), padding="zero"), b.partition((1, BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(pa.num_tiles[2]):
        acc = tile.mma(pa.load((bb, bm, k)).reshape((BM, BK)), pb.load((bb, k, bn)).reshape((BK, BN)), acc)
    c.store(acc.reshape((1, BM, BN)))


# -- transpose (cutile-python samples/Transpose.py) ---------------------------------------------------------------
@tile.entry
def transpose(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]) -> None:
    bm, bn, _ = tile.block_id()
    z.store(tile.transpose(x.partition((BN, BM)).load((bn, bm))))


# -- fused bias + GELU(tanh) ---------------------------------------------------------------------------------------
@tile.function
def gelu_tanh(v):
    return 0.5 * v * (1.0 + tile.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)))


@tile.entry
def bias_gelu(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], bias: Tensor[f32, -1]) -> None:
    v = tile.load_tile_like(x, z) + bias.partition((BN,)).load((tile.block_id()[1],)).reshape((1, BN))
    z.store(gelu_tanh(v))


# -- fused MLP: relu(data @ w0 @ w1) (cutile-rs async_mlp_fused.rs) --------------------------------------------------
@tile.entry
def fused_mlp(
    out: Mut[Tensor[f32, "BM"]],
    d: Tensor[f32, (-1, -1)],
    w0: Tensor[f32, (-1, -1)],
    w1: Tensor[f32, -1],
    BN: Const[int],
    BK: Const[int],
) -> None:
    m = tile.block_id()[0]
    pd, p0 = d.partition((BM, BN), padding="zero"), w0.partition((BN, BK), padding="zero")
    p1 = w1.partition((BK,), padding="zero")
    acc = tile.zeros((BM, 1), f32)
    for k in range(p0.num_tiles[1]):
        h = tile.zeros((BM, BK), f32)
        for n in range(pd.num_tiles[1]):
            h = tile.mma(pd.load((m, n)), p0.load((n, k)), h)
        acc = tile.mma(h, p1.load((k,)).reshape((BK, 1)), acc)
    out.store(tile.maximum(acc.reshape((BM,)), 0.0))


# -- row argmax over column chunks (a top-1) ----------------------------------------------------------------------
@tile.entry
def row_argmax(
    idx: Mut[Tensor[i32, (1,)]], val: Mut[Tensor[f32, (1,)]], x: Tensor[f32, (-1, -1)], BN: Const[int]
) -> None:
    bm = tile.block_id()[0]
    px = x.partition((1, BN), padding="neg_inf")
    best = tile.full((1,), -math.inf, f32)
    arg = tile.zeros((1,), i32)
    for j in range(px.num_tiles[1]):
        t = px.load((bm, j))
        m = tile.max(t, axis=1)
        better = m > best  # strict: the first maximum wins, as numpy's argmax
        arg = tile.where(better, tile.argmax(t, axis=1) + j * BN, arg)
        best = tile.where(better, m, best)
    idx.store(arg)
    val.store(best)


# -- prefix sum in two passes: block scans and their totals, then each block adds the totals before it ----------
@tile.entry
def block_scan(z: Mut[Tensor[f32, "B"]], sums: Mut[Tensor[f32, (1,)]], x: Tensor[f32, -1]) -> None:
    c = tile.cumsum(tile.load_tile_like(x, z), axis=0)
    z.store(c)
    sums.store(c.extract((B - 1,), (1,)))


@tile.entry
def add_offsets(z: Mut[Tensor[f32, "B"]], part: Tensor[f32, -1], sums: Tensor[f32, -1], NB: Const[int]) -> None:
    s = sums.partition((NB,), padding="zero").load((0,))
    z.store(tile.load_tile_like(part, z) + tile.sum(tile.where(tile.arange(NB) < tile.block_id()[0], s, 0.0)))


# -- dropout with a counter hash (cutile-rs dropout.rs keeps the mask; this one derives it from a seed) -----------
@tile.function
def hash32(v):
    v = v ^ (v >> 16)
    v = v * 0x7FEB352D
    v = v ^ (v >> 15)
    v = v * 0x846CA68B
    return v ^ (v >> 16)


@tile.entry
def dropout(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], seed: int, p: float) -> None:
    h = hash32((tile.block_id()[0] * B + tile.arange(B)).astype(u32) ^ seed.astype(u32))
    keep = (h >> 8).astype(f32) * (1.0 / 16777216.0) >= p
    z.store(tile.where(keep, tile.load_tile_like(x, z) / (1.0 - p), 0.0))


# -- MoE experts: a grouped GEMM + SiLU over a tuple of tensors (cutile-python samples/MoE.py's expert GEMMs) ------
@tile.entry
def moe_experts(
    ys: tuple[Mut[Tensor[f32, ("BM", "BN")]], ...],
    xs: tuple[Tensor[f16, (-1, -1)], ...],
    ws: tuple[Tensor[f16, (-1, -1)], ...],
    BK: Const[int],
) -> None:
    for g in range(len(ys)):
        px, pw = xs[g].partition((BM, BK), padding="zero"), ws[g].partition((BK, BN), padding="zero")
        for at in ys[g].tiles():
            acc = tile.zeros((BM, BN), f32)
            for k in range(px.num_tiles[1]):
                acc = tile.mma(px.load((at[0], k)), pw.load((k, at[1])), acc)
            ys[g].store(acc / (1.0 + tile.exp(-acc)), at=at)


# -- unchecked: kernels that add into memory other blocks also touch ----------------------------------------------
@tile.entry(unchecked=True)
def splitk_gemm(
    c: Tensor[f32, (-1, -1)],
    a: Tensor[f32, (-1, -1)],
    b: Tensor[f32, (-1, -1)],
    BM: Const[int],
    BN: Const[int],
    BK: Const[int],
    KS: Const[int],
) -> None:
    bm, bn, s = tile.block_id()  # grid axis 2 splits K: each block sums KS k-tiles, then adds into c atomically
    pa, pb = a.partition((BM, BK), padding="zero"), b.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(s * KS, tile.minimum((s + 1) * KS, pa.num_tiles[1])):
        acc = tile.mma(pa.load((bm, k)), pb.load((k, bn)), acc)
    rows = bm * BM + tile.arange(BM).reshape((BM, 1))
    cols = bn * BN + tile.arange(BN).reshape((1, BN))
    ok = (rows < c.extents[0]) & (cols < c.extents[1])
    tile.atomic_add(c.ptr() + rows * c.extents[1] + cols, acc, mask=ok)


@tile.entry(unchecked=True)
def histogram(h: Tensor[i32, -1], x: Tensor[i32, -1], B: Const[int]) -> None:
    i = tile.block_id()[0] * B + tile.arange(B)
    v = x.partition((B,), padding="zero").load((tile.block_id()[0],))
    tile.atomic_add(h.ptr() + v, tile.ones((B,), i32), mask=(i < x.extents[0]) & (v >= 0) & (v < h.extents[0]))


@tile.entry(unchecked=True)
def embedding_bwd(
    dw: Tensor[f32, (-1, -1)], ids: Tensor[i32, -1], dy: Tensor[f32, (-1, -1)], BT: Const[int], D: Const[int]
) -> None:
    bt = tile.block_id()[0]
    rows = (bt * BT + tile.arange(BT)).reshape((BT, 1))
    idx = ids.partition((BT,), padding="zero").load((bt,)).reshape((BT, 1))
    cols = tile.arange(D).reshape((1, D))
    ok = (rows < ids.extents[0]) & (cols < dw.extents[1]) & (idx >= 0) & (idx < dw.extents[0])
    tile.atomic_add(dw.ptr() + idx * dw.extents[1] + cols, dy.partition((BT, D), padding="zero").load((bt, 0)), mask=ok)


@tile.entry(unchecked=True)
def conv2d_im2col(
    out: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1, -1)], w: Tensor[f32, (-1, -1, -1, -1)], BCI: Const[int]
) -> None:
    # out[(p, q), co] = sum_{r, s, ci} x[p + r, q + s, ci] * w[r, s, ci, co]: one HWC image, stride 1, no padding.
    # The shifted window x[p + r, q + s] is not a tile of x, so it is gathered (unchecked; see the module table).
    bm, bn, _ = tile.block_id()
    W, CI = x.extents[1], x.extents[2]
    Q = W - w.extents[1] + 1
    PQ = (x.extents[0] - w.extents[0] + 1) * Q
    m = bm * BM + tile.arange(BM).reshape((BM, 1))
    p, q = m // Q, m % Q
    pw = w.partition((1, 1, BCI, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for r in range(w.extents[0]):
        for s in range(w.extents[1]):
            for c in range(pw.num_tiles[2]):
                ci = c * BCI + tile.arange(BCI).reshape((1, BCI))
                a = tile.gather(x.ptr() + ((p + r) * W + (q + s)) * CI + ci, mask=(m < PQ) & (ci < CI), padding=0.0)
                acc = tile.mma(a, pw.load((r, s, c, bn)).reshape((BCI, BN)), acc)
    out.store(acc)


# -- forms Tile refuses: the natural safe split-K, and a store into the next block's tile --------------------------
@tile.entry
def split_k_into_own_tile(
    z: Mut[Tensor[f32, ("BM", "BN")]], a: Tensor[f32, (-1, -1)], b: Tensor[f32, (-1, -1)], BK: Const[int]
) -> None:
    bm, bn, s = tile.block_id()  # grid axis 2 over K: every s adds into the same output tile, a race
    pa, pb = a.partition((BM, BK), padding="zero"), b.partition((BK, BN), padding="zero")
    z.store(z.load() + tile.mma(pa.load((bm, s)), pb.load((s, bn)), tile.zeros((BM, BN), f32)))


@tile.entry
def store_next_blocks_tile(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]) -> None:
    z.partition((B,)).store(tile.load_tile_like(x, z), (tile.block_id()[0] + 1,))


# -- cross-entropy forward and backward in one pass (the target picked by compare, no gather) ---------------------
@tile.entry
def cross_entropy(
    loss: Mut[Tensor[f32, (1,)]], dx: Mut[Tensor[f32, (1, "NT")]], x: Tensor[f32, (-1, -1)], tgt: Tensor[i32, -1]
) -> None:
    bm = tile.block_id()[0]
    t = x.partition((1, NT), padding="neg_inf").load((bm, 0))
    m = tile.max(t, axis=1, keepdims=True)
    e = tile.exp(t - m)
    s = tile.sum(e, axis=1, keepdims=True)
    hit = tile.arange(NT).reshape((1, NT)) == tgt.partition((1,)).load((bm,)).reshape((1, 1))
    loss.store((m + tile.log(s)).reshape((1,)) - tile.sum(tile.where(hit, t, 0.0), axis=1))
    dx.store(e / s - tile.where(hit, 1.0, 0.0))


# -- rotary embedding: the two halves rotated and joined with cuTile's tile.cat((a, b), axis) ---------------------
@tile.entry
def rope(
    z: Mut[Tensor[f32, ("BT", "D")]], x: Tensor[f32, (-1, "D")], cos: Tensor[f32, (-1, -1)], sin: Tensor[f32, (-1, -1)]
) -> None:
    bt = tile.block_id()[0]
    px = x.partition((BT, D // 2), padding="zero")
    x1, x2 = px.load((bt, 0)), px.load((bt, 1))
    c = cos.partition((BT, D // 2), padding="zero").load((bt, 0))
    s = sin.partition((BT, D // 2), padding="zero").load((bt, 0))
    z.store(tile.cat((x1 * c - x2 * s, x2 * c + x1 * s), axis=1))


# -- a persistent residual add: inputs loaded at the index the z.tiles() walk hands out -------------------------
@tile.entry
def residual_scale(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)], r: Tensor[f32, (-1, -1)], alpha: float
) -> None:
    px, pr = x.partition((BM, BN), padding="zero"), r.partition((BM, BN), padding="zero")
    for idx in z.tiles():
        z.store(px.load(idx) * alpha + pr.load(idx), at=idx)
