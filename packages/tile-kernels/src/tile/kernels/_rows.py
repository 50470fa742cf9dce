"""Row kernels over the last dimension, whole row in one tile: `softmax`, `log_softmax`, `rmsnorm`, `layernorm`.

Any row length up to `MAX_ROW` (the tile is the length rounded up to a power of two, padded on load, masked on
store); f16, bf16 or f32 in, f32 math, output in the input's dtype unless ``out_dtype`` says otherwise. Rows per
block (``BM``) is the tuned parameter. Longer rows need the chunked forms, which are not written yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Partition, Tensor, f32
from tile.kernels import _args, autotune
from tile.kernels._source import kernels, source_digest

__all__ = ["MAX_ROW", "layernorm", "log_softmax", "rmsnorm", "rmsnorm_op", "softmax"]

MAX_ROW = 32768
_STEM = "_row_kernels"

Launch = Callable[[Partition, Tensor], Tensor]
"""``launch(z, rows)``: run one row kernel on the partitioned output and the 2-D input view; return the output."""


def _rows(x: Tensor, op: str) -> tuple[Tensor, tuple[int, ...]]:
    """``x`` as ``(rows, N)`` (a view) and its original shape."""
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x is a scalar; pass at least one dimension")
    shape = tuple(x.shape)
    if x.ndim == 2:
        return x, shape
    if not x.is_contiguous:
        raise ArgumentError(f"{op}: x of shape {list(shape)} is a strided view; pass a 2-D view or call .copy()")
    return x.reshape(-1, shape[-1]) if shape[-1] else x.reshape(-1, 0), shape


def _configs(n_pow2: int) -> tuple[autotune.Config, ...]:
    return tuple(autotune.Config.of(BM=bm) for bm in (1, 2, 4, 8, 16) if bm * n_pow2 <= MAX_ROW)


def _default(n_pow2: int) -> autotune.Config:
    """Untuned rows per block: about 4096 elements per tile on the GPU, 2048 on the interpreter (fewer blocks)."""
    budget = 4096 if tile.backend() == "gpu" else 2048
    return autotune.Config.of(BM=max(1, min(16, budget // n_pow2)))


def _run_rows(
    op: str,
    *,
    x: Tensor,
    out_dtype: object,
    out: object,
    config: autotune.Config | None,
    launch: Launch,
) -> Tensor:
    x = _args.as_input(x, "x", op)
    _args.check_dtype(x, "x", op, _args.FLOATS)
    rows, shape = _rows(x, op)
    m, n = rows.shape
    if n > MAX_ROW:
        raise ArgumentError(f"{op}: rows of {n} elements are longer than {MAX_ROW}, the whole-row form's limit")
    if out is not None and x.ndim != 2:
        raise ArgumentError(f"{op}: out= needs a 2-D x; reshape x to (rows, {n}) first")
    z = _args.output(out, out_dtype, x.dtype, (m, n), op)
    dtype = z.dtype
    if m == 0 or n == 0:
        return z if x.ndim == 2 else z.reshape(shape)
    n_pow2 = _args.next_pow2(n)

    def run(cfg: autotune.Config, z: Tensor | None = None) -> Tensor:
        target = z if z is not None else tile.empty(dtype, [m, n])
        with tile.partitioned(target, [cfg["BM"], n_pow2]) as part:  # a refused launch gives ``out`` back
            return launch(part, rows[()])

    if config is None:
        key: dict[str, object] = {"m": autotune.bucket(m), "n": n_pow2, "dtype": x.dtype.name, "out": dtype.name}
        key |= autotune.environment()
        config = autotune.tuner(op, source_digest(_STEM)).choose(key, _configs(n_pow2), _default(n_pow2), run)
    bm = config.as_dict().get("BM", 0)
    if bm < 1 or bm & (bm - 1):
        raise ArgumentError(f"{op}: config {config}: BM (rows per block) must be a power of two")
    result = run(config, z)
    return result if x.ndim == 2 else result.reshape(shape)


def _vector(value: object, name: str, op: str, n: int) -> Tensor:
    t = _args.as_input(value, name, op)
    _args.check_dtype(t, name, op, _args.FLOATS)
    _args.check_shape(t, name, op, (n,))
    return t


def _softmax(x: object, log: bool, out_dtype: object, out: object, config: autotune.Config | None) -> Tensor:
    op = "log_softmax" if log else "softmax"
    xt = _args.as_input(x, "x", op)

    def launch(z: Partition, rows: Tensor) -> Tensor:
        return _args.first_output(kernels(_STEM).softmax(z, rows, LOG=log).sync())

    return _run_rows(op, x=xt, out_dtype=out_dtype, out=out, config=config, launch=launch)


def softmax(
    x: object, *, out_dtype: object = None, out: object = None, config: autotune.Config | None = None
) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` over the last dimension, in f32.

    Parameters
    ----------
    x
        f16, bf16 or f32, any shape (rank 2 may be strided; other ranks must be contiguous); rows up to `MAX_ROW`.
    out_dtype, out
        The output dtype (default ``out``'s if given, else ``x``'s) and a 2-D output tensor (moved into the call: use
        the returned tensor).
    config
        ``Config.of(BM=rows_per_block)``; default: tuned on the GPU, deterministic on the CPU interpreter.
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
    xt = _args.as_input(x, "x", op)
    n = xt.shape[-1] if xt.ndim else 0
    w = _vector(weight, "weight", op, n)

    def launch(z: Partition, rows: Tensor) -> Tensor:
        return _args.first_output(kernels(_STEM).rmsnorm(z, rows, w[()], float(eps)).sync())

    return _run_rows(op, x=xt, out_dtype=out_dtype, out=out, config=config, launch=launch)


def rmsnorm_op(
    x: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
) -> DeviceOp[tuple[Any, ...]]:
    """`rmsnorm` as an op that is not run yet, for ``.then()`` chains and graph captures (no wait inside).

    ``x`` must be 2-D ``(rows, N)`` and may be a tensor in flight (moved into the launch, which runs after its
    writer); the rest as in `rmsnorm`. The config is chosen now (tuned on a scratch input if not remembered). The
    op's output is the launch's argument tuple; its first element is the output partition (``out[0].unpartition()``).
    """
    op = "rmsnorm_op"
    xt = _args.operand(x, "x", op)
    _args.ensure_rank(xt, "x", op, 2)
    _args.check_dtype(xt, "x", op, _args.FLOATS)
    m, n = xt.shape
    if m == 0 or n == 0 or n > MAX_ROW:
        raise ArgumentError(f"{op}: x has shape {list(xt.shape)}; rows must hold 1 to {MAX_ROW} elements")
    w = _vector(weight, "weight", op, n)
    z = _args.output(out, out_dtype, xt.dtype, (m, n), op)
    n_pow2 = _args.next_pow2(n)

    def launch(z: Tensor, rows: Tensor, cfg: autotune.Config) -> DeviceOp[tuple[Any, ...]]:
        with tile.partitioned(z, [cfg["BM"], n_pow2]) as part:  # a refused launch gives ``out`` back
            made: DeviceOp[tuple[Any, ...]] = kernels(_STEM).rmsnorm(part, rows, w[()], eps)
        return made

    if config is None:
        key: dict[str, object] = {"m": autotune.bucket(m), "n": n_pow2, "dtype": xt.dtype.name, "out": z.dtype.name}
        key |= autotune.environment()

        def run(cfg: autotune.Config) -> Tensor:  # a scratch input: ``x`` may be in flight
            return _args.first_output(launch(tile.empty(z.dtype, [m, n]), tile.zeros(xt.dtype, [m, n]), cfg).sync())

        config = autotune.tuner("rmsnorm", source_digest(_STEM)).choose(key, _configs(n_pow2), _default(n_pow2), run)
    bm = config.as_dict().get("BM", 0)
    if bm < 1 or bm & (bm - 1):
        raise ArgumentError(f"{op}: config {config}: BM (rows per block) must be a power of two")
    return launch(z, xt, config)


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

    ``weight`` and ``bias`` are optional ``(N,)`` vectors of any float dtype; the rest as in `softmax`.
    """
    op = "layernorm"
    xt = _args.as_input(x, "x", op)
    n = xt.shape[-1] if xt.ndim else 0
    w = None if weight is None else _vector(weight, "weight", op, n)
    b = None if bias is None else _vector(bias, "bias", op, n)

    def launch(z: Partition, rows: Tensor) -> Tensor:
        w_arg = w[()] if w is not None else _args.placeholder(f32, 1)
        b_arg = b[()] if b is not None else _args.placeholder(f32, 1)
        k = kernels(_STEM)
        return _args.first_output(
            k.layernorm(z, rows, w_arg, b_arg, float(eps), HAS_W=w is not None, HAS_B=b is not None).sync()
        )

    return _run_rows(op, x=xt, out_dtype=out_dtype, out=out, config=config, launch=launch)
