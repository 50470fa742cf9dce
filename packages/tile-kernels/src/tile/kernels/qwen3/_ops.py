"""Launch makers of Qwen3's own kernels (``_qwen3_kernels.tilepy``): the fusions the library does not have (per-head
RMSNorm with RoPE from the fused q/k/v rows and the KV-cache append, in one launch, and the causal attention of a
multi-token pass starting at a device-side position; decode uses `tile.kernels.decode_attention_op`). Each checks its
arguments and
returns the launch, not run yet, so a whole step composes as one ``.then()`` chain. The output is always the launch's
first argument (a partition: ``out[0].unpartition()`` passes it on). Activation inputs may be tensors in flight (moved
into the launch, which runs after their writer); the others are borrowed through fresh views (``t[()]``), as in the rest
of `tile.kernels`. Activations are 2-D rows ``(T, heads * head_dim)``, so no launch needs a view of a tensor in flight.
"""

from __future__ import annotations

from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Tensor
from tile.kernels import _args
from tile.kernels._source import kernels

__all__ = ["attention", "prep_qkv"]

_STEM = "_qwen3_kernels"
Op = DeviceOp[tuple[Any, ...]]


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
) -> Op:
    """One launch from the fused q/k/v rows ``qkv`` ``(T, (heads + 2 * kv_heads) * HD)`` at positions ``pos + t``:
    the first ``heads`` heads RMSNormed (``wq``) and rotated into a new ``(T, heads * HD)``, and both caches
    ``(kv_heads, S, HD)`` written: keys from the ``kv_heads`` heads after the queries (normed with ``wk``, rotated),
    values from the ``kv_heads`` after those (as is).

    The launch runs on the query output's grid (a block per token and query head); the caches are walked with
    ``tiles()``, so each KV head's caches belong to one block. The caches are moved in: the launch's outputs are
    ``(q, k_cache, v_cache, ...)``, the first three partitions."""
    kv, s, hd = k_cache.shape
    n = qkv.shape[0]
    if qkv.shape[1] != (heads + 2 * kv) * hd:
        raise ArgumentError(
            f"prep_qkv: qkv has {qkv.shape[1]} columns, expected ({heads} + 2 * {kv}) heads of {hd}; pass the fused "
            "q/k/v rows of this model"
        )
    z = tile.empty(qkv.dtype, [n, heads * hd]).partition([1, hd])
    zk, zv = k_cache.partition([1, s, hd]), v_cache.partition([1, s, hd])
    x = _args.operand(qkv, "qkv", "prep_qkv")
    launch = kernels(_STEM).qkv_prep.grid((n, heads))
    args = (x, wq[()], wk[()], cos[()], sin[()], pos[()], float(eps))
    made: Op = launch(z, zk, zv, *args, HALF=hd // 2, OFF=heads, KV=kv)
    return made


def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, *, pos: Tensor, group: int, block: int) -> Op:
    """Causal grouped-query attention of ``q`` ``(T, heads * HD)`` (token t at position ``pos + t``) over the caches
    (``(kv_heads, S, HD)``, in flight or borrowed); into a new ``(T, heads * HD)``."""
    hd = k_cache.shape[-1]
    z = tile.empty(q.dtype, list(q.shape)).partition([1, hd])
    qs, ks, vs = (_args.operand(t, n, "attention") for t, n in ((q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache")))
    made: Op = kernels(_STEM).attention(z, qs, ks, vs, pos[()], hd**-0.5, GROUP=group, BS=block)
    return made
