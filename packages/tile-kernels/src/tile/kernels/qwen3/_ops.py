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

import functools
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Kernel, Tensor
from tile.kernels import _args
from tile.kernels._source import kernels, pdl_requested

__all__ = ["APPEND_TOKENS", "PREP_GROUP", "PREP_OCCUPANCY", "prep_qkv"]

_STEM = "_qwen3_kernels"
Op = DeviceOp[tuple[Any, ...]]
APPEND_TOKENS = 32
"""Tokens per block of a multi-token pass's `prep_qkv` (``tokens=``): each block norms and rotates one query head of
this many tokens (one ``(tokens, head_dim)`` tile, where decode's form takes one token a block), and the caches are
cut in tiles of this many positions, each tile's block writing the new tokens that land in it, so a long prompt's
keys and values are written by many blocks in parallel. Candidates to time on a GPU: 16, 32 (default), 64
(``benchmarks/prep_sweep.py``)."""
PREP_GROUP = 1
"""Query heads per block of a multi-token pass's `prep_qkv` (``group=`` overrides it): the block loads its tokens'
RoPE rows once for them. With the model's f32 tables tileiras converts each head's rotation between register layouts
through shared memory of its own (the loop over heads is unrolled), so more than one costs occupancy; with bf16
tables there is no conversion and ``heads // kv_heads`` gives every block the same work (one key and one value tile
when the cache is the pass's length). Candidates: 1 (default), 2, ``heads // kv_heads``."""
PREP_OCCUPANCY = 4
"""Blocks per SM that tileiras compiles a multi-token pass's `prep_qkv` for (``occupancy=`` overrides it; 0 gives no
hint). Without a hint tileiras spends up to 255 registers and 84 KB of shared memory (32 tokens, f32 tables) on one
block: two blocks fit an SM. With 4: 117 registers, 51 KB, four blocks (sm_90, SASS). Candidates: 0, 2, 4
(default), 8. With f32 tables and more than one head a block, 0 is refused: tileiras 13.5 compiles that form to write
past its own shared memory (compute-sanitizer memcheck)."""


def _rows_kernel(occupancy: int) -> Kernel:
    """``qkv_prep_rows`` with an occupancy hint when ``occupancy`` > 0 (a kernel object of its own, compiled apart);
    the PDL one inside ``launch_pdl(True)`` (see `tile.kernels._source`)."""
    return _rows_kernel_of(occupancy, pdl_requested())


