"""Bounds, spans and contiguity arithmetic against numpy's own notion of the same layouts (no GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.core as tc
from tile.core._layout import as_dtype, as_shape, c_strides, check_span, is_c_contiguous, span, view_nbytes

# numpy 2 moved byte_bounds to numpy.lib.array_utils; tile-core supports numpy >= 1.26.
try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # pragma: no cover - numpy 1.x
    byte_bounds = np.byte_bounds  # type: ignore[attr-defined]  # numpy 1.x only; the stubs here are numpy 2


@st.composite
def sliced_arrays(draw: st.DrawFn) -> np.ndarray:
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    base = np.zeros(shape, draw(st.sampled_from([np.int8, np.float32, np.float64])))
    index = tuple(slice(None, None, draw(st.sampled_from([1, 2, -1, -2]))) for _ in shape)
    return base[index]


@given(sliced_arrays())
def test_span_and_contiguity_agree_with_numpy(array: np.ndarray) -> None:
    low, high = byte_bounds(array)
    lo, hi = span(array.shape, array.strides, array.itemsize)
    assert (array.ctypes.data + lo, array.ctypes.data + hi) == (low, high)
    assert is_c_contiguous(array.shape, array.strides, array.itemsize) == array.flags.c_contiguous


@given(st.lists(st.integers(0, 6), max_size=4), st.sampled_from([1, 2, 4, 8]))
def test_c_strides_match_numpy(shape: list[int], itemsize: int) -> None:
    dtype = {1: np.uint8, 2: np.float16, 4: np.float32, 8: np.float64}[itemsize]
    array = np.empty(shape, dtype)
    assert is_c_contiguous(tuple(shape), c_strides(tuple(shape), itemsize), itemsize)
    if all(shape):
        assert c_strides(tuple(shape), itemsize) == array.strides


@given(st.integers(-5, 40), st.integers(0, 40), st.integers(0, 32))
def test_check_span_accepts_exactly_the_inside(offset: int, nbytes: int, capacity: int) -> None:
    inside = offset >= 0 and offset + nbytes <= capacity
    if inside:
        check_span(offset, nbytes, capacity, what="t")
    else:
        with pytest.raises(tc.OutOfBoundsError, match="fall outside the"):
            check_span(offset, nbytes, capacity, what="t")


def test_view_checks_alignment_and_bounds() -> None:
    assert view_nbytes(np.dtype(np.float32), (4,), 16, 32) == 16
    with pytest.raises(tc.OutOfBoundsError, match="not aligned for float32"):
        view_nbytes(np.dtype(np.float32), (1,), 2, 32)
    with pytest.raises(tc.OutOfBoundsError, match=r"bytes \[16, 36\) fall outside the 32-byte buffer"):
        view_nbytes(np.dtype(np.float32), (5,), 16, 32)
    with pytest.raises(tc.OutOfBoundsError, match=r"offset 1\.5 is not an int"):
        check_span(1.5, 1, 8, what="t")  # type: ignore[arg-type]  # the misuse under test


def test_dtype_and_shape_validation() -> None:
    assert as_dtype("bfloat16").itemsize == 2
    assert as_shape(3) == (3,)
    with pytest.raises(tc.LayoutMismatchError, match="cannot live in device memory"):
        as_dtype(object)
    with pytest.raises(tc.LayoutMismatchError, match="is not a dtype"):
        as_dtype("not-a-dtype")
    with pytest.raises(tc.LayoutMismatchError, match="extents must be non-negative ints"):
        as_shape((2, -1))
