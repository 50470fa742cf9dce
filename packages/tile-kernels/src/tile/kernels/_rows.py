"""Row kernels over the last dimension: `softmax`, `log_softmax`, `rmsnorm`, `layernorm`, `rmsnorm_heads`.

Any row length and any number of rows; f16, bf16 or f32 in, f32 math, output in the input's dtype unless
``out_dtype`` says otherwise. The form follows the row length (`tile.kernels._rowforms`): short rows are kept whole
in registers, several rows per block; long rows are walked in chunks. The fused residual add + rmsnorm and the
launch-returning forms are in `tile.kernels._addnorm`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Partition, Tensor, f32
from tile.kernels import _args, _rowforms, autotune
from tile.kernels._rowforms import Plan
from tile.kernels._rowrun import RowJob, as_rows, vector

__all__ = ["layernorm", "log_softmax", "rmsnorm", "rmsnorm_heads", "softmax"]

Launch = DeviceOp[tuple[object, ...]]


def _prepare(op: str, x: object, out_dtype: object, out: object) -> tuple[Tensor, tuple[int, ...], Tensor]:
    """The 2-D row view of ``x`` (checked), ``x``'s shape and the 2-D output."""
    xt = _args.as_input(x, "x", op)
    _args.check_dtype(xt, "x", op, _args.FLOATS)
    rows, shape = as_rows(xt, op)
    if out is not None and xt.ndim != 2:
        raise ArgumentError(f"{op}: out= needs a 2-D x; reshape x to (rows, {shape[-1]}) first")
    return rows, shape, _args.output(out, out_dtype, xt.dtype, tuple(rows.shape), op)


def _run(job: RowJob, config: autotune.Config | None, z: Tensor, shape: tuple[int, ...]) -> Tensor:
    if job.m and job.n:
        (z,) = job.run(config, [z])
    return z if len(shape) == 2 else z.reshape(shape)


def _softmax(x: object, log: bool, out_dtype: object, out: object, config: autotune.Config | None) -> Tensor:
    op = "log_softmax" if log else "softmax"
    rows, shape, z = _prepare(op, x, out_dtype, out)

    def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
        return plan.kernel("softmax")(outs[0], rows[()], LOG=log, **plan.generics())

    m, n = rows.shape
    job = RowJob(op, op, m, n, (rows.dtype.name, z.dtype.name), (z.dtype,), make)
    return _run(job, config, z, shape)


