"""The attention family's Python API: `attention` (FMHA prefill), `decode_attention` (split-sequence decoding over a
KV cache) and `append_kv` (write new rows into the cache). Kernels are in ``_attention_kernels.tilepy``.

Inputs are borrowed for the call (the caller's handles stay usable) or, in the ``*_op`` forms, may be tensors in
flight. Prefill also takes one sequence's queries as token-major rows ``(Sq, Hq * D)`` (a model's projection layout;
the output is rows too), and a causal ``offset`` that places the queries inside a longer key sequence (a KV cache).

Grouped-query attention: ``Hq`` query heads share ``Hkv`` KV heads (``Hkv`` divides ``Hq``; query head ``h``
reads KV head ``h // (Hq // Hkv)``, as torch's ``enable_gqa`` and Hugging Face's ``repeat_kv`` do).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Tensor
from tile.kernels import _args, autotune
from tile.kernels._source import kernels, source_digest

__all__ = ["HEAD_DIMS", "attention", "attention_op"]

HEAD_DIMS = (16, 32, 64, 128, 256)
"""Head dims the attention kernels take (any power of two from 16 to 256); 64 and 128 are the tuned and benchmarked
ones."""
_STEM = "_attention_kernels"
_DTYPES = ("f16", "bf16")
_PREFILL = tuple(autotune.Config.of(BM=bm, BN=bn) for bm, bn in ((128, 64), (128, 128), (64, 64), (64, 128)))
_L2_SPAN = 128 << 20  # bytes of operand copies a tuning sample rotates over: more than any GPU's L2 cache
_LAUNCHES = 4  # launches per tuning sample, waited for once
Op = DeviceOp[tuple[Any, ...]]


def heads3(t: Tensor, name: str, op: str, heads: str = "H", *, rows: bool = False) -> Tensor:
    """A rank-4 ``(B, H, S, D)`` tensor as ``(B * H, S, D)``; rank 3 is taken as already flattened, and with ``rows``
    rank 2 as token-major rows ``(S, H * D)``. ``heads`` names the head dim in messages (``"Hkv"`` for KV caches)."""
    if t.ndim == 3 or (rows and t.ndim == 2):
        return t
    flat = f"(B * {heads}, S, D)"
    if t.ndim != 4:
        also = f", {flat} or rows (S, {heads} * D)" if rows else f" or {flat}"
        raise ArgumentError(f"{op}: {name} must be (B, {heads}, S, D){also}, got shape {list(t.shape)}")
    if t.in_flight or not t.is_contiguous:
        raise ArgumentError(
            f"{op}: {name} of shape {list(t.shape)} is {'in flight' if t.in_flight else 'a strided view'}; pass a "
            f"contiguous tensor (.contiguous() in torch, .copy() in Tile) or its {flat} form"
        )
    b, h, s, d = t.shape
    return t.reshape(b * h, s, d)


def _check_common(q: Tensor, k: Tensor, v: Tensor, op: str) -> int:
    """Dtypes and head dim of flattened ``q``, ``k``, ``v`` (``[heads, S, D]``; q may be rows ``[S, heads * D]``)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        _args.check_dtype(t, name, op, _DTYPES)
        if t.dtype != q.dtype:
            raise ArgumentError(f"{op}: q is {q.dtype.name} but {name} is {t.dtype.name}; convert them to one dtype")
    d = q.shape[-1] if q.ndim == 3 else k.shape[-1]
    if d not in HEAD_DIMS or k.shape[-1] != d or v.shape[-1] != d:
        raise ArgumentError(
            f"{op}: head dims q {d}, k {k.shape[-1]}, v {v.shape[-1]}; all must be one of {list(HEAD_DIMS)}"
        )
    if q.ndim == 2 and (q.shape[1] == 0 or q.shape[1] % d):
        raise ArgumentError(
            f"{op}: q rows of width {q.shape[1]} are not whole heads of k's head dim {d}; rows are (Sq, Hq * D)"
        )
    if tuple(k.shape) != tuple(v.shape):
        raise ArgumentError(f"{op}: k has shape {list(k.shape)} but v has {list(v.shape)}; they must match")
    return d


