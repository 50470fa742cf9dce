"""Launch makers of Qwen3's own kernels (``_qwen3_kernels.tilepy``): the fusion the library does not have (per-head
RMSNorm with RoPE from the fused q/k/v rows and the KV-cache append, in one launch); attention is the library's
(`tile.kernels.decode_attention_op` for one token, `tile.kernels.attention_op` on the q rows for several). It checks
its arguments and returns the launch, not run yet, so a whole step composes as one ``.then()`` chain. The output is
always the launch's first argument (a partition: ``out[0].unpartition()`` passes it on). Activation inputs may be
tensors in flight (moved into the launch, which runs after their writer); the others are borrowed through fresh views
(``t[()]``), as in the rest of `tile.kernels`. Activations are 2-D rows ``(T, heads * head_dim)``, so no launch needs a
view of a tensor in flight.
"""

from __future__ import annotations

from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Tensor
from tile.kernels import _args
from tile.kernels._source import kernels

__all__ = ["APPEND_TOKENS", "prep_qkv"]

_STEM = "_qwen3_kernels"
Op = DeviceOp[tuple[Any, ...]]
APPEND_TOKENS = 16
"""Cache positions per cache tile of a multi-token pass's `prep_qkv` (``tokens=``): each tile's block writes at most
this many tokens, so a long prompt's keys and values are written by many blocks in parallel."""


def prep_qkv(
    k_cache: Tensor,
    v_cache: Tensor,
    qkv: Tensor,
    wq: Tensor,
    wk: Tensor,
    *,
    heads: int,
    cos: Tensor,
    sin: Tensor,
    pos: Tensor,
    eps: float,
    tokens: int | None = None,
) -> Op:
    """One launch from the fused q/k/v rows ``qkv`` ``(T, (heads + 2 * kv_heads) * HD)`` at positions ``pos + t``:
    the first ``heads`` heads RMSNormed (``wq``) and rotated into a new ``(T, heads * HD)``, and both caches
    ``(kv_heads, S, HD)`` written: keys from the ``kv_heads`` heads after the queries (normed with ``wk``, rotated),
    values from the ``kv_heads`` after those (as is).

    The launch runs on the query output's grid (a block per token and query head); the caches are cut into tiles of
    ``tokens`` positions (default all ``S``: one tile per KV head, as decode wants) walked with ``tiles()``, so each
    tile belongs to one block, which writes the new tokens that land in it (at most ``tokens``: a multi-token pass
    passes `APPEND_TOKENS` so many blocks share the writes). The caches are moved in: the launch's outputs are
    ``(q, k_cache, v_cache, ...)``, the first three partitions."""
    kv, s, hd = k_cache.shape
    n = qkv.shape[0]
    if qkv.shape[1] != (heads + 2 * kv) * hd:
        raise ArgumentError(
            f"prep_qkv: qkv has {qkv.shape[1]} columns, expected ({heads} + 2 * {kv}) heads of {hd}; pass the fused "
            "q/k/v rows of this model"
        )
    z = tile.empty(qkv.dtype, [n, heads * hd]).partition([1, hd])
    bt = s if tokens is None else _args.integer(tokens, "tokens", "prep_qkv")
    if not 1 <= bt <= s or bt & (bt - 1):
        raise ArgumentError(
            f"prep_qkv: tokens={bt}; a cache tile holds a power of two of positions, from 1 to the cache's {s}"
        )
    zk, zv = k_cache.partition([1, bt, hd]), v_cache.partition([1, bt, hd])
    x = _args.operand(qkv, "qkv", "prep_qkv")
    launch = kernels(_STEM).qkv_prep.grid((n, heads))
    args = (x, wq[()], wk[()], cos[()], sin[()], pos[()], float(eps))
    made: Op = launch(z, zk, zv, *args, HALF=hd // 2, OFF=heads, KV=kv)
    return made
