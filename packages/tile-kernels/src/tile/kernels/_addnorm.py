"""The fused residual add + rmsnorm (`add_rmsnorm`) and the launch-returning row ops (`rmsnorm_op`,
`add_rmsnorm_op`) that a model step chains with ``.then()`` or captures as a graph.

``add_rmsnorm(x, residual, weight)`` is the pre-norm transformer's ``s = residual + x; y = rmsnorm(s) * weight``:
one read of ``x`` and ``residual``, one write of ``s`` and ``y``. The sum is rounded to its dtype (``residual``'s by
default) before it is normalised, as the model code computes it in that dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Partition, Tensor
from tile.kernels import _args, autotune
from tile.kernels._rowforms import Plan
from tile.kernels._rowrun import RowJob, as_rows, vector

__all__ = ["add_rmsnorm", "add_rmsnorm_op", "rmsnorm_op"]

Launch = DeviceOp[tuple[Any, ...]]


class _Inputs:
    """The inputs a launch reads: the call's (operands, each used once), or zero-filled scratch tensors of the same
    shapes and dtypes for tuning runs (the real inputs may be in flight), made on first use only."""

    def __init__(self, values: Sequence[Tensor], scratch: bool) -> None:
        self.values, self.scratch = list(values), scratch
        self._made: list[Tensor] | None = None

    def get(self) -> list[Tensor]:
        if not self.scratch:
            return self.values
        if self._made is None:
            self._made = [tile.zeros(v.dtype, list(v.shape)) for v in self.values]
        return [t[()] for t in self._made]


def rmsnorm_op(
    x: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    config: autotune.Config | None = None,
) -> Launch:
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
    if m == 0 or n == 0:
        raise ArgumentError(f"{op}: x has shape {list(xt.shape)}; pass at least one row of at least one element")
    w = vector(weight, "weight", op, n)
    z = _args.output(out, out_dtype, xt.dtype, (m, n), op)
    eps_f = _args.real(eps, "eps", op)  # refused (ArgumentError) before any output is partitioned

    def job(scratch: bool) -> RowJob:
        inputs = _Inputs([xt], scratch)

        def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
            made: Launch = plan.kernel("rmsnorm")(outs[0], inputs.get()[0], w[()], eps_f, **plan.generics())
            return made

        return RowJob(op, "rmsnorm", m, n, (xt.dtype.name, z.dtype.name), (z.dtype,), make)

    plan = job(scratch=True).choose(config)
    return job(scratch=False).launch(plan, [z])


def _add_job(op: str, x: Tensor, r: Tensor, w: Tensor, eps: float, *, dtypes: tuple[Any, Any], scratch: bool) -> RowJob:
    m, n = x.shape
    inputs = _Inputs([x, r], scratch)

    eps_f = _args.real(eps, "eps", op)  # refused (ArgumentError) before any output is partitioned

    def make(plan: Plan, outs: Sequence[Partition]) -> Launch:
        xs, rs = inputs.get()
        made: Launch = plan.kernel("add_rmsnorm")(outs[0], outs[1], xs, rs, w[()], eps_f, **plan.generics())
        return made

    names = (x.dtype.name, r.dtype.name, dtypes[0].name, dtypes[1].name)
    return RowJob(op, "add_rmsnorm", m, n, names, dtypes, make)


def _add_outputs(
    op: str, x: Tensor, r: Tensor, w_value: object, out: tuple[object, object, object, object]
) -> tuple[Tensor, Tensor, Tensor]:
    """The checked weight and the two outputs (normed, sum) of an add_rmsnorm on 2-D ``x`` and ``r``."""
    _args.check_dtype(x, "x", op, _args.FLOATS)
    _args.check_dtype(r, "residual", op, _args.FLOATS)
    _args.check_shape(r, "residual", op, x.shape)
    m, n = x.shape
    w = vector(w_value, "weight", op, n)
    out_dtype, out_t, sum_dtype, sum_out = out
    z = _args.output(out_t, out_dtype, x.dtype, (m, n), op)
    s = _args.output(sum_out, sum_dtype, r.dtype, (m, n), op)
    return w, z, s


def add_rmsnorm(
    x: object,
    residual: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    sum_dtype: object = None,
    sum_out: object = None,
    config: autotune.Config | None = None,
) -> tuple[Tensor, Tensor]:
    """``s = x + residual`` and ``rmsnorm(s) * weight`` over the last dimension, fused: returns ``(normed, s)``.

    Parameters
    ----------
    x, residual
        The same shape (any rank; rank 2 may be strided, other ranks must be contiguous), f16, bf16 or f32.
    weight
        ``(N,)``, any float dtype.
    eps
        As in `rmsnorm`.
    out_dtype, out
        The normalised output's dtype (default ``out``'s, else ``x``'s) and a 2-D tensor for it (moved in).
    sum_dtype, sum_out
        The sum's dtype (default ``sum_out``'s, else ``residual``'s: the residual stream's) and a 2-D tensor for it
        (moved in; it may not overlap ``residual``, which is read while it is written).
    config
        As in `rmsnorm`.
    """
    op = "add_rmsnorm"
    xt, rt = _args.as_input(x, "x", op), _args.as_input(residual, "residual", op)
    rows, shape = as_rows(xt, op)
    if tuple(rt.shape) != shape:
        raise ArgumentError(f"{op}: residual has shape {list(rt.shape)}, expected {list(shape)}")
    if (out is not None or sum_out is not None) and xt.ndim != 2:
        raise ArgumentError(f"{op}: out= and sum_out= need a 2-D x; reshape x to (rows, {shape[-1]}) first")
    res_rows, _ = as_rows(rt, op)
    w, z, s = _add_outputs(op, rows, res_rows, weight, (out_dtype, out, sum_dtype, sum_out))
    if z.size:
        job = _add_job(op, rows, res_rows, w, eps, dtypes=(z.dtype, s.dtype), scratch=False)
        plan = _add_job(op, rows, res_rows, w, eps, dtypes=(z.dtype, s.dtype), scratch=True).choose(config)
        handed = job.launch(plan, [z, s]).sync()
        z, s = handed[0].unpartition(), handed[1].unpartition()
    return (z, s) if len(shape) == 2 else (z.reshape(shape), s.reshape(shape))


def add_rmsnorm_op(
    x: object,
    residual: object,
    weight: object,
    *,
    eps: float = 1e-6,
    out_dtype: object = None,
    out: object = None,
    sum_dtype: object = None,
    sum_out: object = None,
    config: autotune.Config | None = None,
) -> Launch:
    """`add_rmsnorm` as an op that is not run yet: its output's first element is the normalised partition, its
    second the sum's (``out[0].unpartition()``, ``out[1].unpartition()``).

    ``x`` and ``residual`` must be 2-D and either may be a tensor in flight (moved into the launch); the rest as in
    `add_rmsnorm`. The config is chosen now (tuned on scratch inputs if not remembered).
    """
    op = "add_rmsnorm_op"
    xt, rt = _args.operand(x, "x", op), _args.operand(residual, "residual", op)
    _args.ensure_rank(xt, "x", op, 2)
    _args.ensure_rank(rt, "residual", op, 2)
    w, z, s = _add_outputs(op, xt, rt, weight, (out_dtype, out, sum_dtype, sum_out))
    if z.size == 0:
        raise ArgumentError(f"{op}: x has shape {list(xt.shape)}; pass at least one row of at least one element")
    plan = _add_job(op, xt, rt, w, eps, dtypes=(z.dtype, s.dtype), scratch=True).choose(config)
    return _add_job(op, xt, rt, w, eps, dtypes=(z.dtype, s.dtype), scratch=False).launch(plan, [z, s])