def softmax(
    x: object, *, out_dtype: object = None, out: object = None, config: autotune.Config | None = None
) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` over the last dimension, in f32.

    Rows that fit (up to 8192 columns by default) are kept whole in registers; longer rows take an online pass
    (running max and rescaled sum, chunk by chunk) and a normalising pass.

    Parameters
    ----------
    x
        f16, bf16 or f32, any shape (rank 2 may be strided; other ranks must be contiguous), any row length.
    out_dtype, out
        The output dtype (default ``out``'s if given, else ``x``'s) and a 2-D output tensor (moved into the call: use
        the returned tensor).
    config
        ``Config.of(BM=rows_per_block, BN=chunk_width, OCC=..., WARPS=..., LAT=...)`` (absent parameters are 0:
        ``BN=0`` is the whole-row form, 0 hints leave the choice to tileiras); default: tuned on the GPU,
        deterministic on the CPU interpreter.

    Raises
    ------
    tile.frontend.ArgumentError
        For a non-float ``x``, a strided ``x`` of rank other than 2, a bad ``out`` or ``config``.
    """
    return _softmax(x, False, out_dtype, out, config)


def log_softmax(
    x: object, *, out_dtype: object = None, out: object = None, config: autotune.Config | None = None
) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` over the last dimension, in f32; arguments as in `softmax`."""
    return _softmax(x, True, out_dtype, out, config)


def rmsnorm(
    x: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
) -> Tensor:
    """``x * rsqrt(mean(x^2) + eps) * weight`` over the last dimension (N), in f32 (Qwen3's RMSNorm).

    ``weight`` is ``(N,)`` of any float dtype; the other arguments are as in `softmax`.
    """
    op = "rmsnorm"
    rows, shape, z = _prepare(op, x, out_dtype, out)
    m, n = rows.shape
    w = vector(weight, "weight", op, n)

    eps_f = _args.real(eps, "eps", op)  # refused (ArgumentError) before any output is partitioned

    def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
        return plan.kernel("rmsnorm")(outs[0], rows[()], w[()], eps_f, **plan.generics())

    job = RowJob(op, op, m, n, (rows.dtype.name, z.dtype.name), (z.dtype,), make)
    return _run(job, config, z, shape)


def layernorm(
    x: object,
    weight: object = None,
    bias: object = None,
    *,
    eps: float = 1e-5,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
) -> Tensor:
    """``(x - mean) * rsqrt(var + eps) * weight + bias`` over the last dimension (N), in f32 (biased variance).

    ``weight`` and ``bias`` are optional ``(N,)`` vectors of any float dtype; the rest as in `softmax`. The chunked
    form sums ``x - k`` and its square, ``k`` being the first chunk's mean, so a mean far from zero does not cancel
    the variance away.
    """
    op = "layernorm"
    rows, shape, z = _prepare(op, x, out_dtype, out)
    m, n = rows.shape
    w = None if weight is None else vector(weight, "weight", op, n)
    b = None if bias is None else vector(bias, "bias", op, n)

    eps_f = _args.real(eps, "eps", op)  # refused (ArgumentError) before any output is partitioned

    def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
        w_arg = w[()] if w is not None else _args.placeholder(f32, 1)
        b_arg = b[()] if b is not None else _args.placeholder(f32, 1)
        flags = {"HAS_W": w is not None, "HAS_B": b is not None}
        return plan.kernel("layernorm")(outs[0], rows[()], w_arg, b_arg, eps_f, **flags, **plan.generics())

    job = RowJob(op, op, m, n, (rows.dtype.name, z.dtype.name), (z.dtype,), make)
    return _run(job, config, z, shape)


def rmsnorm_heads(
    x: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
) -> Tensor:
    """Per-head RMSNorm (Qwen3's q/k norm): rows of ``heads * D`` elements, each head of ``D`` normalised alone.

    Parameters
    ----------
    x
        ``(..., heads * D)``, f16, bf16 or f32; rank 2 may be strided (a slice of a fused q/k/v projection's output).
    weight
        ``(D,)``, any float dtype: the head size is its length. With ``D`` a power of two a block normalises whole
        heads in chunks of ``BN`` (a multiple of ``D``) columns; otherwise ``x`` must be contiguous and the heads are
        normalised as rows of `rmsnorm`.
    eps, out_dtype, out
        As in `rmsnorm`.
    config
        ``Config.of(BM=rows_per_block, BN=heads_per_chunk * D)`` (``D`` a power of two), else as in `rmsnorm`.
    """
    op = "rmsnorm_heads"
    xt = _args.as_input(x, "x", op)
    w = _args.as_input(weight, "weight", op)
    if w.ndim != 1 or w.shape[0] == 0:
        raise ArgumentError(f"{op}: weight has shape {list(w.shape)}; pass the (head_dim,) vector")
    d = w.shape[0]
    if xt.ndim == 0 or xt.shape[-1] % d:
        raise ArgumentError(f"{op}: x has shape {list(xt.shape)}; its last dim must be a multiple of head_dim {d}")
    if d & (d - 1):
        if not xt.is_contiguous:
            raise ArgumentError(f"{op}: a strided x needs a power-of-two head_dim (got {d}); call .copy() first")
        if out is not None:
            raise ArgumentError(f"{op}: out= needs a power-of-two head_dim (got {d})")
        shape = tuple(xt.shape)
        return rmsnorm(xt.reshape(-1, d), w, eps=eps, out_dtype=out_dtype, config=config).reshape(shape)
    rows, shape, z = _prepare(op, xt, out_dtype, out)
    m, n = rows.shape
    _args.check_dtype(w, "weight", op, _args.FLOATS)

    eps_f = _args.real(eps, "eps", op)  # refused (ArgumentError) before any output is partitioned

    def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
        return plan.kernel("rmsnorm_heads")(outs[0], rows[()], w[()], eps_f, D=d, BN=plan.bn, LAT=plan.lat)

    np_ = _args.next_pow2(n)
    candidates = _rowforms.heads_configs(np_, d) if n else ()
    fallback = _rowforms.heads_default(np_, d)
    dtypes = (rows.dtype.name, z.dtype.name, str(d))
    job = RowJob(op, op, m, n, dtypes, (z.dtype,), make, unit=d, candidates=candidates, fallback=fallback)
    return _run(job, config, z, shape)
