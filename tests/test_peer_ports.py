# ruff: noqa: E501
# (the docstring's table keeps one kernel per row)
"""Other people's kernels ported to Tile by a newcomer reading only docs/, each checked against numpy float64 at odd
shapes (no extent a multiple of its tile) on the CPU interpreter; the `gpu`-marked run repeats them at larger odd
shapes on the GPU. The kernels are in `peer_ports_kernels.py`, written in Tile's idiom (learned from the sources
below, not copied). Sources: cutile-python = NVIDIA/cutile-python, cutile-rs = NVlabs/cutile-rs.

| kernel | source sample | status | notes |
|---|---|---|---|
| `ln_fwd` (LayerNorm fwd, mean, rstd) | cutile-python test/kernels/layer_norm.py | passes | three outputs, one grid; row in `subtiles` chunks |
| `ln_bwd_dx` + `ln_bwd_dwdb` | cutile-python test/kernels/layer_norm.py | passes | cuTile adds dW/dB under a spin lock (`atomic_cas`); the safe form owns column tiles and walks the rows |
| `rms_bwd` (RMSNorm backward) | cutile-python test/kernels/rms_norm.py | passes; Tile bug fixed | a (4, 24) tile said only "powers of two": now names `[4, 32]` and that a tile may run past the end |
| `bmm` (batched matmul) | cutile-python samples/BatchMatMul.py, cutile-rs batch_matmul.rs | passes | 3-D partitions, reshape to 2-D for `mma` |
| `transpose` | cutile-python samples/Transpose.py | passes | a (BN, BM) input tile, `tile.transpose` |
| `bias_gelu` (fused bias + tanh GELU) | common fused epilogue | passes; missing form added | `math.sqrt(2.0 / math.pi)` in the helper was "cannot be called in kernel code": `math` functions of constants now fold |
| `fused_mlp` | cutile-rs async_mlp_fused.rs | passes | matrix-vector `mma` with a (BK, 1) tile |
| `row_argmax` (top-1 over chunks) | cutile-python test argmax ops | passes | `neg_inf` padding; first maximum wins as in numpy |
| `block_scan` + `add_offsets` (prefix sum) | scan over blocks | passes | two launches; the block totals are a second output |
| `dropout` (counter hash RNG) | cutile-rs dropout.rs | passes | u32 shifts/xor/multiply wrap as numpy's |
| `moe_experts` (grouped GEMM + SiLU) | cutile-python samples/MoE.py | passes | `tuple[Mut[...], ...]` on a persistent grid |
| `splitk_gemm` | cutile-python test matmul split-K | passes (unchecked); safe form refused | the natural safe form (grid axis 2 over K, `z.store(z.load() + acc)`) is a `GridError` naming `z.tiles()` |
| `histogram` | cutile-python test/test_atomic.py | passes (unchecked); Tile bug fixed | host `tile.cdiv(n, B)` for the grid raised a bare `TypeError`: now it computes, other ops raise `KernelOnlyError` |
| `embedding_bwd` | embedding backward with atomics | passes (unchecked) | rows scattered by index: `atomic_add` with a 2-D mask |
| `conv2d_im2col` | cutile-python experimental test_conv2d.py | passes (unchecked); missing form | see below |
| `cross_entropy` (loss and dlogits) | common fused softmax-xent | passes | the target picked with `arange == y` and `where`: no gather needed |
| `rope` (rotary embedding) | cutile-python FFT sample's `ct.cat((a, b), axis)` | passes; missing form added | `tile.cat((a, b), axis=1)` said "missing the argument 'y'": cuTile's tuple spelling now works |
| `residual_scale` (persistent) | cutile-rs persistent_gemm.rs's walk | passes; Tile bug fixed | `px.load(idx)` with `idx` from `z.tiles()` said "needs 2 coordinates, got 1": it now loads there |
| `clamp` / `maximum` of a NaN (probe) | cutile-python `ct.maximum(..., propagate_nan=)` | docs gap fixed; missing form added | `maxf` gives the non-NaN operand (numpy's `fmax`, not `maximum`), undocumented; `propagate_nan=True` now exists, also on `tile.max`/`tile.min` (corpus cases `nan_maximum`, `nan_row_max`) |
| store through `z.partition(...)` | (newcomer's split-K / scan attempt) | refused as unsafe; Tile bug fixed | said "only Mut outputs can be stored to" on a Mut output; now says another block owns that tile and names the three store forms |

Missing form (written down, not built): a *checked* gather from an input, e.g. ``x.gather(indices, padding=0)``
with indices a tile of element coordinates (one int tile per dim, broadcast together), lowered to `load_ptr_tko` on
the tensor's base and strides with a mask of ``0 <= idx[d] < x.extents[d]``. Inputs are shared read-only, so such a
read cannot race and the mask keeps it in bounds: it is safe, but today every gather needs ``unchecked=True``. It is
what an implicit-im2col convolution, a stencil or a shifted window (any tile not aligned to the partition grid) needs.

Also written down, not built: a persistent kernel with two outputs of one tile grid (LayerNorm's `y` with `mean`) cannot
store the second at the first's walk index (`w.store(t, at=idx)` with `idx` from `z.tiles()` is refused, "over this
same output"); it walks each output in its own loop today. Accepting it when both partitions have the same tile grid
would keep every tile to one block. `tile.argmax`/`tile.argmin` have no `propagate_nan=` yet (`tile.max`/`tile.min` do).

Run the GPU half with ``TILE_REQUIRE_GPU=1 pytest tests/test_peer_ports.py -m gpu -p no:cacheprovider -q``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f32, i32

if str(Path(__file__).parent) not in sys.path:  # the sibling kernel module, also when this file runs alone
    sys.path.insert(0, str(Path(__file__).parent))
import peer_ports_kernels as k

RNG = np.random.default_rng(7)
F32_MMA = 2e-3  # f32 `mma` error bound relative to the result's largest magnitude (room for a tf32-speed product)


COMPARED = [0]  # results compared with numpy so far: a port that compared nothing fails its test


def close(got: Any, want: Any, **tolerance: Any) -> None:
    np.testing.assert_allclose(got, want, **tolerance)
    COMPARED[0] += 1


def same(got: Any, want: Any) -> None:
    np.testing.assert_array_equal(got, want)
    COMPARED[0] += 1


def t(a: np.ndarray, dtype: type = np.float32) -> tile.Tensor:
    return tile.from_numpy(np.ascontiguousarray(a, dtype=dtype))


def layernorm(m: int, n: int) -> None:
    x, w, b, dy = (
        RNG.standard_normal((m, n)),
        RNG.standard_normal(n),
        RNG.standard_normal(n),
        RNG.standard_normal((m, n)),
    )
    eps = 1e-5
    mu = x.mean(1, keepdims=True)
    r = 1 / np.sqrt(x.var(1, keepdims=True) + eps)
    xhat = (x - mu) * r
    y, mean, rstd, *_ = k.ln_fwd(
        tile.empty(f32, [m, n]).partition([1, 1 << (n - 1).bit_length()]),
        tile.empty(f32, [m]).partition([1]),
        tile.empty(f32, [m]).partition([1]),
        t(x),
        t(w),
        t(b),
        eps,
        BN=16,
    ).sync()
    close(y.unpartition().to_numpy(), xhat * w + b, atol=2e-4)
    close(mean.unpartition().to_numpy(), mu[:, 0], atol=1e-5)
    close(rstd.unpartition().to_numpy(), r[:, 0], rtol=1e-4)
    wdy = w * dy
    dx_ref = (wdy - (xhat * (xhat * wdy).mean(1, keepdims=True) + wdy.mean(1, keepdims=True))) * r
    dx, *_ = k.ln_bwd_dx(
        tile.empty(f32, [m, n]).partition([1, 1 << (n - 1).bit_length()]),
        t(dy),
        t(x),
        t(w),
        t(mu[:, 0]),
        t(r[:, 0]),
        BN=16,
    ).sync()
    close(dx.unpartition().to_numpy(), dx_ref, atol=2e-4)
    dw, db, *_ = k.ln_bwd_dwdb(
        tile.empty(f32, [n]).partition([16]),
        tile.empty(f32, [n]).partition([16]),
        t(dy),
        t(x),
        t(mu[:, 0]),
        t(r[:, 0]),
        BM=8,
    ).sync()
    close(dw.unpartition().to_numpy(), (dy * xhat).sum(0), atol=1e-3)
    close(db.unpartition().to_numpy(), dy.sum(0), atol=1e-3)


def rms_backward(m: int, n: int) -> None:
    x, w, dy, eps = RNG.standard_normal((m, n)), RNG.standard_normal(n), RNG.standard_normal((m, n)), 1e-6
    r = 1 / np.sqrt((x * x).mean(1, keepdims=True) + eps)
    g = dy * w
    ref = r * g - r**3 * x * (g * x).mean(1, keepdims=True)
    dx, *_ = k.rms_bwd(tile.empty(f32, [m, n]).partition([4, 1 << (n - 1).bit_length()]), t(dy), t(x), t(w), eps).sync()
    close(dx.unpartition().to_numpy(), ref, atol=2e-4)


def batched_matmul(bs: int, m: int, n: int, kk: int) -> None:
    a, b = RNG.standard_normal((bs, m, kk)).astype(np.float16), RNG.standard_normal((bs, kk, n)).astype(np.float16)
    c, *_ = k.bmm(tile.empty(f32, [bs, m, n]).partition([1, 16, 16]), t(a, np.float16), t(b, np.float16), BK=16).sync()
    close(c.unpartition().to_numpy(), a.astype(np.float64) @ b.astype(np.float64), atol=2e-2)


def transpose(m: int, n: int) -> None:
    x = RNG.standard_normal((m, n))
    z, _ = k.transpose(tile.empty(f32, [n, m]).partition([16, 8]), t(x)).sync()
    same(z.unpartition().to_numpy(), x.T.astype(np.float32))


def bias_gelu(m: int, n: int) -> None:
    x, bias = RNG.standard_normal((m, n)), RNG.standard_normal(n)
    z, *_ = k.bias_gelu(tile.empty(f32, [m, n]).partition([8, 16]), t(x), t(bias)).sync()
    v = x.astype(np.float32).astype(np.float64) + bias.astype(np.float32)
    ref = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    close(z.unpartition().to_numpy(), ref, atol=1e-5)


def fused_mlp(m: int, n: int, kk: int) -> None:
    d, w0, w1 = RNG.standard_normal((m, n)), RNG.standard_normal((n, kk)), RNG.standard_normal(kk)
    out, *_ = k.fused_mlp(tile.empty(f32, [m]).partition([8]), t(d), t(w0), t(w1), BN=8, BK=4).sync()
    ref = np.maximum(d @ w0 @ w1, 0)
    close(out.unpartition().to_numpy(), ref, atol=F32_MMA * np.abs(ref).max())


def row_argmax(m: int, n: int) -> None:
    x = RNG.standard_normal((m, n)).astype(np.float32)
    x[0, [3, n - 1]] = 9.0  # a tie across chunks: the first one wins
    idx, val, *_ = k.row_argmax(
        tile.empty(i32, [m]).partition([1]), tile.empty(f32, [m]).partition([1]), t(x), BN=16
    ).sync()
    same(idx.unpartition().to_numpy(), x.argmax(1))
    same(val.unpartition().to_numpy(), x.max(1))


def prefix_sum(n: int, b: int) -> None:
    x, nb = RNG.standard_normal(n), tile.cdiv(n, b)  # cdiv on the host, as cuTile code sizes grids
    part, sums, _ = k.block_scan(tile.empty(f32, [n]).partition([b]), tile.empty(f32, [nb]).partition([1]), t(x)).sync()
    z, *_ = k.add_offsets(
        tile.empty(f32, [n]).partition([b]), part.unpartition(), sums.unpartition(), NB=1 << (nb - 1).bit_length()
    ).sync()
    close(z.unpartition().to_numpy(), np.cumsum(x), atol=1e-3 * math.sqrt(n))


def dropout(n: int) -> None:
    x, p, seed = RNG.standard_normal(n).astype(np.float32), 0.3, 1234
    z, *_ = k.dropout(tile.empty(f32, [n]).partition([128]), t(x), seed, p).sync()
    v = np.arange(n, dtype=np.uint32) ^ np.uint32(seed)
    for shift, mul in ((16, 0x7FEB352D), (15, 0x846CA68B)):
        v = ((v ^ (v >> np.uint32(shift))) * np.uint32(mul)).astype(np.uint32)
    keep = ((v ^ (v >> np.uint32(16))) >> np.uint32(8)).astype(np.float64) / 16777216.0 >= p
    assert 0.6 < keep.mean() < 0.8  # the hash is not degenerate
    close(z.unpartition().to_numpy(), np.where(keep, x / np.float32(1 - p), 0), rtol=1e-6)


def moe(tokens: tuple[int, ...], d: int, f: int) -> None:
    xs = [RNG.standard_normal((n, d)).astype(np.float16) for n in tokens]
    ws = [RNG.standard_normal((d, f)).astype(np.float16) for _ in tokens]
    ys = tuple(tile.empty(f32, [n, f]).partition([16, 16]) for n in tokens)
    ys, *_ = k.moe_experts.grid((5,))(
        ys, tuple(t(a, np.float16) for a in xs), tuple(t(w, np.float16) for w in ws), BK=16
    ).sync()
    for y, a, w in zip(ys, xs, ws, strict=True):
        h = a.astype(np.float64) @ w.astype(np.float64)
        close(y.unpartition().to_numpy(), h / (1 + np.exp(-h)), atol=2e-2, rtol=1e-3)


def splitk(m: int, n: int, kk: int) -> None:
    a, b = RNG.standard_normal((m, kk)), RNG.standard_normal((kk, n))
    ks = 3
    grid = (tile.cdiv(m, 16), tile.cdiv(n, 16), tile.cdiv(tile.cdiv(kk, 8), ks))
    c, *_ = k.splitk_gemm.grid(grid)(tile.zeros(f32, [m, n]), t(a), t(b), BM=16, BN=16, BK=8, KS=ks).sync()
    close(c.to_numpy(), a @ b, atol=F32_MMA * np.abs(a @ b).max())


def histogram(n: int, bins: int) -> None:
    x = RNG.integers(-1, bins + 1, n).astype(np.int32)  # out-of-range values are skipped by the mask
    h, *_ = k.histogram.grid((tile.cdiv(n, 128),))(tile.zeros(i32, [bins]), t(x, np.int32), B=128).sync()
    same(h.to_numpy(), np.bincount(x[(x >= 0) & (x < bins)], minlength=bins))


def embedding_backward(vocab: int, tokens: int, dim: int) -> None:
    ids, dy = RNG.integers(0, vocab, tokens).astype(np.int32), RNG.standard_normal((tokens, dim))
    dw, *_ = k.embedding_bwd.grid((tile.cdiv(tokens, 8),))(
        tile.zeros(f32, [vocab, dim]), t(ids, np.int32), t(dy), BT=8, D=1 << (dim - 1).bit_length()
    ).sync()
    ref = np.zeros((vocab, dim))
    np.add.at(ref, ids, dy)
    close(dw.to_numpy(), ref, atol=1e-4)


def conv2d(h: int, w: int, ci: int, r: int, s: int, co: int) -> None:  # noqa: PLR0917  # one shape per arg
    x, wt = RNG.standard_normal((h, w, ci)), RNG.standard_normal((r, s, ci, co))
    p, q = h - r + 1, w - s + 1
    out, *_ = k.conv2d_im2col(tile.empty(f32, [p * q, co]).partition([16, 8]), t(x), t(wt), BCI=4).sync()
    ref = sum(np.einsum("pqc,cd->pqd", x[i : i + p, j : j + q], wt[i, j]) for i in range(r) for j in range(s))
    close(out.unpartition().to_numpy(), np.reshape(ref, (p * q, co)), atol=F32_MMA * np.abs(ref).max())


def cross_entropy(m: int, n: int) -> None:
    x, y = RNG.standard_normal((m, n)), RNG.integers(0, n, m).astype(np.int32)
    loss, dx, *_ = k.cross_entropy(
        tile.empty(f32, [m]).partition([1]),
        tile.empty(f32, [m, n]).partition([1, 1 << (n - 1).bit_length()]),
        t(x),
        t(y, np.int32),
    ).sync()
    x32 = x.astype(np.float32).astype(np.float64)
    lse = np.log(np.exp(x32 - x32.max(1, keepdims=True)).sum(1)) + x32.max(1)
    close(loss.unpartition().to_numpy(), lse - x32[np.arange(m), y], atol=1e-5)
    grad = np.exp(x32 - lse[:, None])
    grad[np.arange(m), y] -= 1
    close(dx.unpartition().to_numpy(), grad, atol=1e-6)


def rope(tokens: int, d: int) -> None:
    x, ang = RNG.standard_normal((tokens, d)), RNG.uniform(0, 2 * math.pi, (tokens, d // 2))
    z, *_ = k.rope(tile.empty(f32, [tokens, d]).partition([8, d]), t(x), t(np.cos(ang)), t(np.sin(ang))).sync()
    x1, x2, c, s = x[:, : d // 2], x[:, d // 2 :], np.cos(ang), np.sin(ang)
    close(z.unpartition().to_numpy(), np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], 1), atol=1e-5)


def residual_scale(m: int, n: int, blocks: int) -> None:
    x, r = RNG.standard_normal((m, n)), RNG.standard_normal((m, n))
    z, *_ = k.residual_scale.grid((blocks,))(tile.empty(f32, [m, n]).partition([16, 16]), t(x), t(r), 0.5).sync()
    close(z.unpartition().to_numpy(), 0.5 * x + r, atol=1e-6)


# Each port at small odd shapes (CPU) and at larger odd ones (GPU).
PORTS: dict[str, tuple[Callable[..., None], tuple[object, ...], tuple[object, ...]]] = {
    "layernorm": (layernorm, (13, 37), (301, 1000)),
    "rms_backward": (rms_backward, (11, 24), (257, 1000)),
    "batched_matmul": (batched_matmul, (3, 19, 21, 35), (5, 333, 200, 129)),
    "transpose": (transpose, (23, 41), (1001, 777)),
    "bias_gelu": (bias_gelu, (17, 45), (1003, 999)),
    "fused_mlp": (fused_mlp, (21, 19, 13), (515, 129, 67)),
    "row_argmax": (row_argmax, (7, 53), (299, 4097)),
    "prefix_sum": (prefix_sum, (1000, 128), (100_003, 1024)),
    "dropout": (dropout, (999,), (1_000_001,)),
    "moe": (moe, ((5, 17, 33), 24, 40), ((7, 300, 1001), 96, 200)),
    "splitk": (splitk, (19, 21, 70), (301, 257, 1999)),
    "histogram": (histogram, (1001, 10), (1_000_003, 97)),
    "embedding_backward": (embedding_backward, (11, 37, 20), (1000, 5003, 100)),
    "conv2d": (conv2d, (9, 11, 5, 3, 2, 7), (33, 47, 19, 3, 3, 29)),
    "cross_entropy": (cross_entropy, (9, 37), (257, 4001)),
    "rope": (rope, (13, 16), (1001, 128)),
    "residual_scale": (residual_scale, (37, 45, 3), (1003, 2049, 132)),
}


@pytest.fixture
def cpu() -> Iterator[None]:
    previous = tile.backend()
    tile.set_backend("cpu")
    yield
    tile.set_backend(previous)


@pytest.mark.usefixtures("cpu")
@pytest.mark.parametrize("name", PORTS)
def test_port_on_the_interpreter(name: str) -> None:
    run, small, _ = PORTS[name]
    before = COMPARED[0]
    run(*small)
    assert COMPARED[0] > before, f"{name} compared no result with numpy"


@pytest.mark.gpu
@pytest.mark.parametrize("name", PORTS)
def test_port_on_the_gpu(name: str) -> None:
    run, _, large = PORTS[name]
    before = COMPARED[0]
    run(*large)
    assert COMPARED[0] > before, f"{name} compared no result with numpy"


@pytest.mark.usefixtures("cpu")
def test_split_k_by_storing_into_the_shared_tile_is_refused() -> None:
    """The natural safe split-K (grid axis 2 over K, every block adding into its output tile) would race: the launch
    refuses the grid before anything moves and says how to launch any grid safely."""
    a, b = t(RNG.standard_normal((9, 40))), t(RNG.standard_normal((40, 10)))
    z = tile.zeros(f32, [9, 10]).partition([16, 16])
    with pytest.raises(tile.GridError, match=r"differs from the grid \[1, 1\] of output 'z'.*z\.tiles\(\)"):
        k.split_k_into_own_tile.grid((1, 1, 3))(z, a, b, BK=16)
    assert not z.moved


@pytest.mark.usefixtures("cpu")
def test_store_through_an_output_view_is_refused_at_the_line() -> None:
    with pytest.raises(tile.CompileError, match="reads any tile but writes none") as info:
        k.store_next_blocks_tile.compile(tile.zeros(f32, [37]).partition([8]), tile.zeros(f32, [37]))
    assert info.value.line == k.store_next_blocks_tile.fn.__code__.co_firstlineno + 2
