"""Decode attention over a KV cache, flash-decoding style, and the KV-cache append: `decode_attention`,
`decode_attention_op`, `append_kv`, `append_kv_op`. Kernels are in ``_attention_kernels.tilepy``.

`decode_attention` runs two kernels chained with ``.then()``: ``decode_split`` gives each block the query heads of one
KV head (``HB`` of them, the largest power of two dividing the group, at most 16) and one run of key tiles of the
sequence, and writes an f32 partial (unnormalised output, running max and sum) into its own slot of scratch tensors;
``decode_combine`` (a block per query head) rescales the head's partials to one maximum and sums them, reading up to
16 splits in one load. When the query-head blocks alone fill the GPU, one split: ``decode_one`` writes the output
directly (no partials, no combine). No two blocks write one element. With one key tile a split (short contexts) the
split block has no loop: its K/V loads go out before the sequence's length is read. The combine and the partials'
stores move through registers (no TMA staging in shared memory for a few KB).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Partition, Tensor, f32, i32
from tile.kernels import _args
from tile.kernels._attention import HEAD_DIMS, heads3
from tile.kernels._source import kernels

__all__ = ["append_kv", "append_kv_op", "decode_attention", "decode_attention_op"]

_STEM = "_attention_kernels"
_DTYPES = ("f16", "bf16")
Op = DeviceOp[tuple[Any, ...]]


def _block_n() -> int:
    return 64 if tile.backend() == "gpu" else 16


def _target_blocks() -> int:
    if tile.backend() != "gpu":
        return 4
    from tile import core

    return 2 * int(core.Device(0).sm_count)


def _lengths(
    value: object, batch: int | None, limit: int, op: str, name: str, *, read: bool = True
) -> tuple[Tensor, int | None]:
    """The i32 ``(B,)`` device tensor of ``value`` and, when its values are read here, their maximum (checked against
    ``[0, limit]``). Host values (ints, numpy) are always read; a tensor only with ``read`` (the plain functions: the
    ``*_op`` forms must not wait, and may run in a graph capture); a tensor in flight is passed as it is."""
    if isinstance(value, Tensor) and value.in_flight:
        host = None
        t = value
    else:
        if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, Tensor):
            host = np.asarray(value)
            if host.dtype.kind not in "iu":
                raise ArgumentError(f"{op}: {name} must be integers, got dtype {host.dtype}")
            t = tile.from_numpy(host.astype(np.int32).reshape(-1))
        else:
            t = _args.as_input(value, name, op)
            if t.dtype != i32:
                raise ArgumentError(f"{op}: {name} has dtype {t.dtype.name}; pass an i32 tensor")
            host = np.asarray(t.to_numpy()) if read else None
        bad = [int(n) for n in ([] if host is None else host.reshape(-1)) if not 0 <= int(n) <= limit]
        if bad:
            raise ArgumentError(f"{op}: {name} holds {bad[0]}, outside [0, {limit}]")
    if t.ndim != 1 or (batch is not None and t.shape[0] != batch):
        want = "B" if batch is None else batch
        raise ArgumentError(f"{op}: {name} has shape {list(t.shape)}, expected [{want}] (one per sequence)")
    return t, None if host is None else int(host.max(initial=0))


def decode_attention(
    q: object,
    k_cache: object,
    v_cache: object,
    lengths: object,
    *,
    scale: float | None = None,
    splits: int | None = None,
) -> Tensor:
    """Attention of one query token per sequence over the first ``lengths[b]`` rows of a KV cache.

    Parameters
    ----------
    q
        ``(B, Hq, D)`` or its rows ``(B, Hq * D)``; f16 or bf16, D a power of two from 16 to 256 (64 and 128 tuned).
    k_cache, v_cache
        ``(B, Hkv, S, D)`` or ``(B * Hkv, S, D)`` of q's dtype; ``Hkv`` divides ``Hq``. Rows past a sequence's length
        are not read into the result (whatever they hold).
    lengths
        Valid rows per sequence, ``(B,)``: ints, or an i32 tensor; each in ``[0, S]`` (checked). A sequence of
        length 0 gets zeros.
    scale
        Score scale; default ``1 / sqrt(D)``.
    splits
        Runs of key tiles the sequence is split over (default: enough blocks to fill the GPU twice over).

    Returns
    -------
    Tensor
        The output, of q's shape and dtype.

    Raises
    ------
    ArgumentError
        Wrong ranks, shapes, dtypes or head dims, a GQA ratio that does not divide, lengths outside the cache.
    """
    op = "decode_attention"
    x = _args.as_input(q, "q", op)
    made = _decode(op, x, k_cache, v_cache, lengths=lengths, scale=scale, splits=splits, inflight=False)
    result = _args.first_output(made.sync())
    return result.reshape(*x.shape) if x.ndim == 3 else result


def decode_attention_op(
    q: object,
    k_cache: object,
    v_cache: object,
    lengths: object,
    *,
    scale: float | None = None,
    splits: int | None = None,
    plus: int = 0,
) -> Op:
    """`decode_attention` as an op not run yet (the two kernels chained), for ``.then()`` chains and graph captures.

    ``q`` (rows ``(B, Hq * D)`` if in flight), the caches (``(B * Hkv, S, D)`` if in flight) and ``lengths`` may be
    tensors in flight. A lengths tensor is not read here (no wait: the op may be captured in a graph); its values
    are clamped into ``[0, S]`` inside the kernel. ``plus``, an i32 (checked), is added to every length inside the
    kernel before that clamp, without wrapping (a model that keeps the new token's position, ``length - 1``, passes
    ``plus=1``). The op's output is ``(o, q, k_cache,
    v_cache, lengths)``: ``o`` the ``(B, Hq * D)`` output partition, then the inputs handed back (a chain that moved
    the caches in keeps them). Without ``splits`` the split count is sized for the whole cache, so one op serves
    every length (for graph replays).
    """
    op = "decode_attention_op"
    x = _args.operand(q, "q", op)
    plus = _args.integer(plus, "plus", op)
    if not -(2**31) <= plus < 2**31:
        raise ArgumentError(f"{op}: plus is {plus}, outside the i32 range the kernel adds it in")
    return _decode(op, x, k_cache, v_cache, lengths=lengths, scale=scale, splits=splits, inflight=True, plus=plus)


def _decode(
    op: str,
    x: Tensor,
    k_cache: object,
    v_cache: object,
    *,
    lengths: object,
    scale: float | None,
    splits: int | None,
    inflight: bool,
    plus: int = 0,
) -> Op:
    get = _args.operand if inflight else _args.as_input
    kc = heads3(get(k_cache, "k_cache", op), "k_cache", op, "Hkv")
    vc = heads3(get(v_cache, "v_cache", op), "v_cache", op, "Hkv")
    for t, name in ((x, "q"), (kc, "k_cache"), (vc, "v_cache")):
        _args.check_dtype(t, name, op, _DTYPES)
        if t.dtype != x.dtype:
            raise ArgumentError(f"{op}: q is {x.dtype.name} but {name} is {t.dtype.name}; convert them to one dtype")
    if tuple(kc.shape) != tuple(vc.shape):
        raise ArgumentError(f"{op}: k_cache has shape {list(kc.shape)} but v_cache has {list(vc.shape)}")
    bhkv, s, d = kc.shape
    if d not in HEAD_DIMS:
        raise ArgumentError(f"{op}: head dim {d} is not one of {list(HEAD_DIMS)}")
    if x.ndim == 3:
        if x.in_flight or not x.is_contiguous:
            raise ArgumentError(f"{op}: q of shape {list(x.shape)} must be contiguous (or pass its rows (B, Hq * D))")
        if x.shape[2] != d:
            raise ArgumentError(f"{op}: q has head dim {x.shape[2]} but the cache has {d}")
        x = x.reshape(x.shape[0], x.shape[1] * d)
    elif x.ndim != 2 or x.shape[1] % d:
        raise ArgumentError(f"{op}: q must be (B, Hq, D) or (B, Hq * D) with D = {d}, got shape {list(x.shape)}")
    batch, hq = x.shape[0], x.shape[1] // d
    if batch == 0 or hq == 0 or bhkv % batch or hq % (bhkv // batch):
        raise ArgumentError(
            f"{op}: {batch} sequences of {hq} query heads do not fit a cache of {bhkv} (sequence, KV head) rows; "
            "need B * Hkv rows with Hkv dividing Hq"
        )
    hkv = bhkv // batch
    group = hq // hkv
    hb = min(group & -group, 16)
    lens, longest = _lengths(lengths, batch, s, op, "lengths", read=not inflight)
    bn = _block_n()
    tiles = max(1, -(-(s if longest is None or splits is not None else min(s, _args.next_pow2(longest))) // bn))
    nqb = hq // hb
    splits = _splits(tiles, batch * nqb, splits, op)
    tps = -(-tiles // splits)
    splits = -(-tiles // tps)
    qk_scale = d**-0.5 if scale is None else _args.score_scale(scale, op)
    k = kernels(_STEM)
    z = tile.empty(x.dtype, [batch, hq * d])
    if splits == 1:
        # One run of key tiles per query-head block: one kernel normalises and writes the output, no combine.
        one: Op = k.decode_one(
            z.partition([1, hb * d]), x, kc, vc, lens, plus, qk_scale, BN=bn, HB=hb, GROUP=group, HKV=hkv
        )
        return one.map(lambda res: tuple(res[:5]))  # (o, q, k_cache, v_cache, lengths), as the split form's
    sc = _chunk(splits, d)
    slots = -(-splits // sc) * sc  # a whole number of the combine's chunks; slots past the keys hold empty partials
    acc = tile.empty(f32, [batch * nqb, slots, hb * d]).partition([1, 1, hb * d])
    m = tile.empty(f32, [batch * nqb, slots, hb]).partition([1, 1, hb])
    l_ = tile.empty(f32, [batch * nqb, slots, hb]).partition([1, 1, hb])
    first: Op = k.decode_split(acc, m, l_, x, kc, vc, lens, plus, qk_scale, BN=bn, TPS=tps, GROUP=group, HKV=hkv)

    def combine(out: tuple[Any, ...]) -> Any:
        # The partials are handed on in flight: the combine runs after the split kernel, with no wait between.
        parts = (out[0].unpartition(), out[1].unpartition(), out[2].unpartition())
        made = k.decode_combine(z.partition([1, d]), *parts, HB=hb, NQB=nqb, SC=sc)  # a block per query head
        # The split launch's inputs ride along, so a chain gets back the caches it moved in: the op's output is
        # (o, q, k_cache, v_cache, lengths).
        return made.map(lambda res: (res[0], *out[3:7]))

    return first.then(combine)


def _splits(tiles: int, blocks: int, asked: int | None, op: str) -> int:
    """How many runs of key tiles each query-head block's sequence is split over.

    Enough blocks to fill the GPU twice over (``_target_blocks``), never more splits than key tiles: a split block
    costs a launch-wide fixed part (its query and length loads, three stores of its partial) plus its key tiles, and
    blocks beyond two per SM only queue. When the query-head blocks alone fill the GPU (many sequences), one split:
    `decode_one` runs without partials or a combine.
    """
    if asked is not None:
        asked = _args.integer(asked, "splits", op)
        if asked < 1:
            raise ArgumentError(f"{op}: splits must be >= 1, got {asked}")
        return min(asked, tiles)
    return max(1, min(tiles, -(-_target_blocks() // blocks)))


def _chunk(splits: int, d: int) -> int:
    """Splits the combine reads per load: all of them up to 16, as long as one chunk of one head's f32 accumulators
    (``chunk x d``) stays within 4096 elements (16 KiB of registers across the block)."""
    fits = 1 << (max(1, 4096 // d).bit_length() - 1)  # the largest power of two <= 4096 // d
    return max(1, min(_args.next_pow2(splits), 16, fits))


def append_kv(k_cache: object, v_cache: object, k: object, v: object, positions: object) -> tuple[Tensor, Tensor]:
    """Write new K/V rows into the caches: ``cache[b, h, positions[b] + t] = new[b, h, t]``.

    Parameters
    ----------
    k_cache, v_cache
        ``(B * Hkv, S, D)`` Tile tensors (moved in: use the returned ones), or ``(B, Hkv, S, D)`` / ``(B * Hkv, S, D)``
        torch/cupy arrays (written in place through DLPack). Any dtype, both the same.
    k, v
        The new rows ``(B, Hkv, T, D)`` or ``(B * Hkv, T, D)``, the caches' dtype.
    positions
        Where each sequence's new rows start, ``(B,)`` ints or an i32 tensor; ``positions[b] + T <= S`` (checked here,
        and asserted inside the kernel: a bad position faults, it never writes outside the sequence's own rows).

    Returns
    -------
    tuple of Tensor
        The caches, ``(B * Hkv, S, D)``.

    Raises
    ------
    ArgumentError
        Mismatched shapes or dtypes, positions outside the cache, a 4-D Tile cache (reshape it first, keeping only
        the reshaped handle: the kernel writes it, so no other handle may see that memory).
    """
    op = "append_kv"
    made = _append(op, k_cache, v_cache, new=(k, v), positions=positions, inflight=False)
    out = made.sync()
    return out[0].unpartition(), out[1].unpartition()


def append_kv_op(k_cache: object, v_cache: object, k: object, v: object, positions: object) -> Op:
    """`append_kv` as an op not run yet: the new rows may be tensors in flight, and each cache a ``(B * Hkv, S, D)``
    tensor (not in flight: it is partitioned here for writing) or the cache partition a previous `append_kv_op`
    handed on (in flight or not). The op's outputs ``[0]`` and ``[1]`` are the K and V cache partitions. Position
    tensors are not read here (the kernel's assertion guards the cache); host positions are checked."""
    return _append("append_kv_op", k_cache, v_cache, new=(k, v), positions=positions, inflight=True)


def _writable_cache(value: object, name: str, op: str) -> Tensor | Partition:
    if isinstance(value, Partition):  # a cache partition handed on by a previous append (in flight or not)
        if len(value.shape) != 3 or value.tile_shape != (1, _args.next_pow2(value.shape[1]), value.shape[2]):
            raise ArgumentError(f"{op}: {name} is {value!r}; pass the cache, or the partition append_kv_op returned")
        return value
    if isinstance(value, Tensor):
        if value.in_flight:
            raise ArgumentError(
                f"{op}: {name} is a tensor in flight, which cannot be partitioned for writing; pass the partition "
                "append_kv_op handed on, or run the chain that owns the cache first"
            )
        if value.ndim != 3:
            raise ArgumentError(
                f"{op}: {name} is a Tile tensor of shape {list(value.shape)}; pass it as (B * Hkv, S, D) "
                "(cache = cache.reshape(B * Hkv, S, D), keeping only that handle): it is moved in and written"
            )
        return value
    t = _args.as_input(value, name, op)  # a foreign array's borrow: the only Tile handle on it, so it may be written
    if t.ndim == 4:
        b, h, s, d = t.shape
        t = t.reshape(b * h, s, d)
    if t.ndim != 3:
        raise ArgumentError(f"{op}: {name} must be (B, Hkv, S, D) or (B * Hkv, S, D), got shape {list(t.shape)}")
    return t


def _append(
    op: str, k_cache: object, v_cache: object, *, new: tuple[object, object], positions: object, inflight: bool
) -> Op:
    k, v = new
    kc, vc = _writable_cache(k_cache, "k_cache", op), _writable_cache(v_cache, "v_cache", op)
    get = _args.operand if inflight else _args.as_input
    kn, vn = heads3(get(k, "k", op), "k", op, "Hkv"), heads3(get(v, "v", op), "v", op, "Hkv")
    if tuple(kc.shape) != tuple(vc.shape) or kc.dtype != vc.dtype:
        raise ArgumentError(f"{op}: k_cache {kc!r} and v_cache {vc!r} differ; they must match")
    bhkv, s, d = kc.shape
    for t, name in ((kn, "k"), (vn, "v")):
        if t.dtype != kc.dtype:
            raise ArgumentError(f"{op}: {name} is {t.dtype.name} but the cache is {kc.dtype.name}; convert it")
        if t.shape[0] != bhkv or t.shape[2] != d or tuple(t.shape) != tuple(kn.shape):
            raise ArgumentError(
                f"{op}: {name} has shape {list(t.shape)}; expected ({bhkv}, T, {d}), matching the cache and each other"
            )
    n_new = kn.shape[1]
    if n_new > s:  # else every position was refused as "outside [0, -1]", which did not say why
        raise ArgumentError(f"{op}: {n_new} new rows per sequence do not fit a cache of {s} positions")
    pos, _ = _lengths(positions, None, s - n_new, op, "positions", read=not inflight)
    batch = pos.shape[0]
    if batch < 1 or bhkv % batch:
        raise ArgumentError(f"{op}: {batch} positions for {bhkv} cache rows; pass one start per sequence, (B,)")
    sp = _args.next_pow2(s)
    with contextlib.ExitStack() as stack:  # a refused launch gives the caller's caches back (partitioned)
        zk = kc if isinstance(kc, Partition) else stack.enter_context(tile.partitioned(kc, [1, sp, d]))
        zv = vc if isinstance(vc, Partition) else stack.enter_context(tile.partitioned(vc, [1, sp, d]))
        made: Op = kernels(_STEM).kv_append(zk, zv, kn, vn, pos, HKV=bhkv // batch)
    return made
