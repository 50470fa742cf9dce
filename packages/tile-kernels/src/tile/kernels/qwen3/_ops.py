"""Launch makers of Qwen3's own kernels (``_qwen3_kernels.tilepy``): the fusions the library does not have (per-head
RMSNorm with RoPE from the fused q/k/v rows and its KV-cache append; attention is the library's:
`tile.kernels.decode_attention_op` for one token, `tile.kernels.attention_op` on the q rows for several). Each checks
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
from tile.frontend import Tensor
from tile.kernels import _args
from tile.kernels._source import kernels

__all__ = ["append_kv", "append_kv_chunks", "prep_q"]

_STEM = "_qwen3_kernels"
Op = DeviceOp[tuple[Any, ...]]


def prep_q(qkv: Tensor, w: Tensor, *, heads: int, cos: Tensor, sin: Tensor, pos: Tensor, eps: float) -> Op:
    """Per-head RMSNorm of the first ``heads`` heads of the fused q/k/v rows ``qkv`` ``(T, *)``, then RoPE at positions
    ``pos + t``; into a new ``(T, heads * HD)``."""
    hd = w.shape[-1]
    z = tile.empty(qkv.dtype, [qkv.shape[0], heads * hd]).partition([1, hd])
    x = _args.operand(qkv, "qkv", "prep_q")
    made: Op = kernels(_STEM).q_prep(z, x, w[()], cos[()], sin[()], pos[()], float(eps), HALF=hd // 2)
    return made


def append_kv(
    k_cache: Tensor,
    v_cache: Tensor,
    qkv: Tensor,
    w: Tensor,
    *,
    offset: int,
    cos: Tensor,
    sin: Tensor,
    pos: Tensor,
    eps: float,
) -> Op:
    """One launch writing both caches ``(kv_heads, S, HD)`` at positions ``pos + t``: keys from heads ``offset ..`` of
    the fused rows ``qkv`` (normed with ``w`` and rotated), values from the ``kv_heads`` heads after them (as is).
    The caches are moved in: the launch's first two output partitions are the key and value caches."""
    kv, s, hd = k_cache.shape
    zk, zv = k_cache.partition([1, s, hd]), v_cache.partition([1, s, hd])
    x = _args.operand(qkv, "qkv", "append_kv")
    k = kernels(_STEM)
    made: Op = k.kv_append(zk, zv, x, w[()], cos[()], sin[()], pos[()], float(eps), HALF=hd // 2, OFF=offset, KV=kv)
    return made


APPEND_TOKENS = 16
"""Cache positions one block of `append_kv_chunks` owns (so it writes at most this many tokens)."""


def append_kv_chunks(
    k_cache: Tensor,
    v_cache: Tensor,
    qkv: Tensor,
    w: Tensor,
    *,
    offset: int,
    cos: Tensor,
    sin: Tensor,
    pos: Tensor,
    eps: float,
) -> Op:
    """`append_kv` for many tokens: the same writes, by one block per (KV head, `APPEND_TOKENS` cache positions)
    instead of one per KV head looping over every token (a multi-token pass's append in parallel)."""
    kv, s, hd = k_cache.shape
    bt = min(APPEND_TOKENS, s)
    zk, zv = k_cache.partition([1, bt, hd]), v_cache.partition([1, bt, hd])
    x = _args.operand(qkv, "qkv", "append_kv_chunks")
    k = kernels(_STEM)
    made: Op = k.kv_append_chunks(
        zk, zv, x, w[()], cos[()], sin[()], pos[()], float(eps), HALF=hd // 2, OFF=offset, KV=kv
    )
    return made
