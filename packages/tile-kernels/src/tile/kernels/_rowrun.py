"""Running a row kernel: the 2-D row view of an input, the config (given, remembered, tuned or default), the launch.

Every row op is described by a ``make(plan, outputs)`` function returning the launch (a ``DeviceOp``, not run) that
writes ``outputs`` (2-D tensors ``(M, N)``, partitioned here into the plan's ``(BM, NP)`` tiles) and reads the op's
inputs through fresh borrowed views. The tuner runs it on scratch outputs; the call runs it once on the real ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, DType, Partition, Tensor
from tile.kernels import _args, _rowforms, autotune
from tile.kernels._rowforms import Plan

__all__ = ["Make", "RowJob", "as_rows", "vector"]

Make = Callable[[Plan, Sequence[Partition]], DeviceOp[tuple[Any, ...]]]
"""``make(plan, outputs)``: the launch writing the partitioned ``outputs`` with ``plan``'s kernel (not run yet)."""


def as_rows(x: Tensor, op: str) -> tuple[Tensor, tuple[int, ...]]:
    """``x`` as ``(rows, N)`` (a view) and its original shape."""
    if x.ndim == 0:
        raise ArgumentError(f"{op}: x is a scalar; pass at least one dimension")
    shape = tuple(x.shape)
    if x.ndim == 2:
        return x, shape
    if not x.is_contiguous:
        raise ArgumentError(f"{op}: x of shape {list(shape)} is a strided view; pass a 2-D view or call .copy()")
    return x.reshape(-1, shape[-1]) if shape[-1] else x.reshape(-1, 0), shape


def vector(value: object, name: str, op: str, n: int) -> Tensor:
    """A borrowed ``(n,)`` float vector (a weight or a bias), checked."""
    t = _args.as_input(value, name, op)
    _args.check_dtype(t, name, op, _args.FLOATS)
    _args.check_shape(t, name, op, (n,))
    return t


@dataclass
class RowJob:
    """One row op on ``m`` rows of ``n`` elements: what it is tuned under and how it launches.

    ``family`` names the tuner (and its records file); ``dtypes`` are the input and output dtype names that the
    choice depends on; ``unit`` is the size chunks must be a multiple of (1, or the head size); ``candidates`` and
    ``fallback`` override the generic row configs (per-head rmsnorm has its own).
    """

    op: str
    family: str
    m: int
    n: int
    dtypes: tuple[str, ...]
    out_dtypes: tuple[DType, ...]
    make: Make
    unit: int = 1
    candidates: tuple[autotune.Config, ...] = ()
    fallback: autotune.Config | None = None

    @property
    def np(self) -> int:
        """The padded row length: the row tile's width."""
        return _args.next_pow2(self.n)

    def scratch(self) -> list[Tensor]:
        """Fresh outputs for a tuning run (the caller's ``out=`` is never written by one)."""
        return [tile.empty(d, [self.m, self.n]) for d in self.out_dtypes]

    def launch(self, plan: Plan, outputs: Sequence[Tensor]) -> DeviceOp[tuple[Any, ...]]:
        """The launch writing ``outputs`` with ``plan``."""
        with contextlib.ExitStack() as stack:  # a refused launch gives the caller's ``out=`` tensors back
            return self.make(plan, [stack.enter_context(tile.partitioned(o, plan.tile)) for o in outputs])

    def choose(self, config: autotune.Config | None) -> Plan:
        """The plan for ``config``, or the remembered / tuned / default one when it is None."""
        if config is None:
            tuner = autotune.tuner(self.family, _rowforms.source())
            recall = (self.m, self.np, self.dtypes, autotune.environment_items())  # what the key is made of
            config = tuner.recall(recall)
            if config is None:
                key: dict[str, object] = {"m": autotune.bucket(self.m), "n": self.np, "dtypes": list(self.dtypes)}
                key |= dict(recall[-1])
                candidates = self.candidates or _rowforms.configs(self.np)
                fallback = self.fallback or _rowforms.default(self.np)
                config = tuner.choose(key, candidates, fallback, self._time, recall=recall)
        return _rowforms.plan(config, self.np, self.op, unit=self.unit)

    def _time(self, config: autotune.Config) -> Tensor:
        plan = _rowforms.plan(config, self.np, self.op, unit=self.unit)
        return _args.first_output(self.launch(plan, self.scratch()).sync())

    def run(self, config: autotune.Config | None, outputs: Sequence[Tensor]) -> list[Tensor]:
        """Choose, launch on ``outputs`` and wait; the outputs' tensors, in order."""
        handed = self.launch(self.choose(config), outputs).sync()
        found = []
        for part in handed[: len(outputs)]:
            got = part.unpartition()
            assert isinstance(got, Tensor)
            found.append(got)
        return found
