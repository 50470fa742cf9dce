"""Pure layout arithmetic: byte spans of strided views, bounds and layout checks (no driver, CPU-testable).

Invariants: every check raises before anything is touched; offsets, shapes and strides are plain ints; strides
are in bytes; a span is the half-open byte range ``[lo, hi)`` relative to a view's pointer that its elements
occupy (negative strides reach below the pointer).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tile.core._errors import LayoutMismatchError, OutOfBoundsError

__all__ = [
    "as_dtype",
    "as_index",
    "as_indices",
    "as_shape",
    "c_strides",
    "check_span",
    "is_c_contiguous",
    "span",
    "view_nbytes",
]


def as_dtype(dtype: Any) -> np.dtype[Any]:
    """Normalise anything numpy (and ml_dtypes) understands as a dtype; reject object and void dtypes."""
    try:
        result: np.dtype[Any] = np.dtype(dtype)
    except TypeError as exc:
        raise LayoutMismatchError(f"{dtype!r} is not a dtype: pass a numpy dtype such as np.float32") from exc
    if result.hasobject or result.itemsize == 0:
        raise LayoutMismatchError(f"dtype {result} cannot live in device memory: use a numeric dtype")
    return result


def as_index(value: Any) -> int | None:
    """``value`` as an exact ``int`` when it is an integer (not a bool), else None.

    An ``int`` subclass converts to its true value without running any of its methods (``operator.index`` copies it),
    so one that lies in ``__lt__``, ``__add__`` or ``__radd__`` cannot pass a check as one number and be used as
    another; numpy integers convert through ``__index__``.
    """
    if type(value) is int:
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return None
    return operator.index(value)


def as_indices(values: Any) -> tuple[int, ...] | None:
    """A sequence of integers as exact ints (see `as_index`), or None when one is not an integer."""
    if type(values) is tuple and all(type(item) is int for item in values):  # the common case, as it is
        return values
    try:
        items = tuple(values)
    except TypeError:
        return None
    result = []
    for item in items:
        number = as_index(item)
        if number is None:
            return None
        result.append(number)
    return tuple(result)


def as_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    """Normalise a shape (an int or a sequence of them); every extent must be a non-negative int."""
    single = as_index(shape)
    extents = (single,) if single is not None else as_indices(shape)
    if extents is None or any(extent < 0 for extent in extents):
        raise LayoutMismatchError(f"shape {shape!r} is invalid: extents must be non-negative ints")
    return extents


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides for ``shape``."""
    strides = []
    step = itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """True when the layout is dense row-major (extents of 0 or 1 impose no stride)."""
    if math.prod(shape) == 0:
        return True
    dense = c_strides(shape, itemsize)
    return all(dim == 1 or got == want for dim, got, want in zip(shape, strides, dense, strict=True))


def span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Return ``(lo, hi)``: the byte range, relative to the pointer, that the view's elements cover."""
    if math.prod(shape) == 0:
        return (0, 0)
    lo = sum((dim - 1) * s for dim, s in zip(shape, strides, strict=True) if s < 0)
    hi = sum((dim - 1) * s for dim, s in zip(shape, strides, strict=True) if s > 0) + itemsize
    return (lo, hi)


def check_span(offset: int, nbytes: int, capacity: int, *, what: str) -> int:
    """Raise OutOfBoundsError unless ``[offset, offset + nbytes)`` lies inside ``[0, capacity)``; return the offset as
    an exact int (use that one: an int subclass may compute differently from what was checked)."""
    given = offset
    offset = as_index(given)  # type: ignore[assignment]  # None is refused just below
    if offset is None:
        raise OutOfBoundsError(f"{what}: offset {given!r} is not an int")
    if offset < 0 or nbytes < 0 or offset + nbytes > capacity:
        raise OutOfBoundsError(
            f"{what}: bytes [{offset}, {offset + nbytes}) fall outside the {capacity}-byte buffer; "
            "check the offset and the size"
        )
    return offset


def view_nbytes(dtype: np.dtype[Any], shape: tuple[int, ...], offset: int, capacity: int) -> int:
    """Check that a dense view of ``shape`` at byte ``offset`` (an exact int: see `as_index`) fits and is aligned;
    return its size in bytes."""
    if offset % dtype.alignment:
        raise OutOfBoundsError(
            f"offset {offset} is not aligned for {dtype} (needs a multiple of {dtype.alignment} bytes)"
        )
    nbytes = math.prod(shape) * dtype.itemsize
    check_span(offset, nbytes, capacity, what=f"view {dtype}{list(shape)} at offset {offset}")
    return nbytes