def attention(
    q: object,
    k: object,
    v: object,
    *,
    causal: bool,
    scale: float | None = None,
    offset: int | None = None,
    config: autotune.Config | None = None,
) -> Tensor:
    """Flash attention forward, ``softmax(q k^T * scale) v`` per head, f32 accumulation.

    Parameters
    ----------
    q
        ``(B, Hq, Sq, D)`` (or flattened ``(B * Hq, Sq, D)``), f16 or bf16, any Sq; D a power of two from 16 to 256
        (64 and 128 tuned). Or one sequence as token-major rows ``(Sq, Hq * D)`` (head ``h`` of token ``t`` in
        columns ``h * D ..``, as a model's q projection makes them), with k and v ``(Hkv, Sk, D)``.
    k, v
        ``(B, Hkv, Sk, D)`` (or flattened), q's dtype; ``Hkv`` divides ``Hq`` (grouped-query attention).
    causal
        Mask keys after each query. Query ``i`` sits at key position ``offset + i``; causal needs
        ``offset + Sq <= Sk``.
    scale
        Score scale; default ``1 / sqrt(D)``.
    offset
        Causal only: the key position of the first query. Default ``Sk - Sq`` (the mask bottom-right aligned: the
        queries are the sequence's last ones). A smaller one places a chunk of queries inside a longer key buffer,
        such as a KV cache of ``Sk`` positions holding ``offset + Sq`` valid ones: keys from ``offset + Sq`` on are
        loaded only within the key tile that holds that limit, and masked (their values must be finite: stale cache
        rows are).
    config
        ``Config.of(BM=, BN=)`` query and key tile sizes; default the tuned one.

    Returns
    -------
    Tensor
        The output, of q's shape and dtype.

    Raises
    ------
    ArgumentError
        Wrong ranks, shapes, dtypes, head dims, a GQA ratio that does not divide, causal with ``Sk < Sq``, an offset
        below 0 or past ``Sk - Sq`` or without causal, or a strided 4-D input (pass a contiguous one).
    """
    op = "attention"
    (q3, shape), (k3, kshape), (v3, _) = _borrow3(q, "q", op, rows=True), _borrow3(k, "k", op), _borrow3(v, "v", op)
    launch = _prefill(op, q3, k3, v3, (shape, kshape), causal=causal, scale=scale, offset=offset, config=config)
    if launch is None:
        return tile.empty(q3.dtype, list(shape))
    result = _args.first_output(launch.sync())
    return result.reshape(*shape) if len(shape) == 4 else result


def _borrow3(value: object, name: str, op: str, *, rows: bool = False) -> tuple[Tensor, tuple[int, ...]]:
    """The ``(B * H, S, D)`` handle a launch borrows for a caller's input, and the input's shape. A 4-D Tile tensor's
    reshape is itself a new view (the caller's handle stays usable), so it is not first viewed by `_args.as_input`:
    each view costs host time on every call (the call waits for its kernel, so that time adds to it)."""
    if isinstance(value, Tensor) and value.ndim == 4 and not value.in_flight:
        return heads3(value, name, op), tuple(value.shape)
    t = _args.as_input(value, name, op)
    return heads3(t, name, op, rows=rows), tuple(t.shape)


def attention_op(
    q: object,
    k: object,
    v: object,
    *,
    causal: bool,
    scale: float | None = None,
    offset: int | None = None,
    config: autotune.Config | None = None,
) -> Op:
    """`attention` as an op not run yet, for ``.then()`` chains and graph captures.

    Inputs as in `attention`; a tensor in flight must be in the flattened ``(B * H, S, D)`` form or q in the rows
    form (a view of a tensor in flight cannot be made). The op's first output is the ``(B * Hq, Sq, D)`` output
    partition (rows ``(Sq, Hq * D)`` for rows). The config is chosen when the op is made (tune first by one eager
    call of the same shapes: a ``.then()`` function or a graph capture must not tune).
    """
    op = "attention_op"
    x, y, z = _args.operand(q, "q", op), _args.operand(k, "k", op), _args.operand(v, "v", op)
    shapes = (tuple(x.shape), tuple(y.shape))
    made = _prefill(
        op,
        heads3(x, "q", op, rows=True),
        heads3(y, "k", op),
        heads3(z, "v", op),
        shapes,
        causal=causal,
        scale=scale,
        offset=offset,
        config=config,
    )
    if made is None:
        raise ArgumentError(f"{op}: the output {list(x.shape)} is empty; there is nothing to launch")
    return made


