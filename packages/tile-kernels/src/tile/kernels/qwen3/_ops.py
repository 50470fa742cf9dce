"""Launch wrappers of Qwen3's own kernels (``_qwen3_kernels.tilepy``): each checks its arguments, launches, waits and
returns the output tensor. Inputs are borrowed through fresh views (``t[()]``), as in the rest of `tile.kernels`."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import ArgumentError, Tensor
from tile.kernels import _args
from tile.kernels._source import kernels

__all__ = ["append_kv", "attention", "embed", "prep_q", "swiglu"]

_STEM = "_qwen3_kernels"


def embed(table: Tensor, ids: Tensor, *, n_ids: int, vocab: int, ids_host: list[int]) -> Tensor:
    """Rows ``table[ids]`` as a new ``(T, H)`` tensor; every id is checked against the vocabulary first."""
    bad = [i for i in ids_host if not 0 <= i < vocab]
    if bad:
        raise ArgumentError(f"qwen3: token id {bad[0]} is outside the vocabulary [0, {vocab})")
    h = table.shape[1]
    bh = min(_args.next_pow2(h), 1024)
    z = tile.empty(table.dtype, [n_ids, h]).partition([1, bh])
    return _args.first_output(kernels(_STEM).embed(z, table[()], ids[()]).sync())


def prep_q(x: Tensor, w: Tensor, *, cos: Tensor, sin: Tensor, pos: Tensor, eps: float) -> Tensor:
    """Per-head RMSNorm of the query heads ``x`` ``(T, heads, HD)``, then RoPE at positions ``pos + t``."""
    t, heads, hd = x.shape
    z = tile.empty(x.dtype, [t, heads, hd]).partition([1, 1, hd])
    k = kernels(_STEM)
    return _args.first_output(k.q_prep(z, x, w[()], cos[()], sin[()], pos[()], float(eps), HALF=hd // 2).sync())


def append_kv(
    cache: Tensor, x: Tensor, w: Tensor, *, cos: Tensor, sin: Tensor, pos: Tensor, eps: float, rope: bool
) -> Tensor:
    """Write the ``(T, kv_heads, HD)`` heads ``x`` into ``cache`` ``(kv_heads, S, HD)`` at positions ``pos + t``
    (normed and rotated when ``rope``); ``cache`` is moved in, use the returned one."""
    _, s, hd = cache.shape
    z = cache.partition([1, s, hd])
    k = kernels(_STEM)
    launch = k.kv_append(z, x, w[()], cos[()], sin[()], pos[()], float(eps), HALF=hd // 2, ROPE=rope)
    return _args.first_output(launch.sync())


def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, *, pos: Tensor, group: int, block: int) -> Tensor:
    """Causal grouped-query attention of ``q`` ``(T, heads, HD)`` (token t at position ``pos + t``) over the caches;
    returns ``(T, heads, HD)``."""
    t, heads, hd = q.shape
    z = tile.empty(q.dtype, [t, heads, hd]).partition([1, 1, hd])
    k = kernels(_STEM)
    launch = k.attention(z, q[()], k_cache[()], v_cache[()], pos[()], hd**-0.5, GROUP=group, BS=block)
    return _args.first_output(launch.sync())


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """``silu(gate) * up`` in f32, rounded to the inputs' dtype."""
    m, n = gate.shape
    bn = min(_args.next_pow2(n), 1024)
    z = tile.empty(gate.dtype, [m, n]).partition([1, bn])
    return _args.first_output(kernels(_STEM).swiglu(z, gate, up).sync())
