"""The corpus record: one kernel, how to specialize it, and (where it has numeric semantics) its numpy reference.

A `Case` is consumed by the compiler tests (lower, verify, bytecode, tileiras), the interpreter helper and the GPU
tier. ``inputs(rng)`` returns every argument by parameter name: numpy arrays for tensors (outputs hold their
initial contents), Python numbers for scalars; ``reference(args)`` returns the expected final contents of every
output, by name; ``tol`` says which rounding separates them (`tc_tol`). Const values and const generics are in
``consts``. ``grid`` is given only for kernels without a
``Mut`` output (unchecked kernels writing through pointers); otherwise the grid is the first output's tile grid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tc_tol import Tol

from tile.compiler import CompileOptions

__all__ = ["ALL_ARCHS", "Case", "unchecked"]

ALL_ARCHS = ("sm_80", "sm_90", "sm_100")
Args = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One corpus kernel and its specialization, inputs and reference."""

    kernel: Callable[..., object]
    consts: Mapping[str, int | float | bool] = field(default_factory=dict)
    inputs: Callable[[np.random.Generator], Args] | None = None
    reference: Callable[[Args], dict[str, np.ndarray]] | None = None
    archs: tuple[str, ...] = ALL_ARCHS
    tol: Tol = field(default_factory=Tol)
    contiguous: bool = True
    grid: Callable[[Args], tuple[int, ...]] | None = None
    hints: Mapping[str, Any] = field(default_factory=dict)  # more CompileOptions fields (math modes, entry hints)
    bytecode: tuple[int, int] = (13, 3)  # the version the corpus writes it at: 13.4 for ops 13.4 added (PDL)

    @property
    def name(self) -> str:
        """The kernel's name."""
        return str(getattr(self.kernel, "__name__", "kernel"))

    @property
    def options(self) -> CompileOptions:
        """The compile options of the case: unchecked for kernels marked `unchecked`, plus its ``hints``."""
        return CompileOptions(unchecked=self.kernel in UNCHECKED, **self.hints)


UNCHECKED: set[Callable[..., object]] = set()


def unchecked(fn: Callable[..., object]) -> Callable[..., object]:
    """List a corpus kernel as unchecked: its cases compile with ``CompileOptions(unchecked=True)``."""
    UNCHECKED.add(fn)
    return fn


def rand(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32", lo: float = -1, hi: float = 1
) -> np.ndarray:
    """Uniform random values in [lo, hi) of ``dtype``."""
    return rng.uniform(lo, hi, shape).astype(dtype)


def poison(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    """An output's initial contents (NaN for floats, a sentinel for ints) so unwritten elements show up."""
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, -7, dtype)
