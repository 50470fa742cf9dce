"""Argument handling shared by the kernel families: borrowing inputs, checking shapes and dtypes, outputs.

Inputs are borrowed, never moved: a launch gets a fresh view handle of the caller's tensor (``t[()]``), so the
caller's handle stays usable after the call, while the ownership rules still apply to the memory (an ``out=`` that
overlaps an input cannot be partitioned while the input's view is alive, and raises `AliasError`). Foreign arrays
(torch, cupy, numpy) are borrowed zero-copy through DLPack (`tile.frontend.from_dlpack`).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import ArgumentError, DType, Shared, Tensor

__all__ = [
    "FLOATS",
    "as_input",
    "check_dtype",
    "check_shape",
    "dtype_of",
    "ensure_rank",
    "first_output",
    "integer",
    "next_pow2",
    "operand",
    "output",
    "placeholder",
]

FLOATS = frozenset({"f16", "bf16", "f32"})
_PLACEHOLDERS: dict[tuple[str, str, int], Shared] = {}
_LOCK = threading.Lock()


def as_input(value: object, name: str, op: str) -> Tensor:
    """A new handle viewing ``value`` (a Tile tensor, or anything DLPack or numpy can export) for one launch."""
    if isinstance(value, Tensor):
        return value[()]
    if isinstance(value, tile.Partition):
        raise ArgumentError(f"{op}: {name} is a partition; pass a tensor (call .unpartition() on it first)")
    if hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__"):
        return tile.from_dlpack(value)
    raise ArgumentError(
        f"{op}: {name} is a {type(value).__name__}; pass a tile Tensor, or a torch/cupy/numpy array (borrowed through "
        "DLPack)"
    )


def operand(value: object, name: str, op: str) -> Tensor:
    """The handle a launch-returning (``*_op``) function passes for an input: a tensor in flight (handed on inside a
    ``.then()`` function or a capture, e.g. ``z.unpartition()`` of the previous launch's output) itself, moved into
    the launch, which runs after its writer; anything else as `as_input` (a borrowed view, the caller's handle stays
    usable)."""
    if isinstance(value, Tensor) and value.in_flight:
        return value
    return as_input(value, name, op)


def dtype_of(value: object, op: str) -> DType:
    """A ``tile`` dtype (`tile.f16`, ...) from a dtype object or its name (``"bf16"``)."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and isinstance(found := getattr(tile, value, None), DType):
        return found
    raise ArgumentError(f"{op}: {value!r} is not a dtype; pass one of tile.f16, tile.bf16, tile.f32")


def check_dtype(t: Tensor, name: str, op: str, allowed: Collection[str]) -> None:
    """Raise `ArgumentError` unless ``t``'s dtype is one of ``allowed``."""
    if t.dtype.name not in allowed:
        raise ArgumentError(f"{op}: {name} has dtype {t.dtype.name}; supported: {', '.join(sorted(allowed))}")


def check_shape(t: Tensor, name: str, op: str, shape: Sequence[int]) -> None:
    """Raise `ArgumentError` unless ``t`` has exactly ``shape``."""
    if tuple(t.shape) != tuple(shape):
        raise ArgumentError(f"{op}: {name} has shape {list(t.shape)}, expected {list(shape)}")


def output(out: object, out_dtype: object, default: DType, shape: Sequence[int], op: str) -> Tensor:
    """The output tensor: ``out`` (moved into the call) checked against ``shape`` and ``out_dtype``, or a new one of
    ``out_dtype``. Without ``out_dtype`` the dtype is ``out``'s, or else ``default``."""
    dtype = None if out_dtype is None else dtype_of(out_dtype, op)
    if dtype is not None and dtype.name not in FLOATS:
        raise ArgumentError(f"{op}: out_dtype {dtype.name} is not one of bf16, f16, f32")
    if out is None:
        return tile.empty(dtype or default, list(shape))
    # A foreign array's borrow is the only Tile handle on it, so it may be written; a Tile tensor is moved in.
    tensor = out if isinstance(out, Tensor) else as_input(out, "out", op)
    if dtype is not None and tensor.dtype != dtype:
        raise ArgumentError(f"{op}: out has dtype {tensor.dtype.name}; this call writes {dtype.name}")
    check_dtype(tensor, "out", op, FLOATS)
    check_shape(tensor, "out", op, shape)
    return tensor


def placeholder(dtype: DType, rank: int) -> Shared:
    """A one-element shared tensor of ``rank`` passed for an input a kernel does not read (no bias, no residual).

    One per (backend, dtype, rank) for the process, shared for good: a ``*_op``'s caller gets it back among the
    launch's arguments, and ``unshare()`` on it must not take it away from every later call."""
    key = (tile.backend(), dtype.name, rank)
    with _LOCK:
        found = _PLACEHOLDERS.get(key)
        if found is None:
            found = _PLACEHOLDERS[key] = tile.zeros(dtype, [1] * rank).share(permanent=True)
        return found


def first_output(handed_back: Sequence[Any]) -> Tensor:
    """The tensor of the first output partition a finished launch handed back (what ``.sync()`` returned)."""
    out = handed_back[0].unpartition()
    assert isinstance(out, Tensor)
    return out


def real(value: object, name: str, op: str) -> float:
    """``value`` as a float: a Python or numpy real number (not a bool), else `ArgumentError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{op}: {name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


def score_scale(value: object, op: str) -> float:
    """An attention ``scale`` as a float: positive and finite, else `ArgumentError`. The kernels hide masked scores
    by adding a large negative number before the scale; a zero, negative or infinite scale would turn the hidden keys
    into the largest scores (or NaNs) and give a wrong result without any error."""
    scale = real(value, "scale", op)
    if not (0.0 < scale < float("inf")):
        raise ArgumentError(f"{op}: scale must be a positive finite number, got {scale!r}")
    return scale


def integer(value: object, name: str, op: str) -> int:
    """``value`` as an int: a Python or numpy integer (not a bool), else `ArgumentError` naming ``name`` (a count, an
    index or a seed; a float such as ``2.5`` is refused, never truncated)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{op}: {name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    return 1 << max(0, n - 1).bit_length()


def ensure_rank(t: Tensor, name: str, op: str, rank: int) -> None:
    """Raise `ArgumentError` unless ``t`` has ``rank`` dimensions."""
    if t.ndim != rank:
        raise ArgumentError(f"{op}: {name} must have {rank} dimensions, got shape {list(t.shape)}")