def _prefill(
    op: str,
    q3: Tensor,
    k3: Tensor,
    v3: Tensor,
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
    *,
    causal: bool,
    scale: float | None,
    offset: int | None,
    config: autotune.Config | None,
) -> Op | None:
    """The launch over flattened ``q3`` (or rows), ``k3``, ``v3``; ``shapes``: q's and k's shapes as passed."""
    (qs, ks) = shapes
    rows = q3.ndim == 2
    if len(qs) == 4 and len(ks) == 4 and qs[0] != ks[0]:
        raise ArgumentError(f"{op}: q has batch {qs[0]} but k has {ks[0]}")
    if rows and len(ks) != 3:
        raise ArgumentError(f"{op}: q rows (Sq, Hq * D) are one sequence; pass k and v as (Hkv, Sk, D), got {list(ks)}")
    d = _check_common(q3, k3, v3, op)
    (bhkv, sk, _) = k3.shape
    bhq, sq = (q3.shape[1] // d, q3.shape[0]) if rows else (q3.shape[0], q3.shape[1])
    if bhkv == 0 or bhq % bhkv:
        raise ArgumentError(f"{op}: {bhq} query heads cannot share {bhkv} KV heads; Hkv must divide Hq")
    if causal and sk < sq:
        raise ArgumentError(f"{op}: causal attention needs at least as many keys ({sk}) as queries ({sq})")
    if sk == 0 and sq > 0:
        raise ArgumentError(f"{op}: k and v have no positions; every query needs at least one key")
    off = _offset(op, offset, causal, sq, sk)
    if bhq == 0 or sq == 0:
        return None
    qk_scale = d**-0.5 if scale is None else _args.score_scale(scale, op)
    group = bhq // bhkv
    if config is None:
        config = _choose_prefill((bhq, sq, d), k3, q3.dtype, causal, group)
    bm, bn = config.get("BM", 0), config.get("BN", 0)  # a config without one was a bare KeyError
    if bm < 1 or bn < 1 or bm & (bm - 1) or bn & (bn - 1):
        raise ArgumentError(f"{op}: config {config}: give BM and BN, powers of two (Config.of(BM=64, BN=64))")
    fmha, z = (kernels(_STEM).fmha_rows, [sq, bhq * d]) if rows else (kernels(_STEM).fmha, [bhq, sq, d])
    out = tile.empty(q3.dtype, z).partition([bm, d] if rows else [1, bm, d])
    made: Op = fmha(out, q3, k3, v3, qk_scale, off, BN=bn, GROUP=group, CAUSAL=causal, EVEN_K=sk % bn == 0)
    return made


def _offset(op: str, offset: object, causal: bool, sq: int, sk: int) -> int:
    """The key position of the first query: ``offset`` checked (causal only, ``0 <= offset <= Sk - Sq``), default
    ``Sk - Sq``. The kernel's causal loop stops at ``offset + Sq``, so these bounds keep every query's keys real."""
    if offset is None:
        return sk - sq
    if not causal:
        raise ArgumentError(
            f"{op}: offset={offset!r} places causal queries among the keys; non-causal attention reads every key, so "
            "pass no offset (or causal=True)"
        )
    off = _args.integer(offset, "offset", op)
    if off < 0 or off + sq > sk:
        raise ArgumentError(
            f"{op}: offset {off} puts the {sq} queries at key positions {off} .. {off + sq - 1}, outside the {sk} "
            f"keys; it must be from 0 to {sk - sq}"
        )
    return off


def _choose_prefill(q: tuple[int, int, int], k: Tensor, dtype: tile.DType, causal: bool, group: int) -> autotune.Config:
    # The rows form is tuned through the flattened kernel of the same shapes (the same tiles and work per block).
    (bhq, sq, d), (bhkv, sk, _) = q, k.shape
    default = autotune.Config.of(BM=128, BN=64) if tile.backend() == "gpu" else autotune.Config.of(BM=16, BN=16)
    key: dict[str, object] = {"bh": autotune.bucket(bhq), "sq": autotune.bucket(sq), "sk": autotune.bucket(sk)}
    key |= {"d": d, "dtype": dtype.name, "causal": causal, "group": group, **autotune.environment()}
    # Scratch operands of the same shapes (the real ones may be in flight), made once per tuning, enough copies that
    # together they outgrow any L2 (a small problem would otherwise be timed reading K and V from L2, which a model's
    # call does not). A sample is _LAUNCHES launches rotating over the copies, chained and waited for once: a wait per
    # launch would add the host round trip to every launch of a short kernel. The candidates' samples are
    # interleaved and their medians compared (`autotune.interleaved_wall_times`).
    per_copy = (bhq * sq + 2 * bhkv * sk) * d * dtype.itemsize
    copies = max(1, min(8, -(-_L2_SPAN // max(1, per_copy))))
    scratch: list[tuple[Tensor, Tensor, Tensor]] = []

    def launch(cfg: autotune.Config, i: int) -> Op:
        if not scratch:
            for _ in range(copies):
                kv = [bhkv, sk, d]
                scratch.append((tile.zeros(dtype, [bhq, sq, d]), tile.zeros(dtype, kv), tile.zeros(dtype, kv)))
        qs, ks, vs = scratch[i % copies]
        z = tile.empty(dtype, [bhq, sq, d]).partition([1, cfg["BM"], d])
        bn = cfg["BN"]
        made: Op = kernels(_STEM).fmha(
            z, qs[()], ks[()], vs[()], d**-0.5, sk - sq, BN=bn, GROUP=group, CAUSAL=causal, EVEN_K=sk % bn == 0
        )
        return made

    def run(cfg: autotune.Config) -> Tensor:
        op = launch(cfg, 0)
        for i in range(1, _LAUNCHES):
            op = op.then(functools.partial(_next, launch, cfg, i))
        return _args.first_output(op.sync())

    tuner = autotune.tuner("attention", source_digest(_STEM))
    return tuner.choose(key, _PREFILL, default, run, interleave=True)


def _next(make: Callable[[autotune.Config, int], Op], cfg: autotune.Config, i: int, _: object) -> Op:
    """``make(cfg, i)``, dropping the previous launch's output (the ``.then`` function of a tuning sample)."""
    return make(cfg, i)