@functools.cache
def _rows_kernel_of(occupancy: int, pdl: bool) -> Kernel:
    base: Kernel = kernels(_STEM).qkv_prep_rows  # (kernels() reads the same request as `pdl`)
    return base if occupancy == 0 else tile.entry(occupancy=occupancy, pdl=base.options.pdl)(base.fn)


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
    start: int | None = None,
    group: int | None = None,
    occupancy: int | None = None,
) -> Op:
    """One launch from the fused q/k/v rows ``qkv`` ``(T, (heads + 2 * kv_heads) * HD)`` at positions ``pos + t``:
    the first ``heads`` heads RMSNormed (``wq``) and rotated into a new ``(T, heads * HD)``, and both caches
    ``(kv_heads, S, HD)`` written: keys from the ``kv_heads`` heads after the queries (normed with ``wk``, rotated),
    values from the ``kv_heads`` after those (as is).

    Decode's form (``tokens`` None) runs on the query output's grid of a block per token and query head (for one
    token, ``qkv_prep_one``: loads straight to registers, no loop over tokens), the caches
    one tile per KV head (walked with ``tiles()``: each tile belongs to one block), the position read from ``pos``
    only (a captured decode graph rewrites it between replays). A multi-token pass passes ``tokens`` (a power of
    two, `APPEND_TOKENS` in the model) and ``start``, the position of its first token on the host (what ``pos``
    holds; the kernel asserts they agree, as the pass's attention takes the same start as a launch argument): a
    block per ``tokens`` tokens and query head, the RoPE tables sliced at ``start`` so each block's rows are one
    aligned load, and the caches in tiles of ``tokens`` positions, each tile's block writing the new tokens that
    land in it (whole, in one store, when ``start`` is a multiple of ``tokens``); ``group`` query heads a block
    (a power of two dividing ``heads``; default `PREP_GROUP`), compiled for ``occupancy`` blocks per SM (0 to 32, 0
    for no hint; default `PREP_OCCUPANCY`). ``cos``/``sin`` are f32 or bf16 tables (math is f32 either way). The
    caches are moved in: the launch's outputs are ``(q, k_cache, v_cache, ...)``, the first three partitions."""
    _check(k_cache, v_cache, qkv, cos, sin)
    heads = _args.integer(heads, "heads", "prep_qkv")
    if heads < 1:
        raise ArgumentError(f"prep_qkv: heads={heads}; pass the model's number of query heads (>= 1)")
    eps = _args.real(eps, "eps", "prep_qkv")
    kv, s, hd = k_cache.shape
    n = qkv.shape[0]
    if qkv.shape[1] != (heads + 2 * kv) * hd:
        raise ArgumentError(
            f"prep_qkv: qkv has {qkv.shape[1]} columns, expected ({heads} + 2 * {kv}) heads of {hd}; pass the fused "
            "q/k/v rows of this model"
        )
    if tokens is None:
        if start is not None or group is not None or occupancy is not None:
            raise ArgumentError(
                "prep_qkv: start=, group= and occupancy= go with tokens= (a multi-token pass); decode reads pos only"
            )
        _same_tables(cos, sin)
        zk, zv = k_cache.partition([1, s, hd]), v_cache.partition([1, s, hd])
        z = tile.empty(qkv.dtype, [n, heads * hd]).partition([1, hd])
        x = _args.operand(qkv, "qkv", "prep_qkv")
        # Decode's one token runs the latency-first kernel (register loads, compiled-in row length, no token loop).
        kernel = kernels(_STEM).qkv_prep_one if n == 1 else kernels(_STEM).qkv_prep
        one = (x, wq[()], wk[()], cos[()], sin[()], pos[()], float(eps))
        made: Op = kernel.grid((n, heads))(z, zk, zv, *one, HALF=hd // 2, OFF=heads, KV=kv)
        return made
    bt = _args.integer(tokens, "tokens", "prep_qkv")
    if not 1 <= bt <= s or bt & (bt - 1):
        raise ArgumentError(
            f"prep_qkv: tokens={bt}; a cache tile holds a power of two of positions, from 1 to the cache's {s}"
        )
    if start is None:
        raise ArgumentError("prep_qkv: tokens= needs start=, the position of the first token (what pos holds)")
    first = _args.integer(start, "start", "prep_qkv")
    if not 0 <= first <= s - n or first + n > cos.shape[0]:
        raise ArgumentError(
            f"prep_qkv: {n} tokens from position {first} do not fit the cache of {s} positions and the RoPE tables of "
            f"{cos.shape[0]}"
        )
    g = _args.integer(PREP_GROUP if group is None else group, "group", "prep_qkv")
    if g < 1 or g & (g - 1) or heads % g:
        raise ArgumentError(
            f"prep_qkv: group={g}; a block takes a power of two of query heads that divides {heads} (its output "
            "tile is that many heads wide)"
        )
    occ = _args.integer(PREP_OCCUPANCY if occupancy is None else occupancy, "occupancy", "prep_qkv")
    if not 0 <= occ <= 32:
        raise ArgumentError(f"prep_qkv: occupancy={occ}; pass 1 to 32 blocks per SM, or 0 for no hint")
    _same_tables(cos, sin)
    if cos.dtype.name == "f32" and g > 1 and occ == 0:
        # tileiras 13.5 compiles this form (at least 16 tokens and 4 heads a block, aligned) to a kernel that writes
        # past its own shared memory (compute-sanitizer memcheck on an H200: 8-byte writes 32 bytes beyond the
        # 66624 bytes the cubin declares). Every form with an occupancy hint, or one head a block, or bf16 tables is
        # clean under memcheck; the untested group sizes of this form are refused with the one seen broken.
        raise ArgumentError(
            f"prep_qkv: group={g} with f32 RoPE tables and occupancy=0 is refused: tileiras miscompiles this form "
            "(its kernel writes past its shared memory); pass an occupancy hint (1 to 32), group=1, or bf16 tables"
        )
    zk, zv = k_cache.partition([1, bt, hd]), v_cache.partition([1, bt, hd])
    z = tile.empty(qkv.dtype, [n, heads * hd]).partition([bt, g * hd])
    x = _args.operand(qkv, "qkv", "prep_qkv")
    rows = (cos[first : first + n], sin[first : first + n])  # token t at row t
    launch = _rows_kernel(occ).grid(((n + bt - 1) // bt, heads // g))
    args = (x, wq[()], wk[()], *rows, pos[()], first, float(eps))
    rows_made: Op = launch(z, zk, zv, *args, HALF=hd // 2, G=g, OFF=heads, KV=kv, ALIGNED=first % bt == 0)
    return rows_made


def _check(k_cache: object, v_cache: object, qkv: object, cos: object, sin: object) -> None:
    """`ArgumentError` unless the caches are two Tile tensors ``(kv_heads, S, HD)`` of one shape and dtype (the
    kernels bound the cache position by the key cache alone: a shorter value cache faulted after the keys were
    written, or, in a multi-token pass, silently dropped the values past its end), ``qkv`` is 2-D rows and the RoPE
    tables are two 2-D tables of one shape (a shorter ``sin`` was read past its end)."""
    for t, name, rank in ((k_cache, "k_cache", 3), (v_cache, "v_cache", 3), (qkv, "qkv", 2), (cos, "cos", 2)):
        if not isinstance(t, Tensor) or t.ndim != rank:
            what = list(t.shape) if isinstance(t, Tensor) else type(t).__name__
            raise ArgumentError(f"prep_qkv: {name} must be a {rank}-D Tile tensor, got {what}")
    assert isinstance(k_cache, Tensor)
    assert isinstance(v_cache, Tensor)
    assert isinstance(cos, Tensor)
    if k_cache.shape != v_cache.shape or k_cache.dtype != v_cache.dtype:
        raise ArgumentError(
            f"prep_qkv: k_cache is {k_cache!r} but v_cache is {v_cache!r}; pass two caches of one shape and dtype, "
            "(kv_heads, S, HD)"
        )
    if not isinstance(sin, Tensor) or sin.shape != cos.shape:
        what = list(sin.shape) if isinstance(sin, Tensor) else type(sin).__name__
        raise ArgumentError(f"prep_qkv: sin is {what} but cos is {list(cos.shape)}; pass two tables of one shape")


def _same_tables(cos: Tensor, sin: Tensor) -> None:
    if cos.dtype != sin.dtype or cos.dtype.name not in ("f32", "bf16"):
        raise ArgumentError(
            f"prep_qkv: RoPE tables of {cos.dtype.name} and {sin.dtype.name}; pass two f32 or two bf16 tables"
        )
