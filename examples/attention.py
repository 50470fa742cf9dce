# ruff: noqa: F821, N803, PLR0917
# Kernel-language source: shape strings such as "BM" are const generics the compiler binds, declared at module level
# (`BM: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Flash-attention forward (causal and not) in the fast form: the forms fast kernels need, all safe.

- K^T tiles come through an ordered partition view, ``k.partition((1, D, BN), order=(0, 2, 1))``: the view walks
  K's head dim along the tile's rows, so tileiras can load the transposed tile with the tensor-memory (TMA)
  path, with no permute in registers;
- the online softmax uses ``tile.exp2(..., flush_to_zero=True)`` with the scale folded into log2(e);
- the key tiles run in two loops, the ones that need no mask first (cuTile Python's compiler splits its loop there);
- the masked loop applies the mask as ``s + where(keep, 0, -inf)`` (cuTile's form) for query tiles of 64 rows and
  as ``where(keep, s, -inf)`` for larger ones. In SASS (sm_90, ``benchmarks/fmha_sass.py``): with 64-row tiles at
  occupancy 4 (64 registers a thread) the ``where(keep, s, ..)`` form keeps the compare results alive across the
  MMA's wait, and tileiras parks them in general registers (13 predicated ``LOP3`` and 13 re-tests per iteration, 2
  spills: 406 instructions in the masked loop against cuTile's 372); the additive form compiles to cuTile's loop
  exactly. With 128-row tiles the ``where`` form is the shorter one (632 against 692 at 128/64), and the additive
  form changes tileiras's shared-memory plan there (50 KB and an extra barrier against cuTile's 66 KB);
- the final normalisation is an approximate division, ``tile.truediv(acc, l, rounding="approx")``;
- ``occupancy`` asks for two blocks per SM on Hopper (``tile.by_arch``: other GPUs take the ``default`` entry);
- ``o.tiles()`` hands each block its (batch*head, query-tile) tile with the query tile fastest, so blocks running
  together share one head's K and V in L2 (cuTile's grid order).

Tensors are (batch * heads, seq, head_dim): Tile partitions tensors of rank 1 to 3, and a contiguous (batch, heads,
seq, head_dim) tensor is that same memory.

Run: ``python examples/attention.py`` (the CPU interpreter on a tiny shape when no GPU is visible); the GPU
benchmark against cuTile Python's FMHA sample and torch SDPA is ``benchmarks/bench_lang_fmha.py``.
"""

import math

import numpy as np

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f16, f32
from tile.frontend.kernel_types import Tile

LOG2E = 1.4426950408889634

# Const generics: the compiler binds them from the kernel's annotations; declared here for type checkers.
BM: int
D: int


@tile.function
def softmax_step(s: Tile, m_i: Tile, l_i: Tile, scale: float) -> tuple[Tile, Tile, Tile, Tile]:
    """One key tile of the online softmax in base 2: ``(p, alpha, m_ij, l_i)`` after the scores ``s``.

    It touches no memory: the caller loads the value tile after it, right before the product that needs it (as
    cuTile's sample does), so the values do not hold registers while the scores are exponentiated.
    """
    m_ij = tile.maximum(m_i, tile.max(s, axis=1, keepdims=True) * scale)
    p = tile.exp2(s * scale - m_ij, flush_to_zero=True)
    alpha = tile.exp2(m_i - m_ij, flush_to_zero=True)
    l_i = l_i * alpha + tile.sum(p, axis=1, keepdims=True)
    return p, alpha, m_ij, l_i


@tile.function
def attend(
    qt: Tile,
    k: Tensor[f16, (-1, -1, "D")],
    v: Tensor[f16, (-1, -1, "D")],
    bh: Tile,
    m: Tile,
    n_k: Tile,
    scale: float,
    BM: int,
    BN: int,
    D: int,
    CAUSAL: bool,
    EVEN_K: bool,
) -> Tile:
    """One (BM, D) tile of softmax(q k^T * scale) v, f32 accumulation, online softmax in base 2.

    The key tiles split in two loops, as cuTile Python's compiler splits its loop at ``j >= mask_start``: tiles
    below ``mask_start`` need no mask (the tight loop), the rest (the causal diagonal, a partial last tile) do.
    The tight loop reads whole tiles only, so its views need no padding; the masked loop's views pad a partial last
    key tile with zeros (its scores are masked to -inf anyway).
    """
    pk = k.partition((1, D, BN), order=(0, 2, 1))  # tiles of K^T: (D, BN), whole tiles only
    pv = v.partition((1, BN, D))
    pk_edge = k.partition((1, D, BN), order=(0, 2, 1), padding="zero")
    pv_edge = v.partition((1, BN, D), padding="zero")
    m_i = tile.full((BM, 1), -math.inf, f32)
    l_i = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    if CAUSAL:
        # Key tiles at or before the query tile's last row; the minimum with the tile count proves the loads in range.
        end = tile.minimum(tile.cdiv((m + 1) * BM, BN), pk.num_tiles[2])
        mask_start = tile.minimum(m * BM // BN, n_k // BN)  # key tiles from here on need the mask
    else:
        end = pk.num_tiles[2]
        mask_start = n_k // BN  # only a partial last key tile needs a mask
    unmasked = tile.minimum(mask_start, end) if CAUSAL or not EVEN_K else end
    for j in range(unmasked):
        kt = pk.load((bh, 0, j), latency=2).reshape((D, BN))  # K^T straight from memory
        s = tile.mma(qt, kt, tile.zeros((BM, BN), f32))
        p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, scale)
        acc = tile.mma(p.astype(f16), pv.load((bh, j, 0), latency=4).reshape((BN, D)), acc * alpha)
    if CAUSAL or not EVEN_K:  # a compile-time if: full, even attention has no masked loop
        rows = m * BM + tile.arange(BM).reshape((BM, 1))
        for j in range(tile.maximum(unmasked, 0), end):  # maximum(.., 0): j >= 0, so the loads stay proven
            kt = pk_edge.load((bh, 0, j), latency=2).reshape((D, BN))
            s = tile.mma(qt, kt, tile.zeros((BM, BN), f32))
            cols = j * BN + tile.arange(BN).reshape((1, BN))
            # Causal over keys that end on a tile edge: a row's own limit is the only one (rows < n_k there).
            if CAUSAL and EVEN_K:
                keep = rows >= cols
            elif CAUSAL:
                keep = (cols < n_k) & (rows >= cols)
            else:
                keep = cols < n_k
            # The mask's form by the query tile's rows (a compile-time choice; the module docstring says why).
            s = s + tile.where(keep, 0.0, -math.inf) if BM <= 64 else tile.where(keep, s, -math.inf)
            p, alpha, m_i, l_i = softmax_step(s, m_i, l_i, scale)
            acc = tile.mma(p.astype(f16), pv_edge.load((bh, j, 0), latency=4).reshape((BN, D)), acc * alpha)
    return tile.truediv(acc, l_i, rounding="approx", flush_to_zero=True)


@tile.entry(occupancy=tile.by_arch(sm_90=2, default=1))
def attention(
    o: Mut[Tensor[f16, (1, "BM", "D")]],
    q: Tensor[f16, (-1, -1, "D")],
    k: Tensor[f16, (-1, -1, "D")],
    v: Tensor[f16, (-1, -1, "D")],
    qk_scale: float,
    BN: Const[int],
    CAUSAL: Const[bool],
    EVEN_K: Const[bool],
) -> None:
    pq = q.partition((1, BM, D))
    for idx in o.tiles():
        bh, m, _ = idx
        qt = pq.load((bh, m, 0)).reshape((BM, D))
        out = attend(qt, k, v, bh, m, k.shape[1], qk_scale * LOG2E, BM, BN, D, CAUSAL, EVEN_K)
        o.store(out.astype(f16).reshape((1, BM, D)), at=idx)


def launch(q: tile.Tensor, k: tile.Tensor, v: tile.Tensor, *, causal: bool, bm: int, bn: int) -> tile.Launch:
    """``attention`` over (batch * heads, seq, head_dim) tensors; the launch hands back ``(o, q, k, v, ...)``."""
    bh, s, d = q.shape
    o = tile.empty(f16, [bh, s, d]).partition([1, bm, d])
    return attention(o, q, k, v, 1 / math.sqrt(d), bn, causal, s % bn == 0)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v in float64."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.asarray(p @ v / p.sum(-1, keepdims=True))


def main() -> None:
    gpu = tile.backend() == "gpu"
    b, h, d = (2, 8, 64) if gpu else (1, 2, 32)
    bm, bn = (128, 64) if gpu else (32, 16)
    lengths = (512, 500) if gpu else (64, 72)  # a multiple of the key tile, and one with a partial last tile
    for s in lengths:
        for causal in (False, True):
            q, k, v = (tile.randn(f16, [b * h, s, d]) for _ in range(3))
            o, q, k, v, *_ = launch(q, k, v, causal=causal, bm=bm, bn=bn).sync()
            ref = reference(q.to_numpy(), k.to_numpy(), v.to_numpy(), causal)
            np.testing.assert_allclose(o.unpartition().to_numpy().astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    print(f"attention: {b}x{h}x{lengths}x{d} f16, causal and not, on {tile.backend()}, matches float64: OK")


if __name__ == "__main__":
    main()
