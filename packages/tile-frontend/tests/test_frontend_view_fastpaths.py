"""The host fast paths of views against the straightforward definitions they replaced: the one-pass layout check
(`_checked_span`), the one-pass `is_contiguous`, the whole-axis indexing path, and the per-file classification behind
`user_site` (a cache: it must name the same user line as a full prefix test, never a stale one)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tile.frontend as tile
from tile.frontend import _site, _tensor, f16, f32
from tile.frontend._tensor import MAX_BYTES, Tensor, _checked_span, contiguous_strides


def _reference_span(storage: Any, shape: Any, strides: Any, offset: int, *, item: int = 2, name: str = "f16") -> Any:
    """The layout check as first written (several passes): the oracle, returning the span or the error message."""
    if any(n < 0 for n in shape) or any(s < 0 for s in strides) or offset < 0 or len(shape) != len(strides):
        return f"invalid layout: shape {list(shape)}, strides {list(strides)}, offset {offset}"
    reach = 0 if 0 in shape else sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + 1
    lo = storage.address + offset * item
    hi = lo + reach * item
    if max((*shape, *strides, offset, (offset + reach) * item), default=0) > MAX_BYTES:
        return (
            f"a {name} tensor of shape {list(shape)} (strides {list(strides)}, offset {offset}) reaches beyond "
            f"the 64-bit index range kernels use ({MAX_BYTES} bytes); use smaller extents or steps"
        )
    if lo < storage.address or hi > storage.address + storage.nbytes:
        return (
            f"a {name} tensor of shape {list(shape)} (strides {list(strides)}, offset {offset}) spans bytes "
            f"[{lo - storage.address}, {hi - storage.address}) of memory that holds {storage.nbytes} bytes; "
            "a view must lie inside the memory it views"
        )
    return lo, hi


def _fast_span(storage: Any, shape: Any, strides: Any, offset: int) -> Any:
    try:
        return _checked_span(storage, f16, tuple(shape), tuple(strides), offset)
    except tile.ArgumentError as exc:
        return str(exc)


_EXTENTS = st.integers(-2, 9) | st.sampled_from([2**62, 2**70])
_LAYOUTS = st.tuples(
    st.lists(_EXTENTS, max_size=4), st.lists(_EXTENTS, max_size=4), st.integers(-1, 40) | st.just(2**63)
)


@settings(max_examples=400, deadline=None)
@given(_LAYOUTS)
def test_the_one_pass_layout_check_agrees_with_its_definition(layout: Any) -> None:
    shape, strides, offset = layout
    storage = tile.zeros(f16, [64])._storage
    assert _fast_span(storage, shape, strides, offset) == _reference_span(storage, shape, strides, offset)


@pytest.mark.parametrize(
    ("shape", "strides", "offset", "expected"),
    [
        ((4, -1), (1, 1), 0, "invalid layout"),  # a negative extent after a valid one
        ((4, 2), (1, -3), 0, "invalid layout"),
        ((4,), (1, 1), 0, "invalid layout"),  # ranks differ
        ((4,), (1,), -1, "invalid layout"),
        ((0, 2**70), (1, 1), 0, "64-bit index range"),  # empty, but an extent no kernel index holds
        ((2, 2), (1, 2**62), 0, "64-bit index range"),
        ((0, 5), (1, 1), 65, "spans bytes [130, 130)"),  # an empty view past the end is still outside
        ((8, 8), (8, 1), 1, "spans bytes [2, 130)"),
    ],
)
def test_each_layout_refusal_still_fires(shape: Any, strides: Any, offset: int, expected: str) -> None:
    storage = tile.zeros(f16, [64])._storage
    found = _fast_span(storage, shape, strides, offset)
    assert isinstance(found, str)
    assert expected in found
    assert found == _reference_span(storage, shape, strides, offset)


def test_is_contiguous_agrees_with_its_definition() -> None:
    base = tile.zeros(f32, [3, 1, 4, 2])
    views = [base, base.permute(1, 0, 2, 3), base.permute(0, 2, 1, 3), base[:, :, ::2], base[1:, :, 1:3], base[:, 0]]
    views += [base.permute(3, 2, 1, 0), base[0:0], base[:, :, 1:2, :1], tile.zeros(f32, [])]
    for v in views:
        expected = all(s == c for n, s, c in zip(v.shape, v.strides, contiguous_strides(v.shape), strict=True) if n > 1)
        assert v.is_contiguous is expected, (v.shape, v.strides)


@pytest.mark.parametrize(
    "key",
    [
        (),
        slice(None),
        (slice(None), 1),
        (slice(None), slice(None), slice(0, None)),
        (1, slice(None, None, None)),
        (slice(None, 3),),
        (slice(0, 4, 1), slice(None)),
        (slice(None), slice(1, None, 2), -1),
    ],
)
def test_whole_axis_indexing_matches_numpy(key: Any) -> None:
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    t = tile.from_numpy(a)[1:]
    view = t[key]
    np.testing.assert_array_equal(view.to_numpy(), a[1:][key])
    assert view.strides == tuple(s // 4 for s in a[1:][key].strides)


def _probe_in(filename: str) -> Callable[[], str]:
    """A function calling ``user_site()`` whose code claims to live in ``filename``."""
    namespace: dict[str, Any] = {"user_site": _site.user_site}
    exec(compile("def probe():\n    return user_site()\n", filename, "exec"), namespace)
    probe: Callable[[], str] = namespace["probe"]
    return probe


def test_user_site_skips_every_tile_frame_and_names_the_caller() -> None:
    inside = str(Path(_site.__file__).resolve().parent / "_pretend_module.py")
    probe = _probe_in(inside)
    for _ in range(2):  # the second call reads the cached classification
        line = sys._getframe().f_lineno + 1
        site = probe()  # the probe's frame is Tile's (skipped): this line is named
        assert site == f"{__file__}:{line}"
        assert _site._IS_OURS[inside] is True
    outside = "/elsewhere/user_code.py"
    for _ in range(2):
        assert _probe_in(outside)() == f"{outside}:2"  # the probe itself is user code
        assert _site._IS_OURS[outside] is False


def test_the_site_classification_cache_never_differs_from_the_prefix_test() -> None:
    names = [str(Path(p) / "x.py") for p in _site.OURS] + ["/tmp/user.py", "<stdin>", "<string>", *map(str, _site.OURS)]
    for name, _ in itertools.product(names, range(2)):  # the second round reads the cached entries
        assert _site._ours(name) is name.startswith(_site.OURS)
    t = tile.zeros(f32, [4])
    view = t.reshape(2, 2)  # a view made here names this line, cached or not
    again = t.reshape(2, 2)
    assert view._site.endswith(f"{Path(__file__).name}:{sys._getframe().f_lineno - 2}")
    assert again._site.endswith(f"{Path(__file__).name}:{sys._getframe().f_lineno - 2}")
    assert isinstance(view, Tensor)
    assert _tensor.__dict__["user_site"] is _site.user_site  # views take their site from the walk tested above


def test_a_refused_partition_names_the_tensor_and_the_partition_line() -> None:
    """The refusal's text is built only on error (`require_exclusive` takes a callable): it names the same lines."""
    here = __file__
    made = sys._getframe().f_lineno + 1
    t = tile.zeros(f32, [8])
    view = t[2:]
    at = sys._getframe().f_lineno + 2
    with pytest.raises(tile.BorrowError) as info:
        t.partition([4])
    assert str(info.value).startswith(
        f"cannot partition Tensor(f32, [8]) created at {here}:{made} (at {here}:{at}): that needs exclusive memory, "
        f"but 1 other live handle(s) overlap it: Tensor(f32, [6]) created at {here}:{made + 1}. "
    )
    assert not t.moved
    del view
    assert t.partition([4]).unpartition().shape == (8,)


@pytest.mark.parametrize("dims", [(-2, 6), (2, -3), (-1, -1), (-1, 2, -1)])
def test_reshape_refuses_extents_below_minus_one_and_two_inferred_ones(dims: Any) -> None:
    t = tile.zeros(f32, [2, 6])
    with pytest.raises(tile.ArgumentError) as info:
        t.reshape(*dims)
    assert str(info.value) == f"reshape{dims}: extents are >= 0 with at most one -1"
    assert t.reshape(-1, 3).shape == (4, 3)
    assert t.reshape(12).shape == (12,)


def test_the_whole_view_borrow_is_the_same_layout_checked_and_named_here() -> None:
    """``t[()]`` (every library call's borrow of an input) reuses the handle's checked span instead of recomputing it:
    the new handle has exactly the source's layout, registers with its storage (so it blocks an exclusive partition),
    names this line, and still refuses a moved or freed source. Seen to catch: the fast path skipping ``_check`` (a
    moved tensor gave a view), and one that did not register the handle (the partition below passed)."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    for t in (tile.from_numpy(a), tile.from_numpy(a)[1:, ::2], tile.from_numpy(a).T):
        line = sys._getframe().f_lineno + 1
        view = t[()]
        assert (view.shape, view.strides, view._offset, view._range, view._layout) == (
            t.shape,
            t.strides,
            t._offset,
            t._range,
            t._layout,
        )
        assert view._range == _checked_span(t._storage, t.dtype, t.shape, t.strides, t._offset)
        assert view._site == f"{__file__}:{line}"
        np.testing.assert_array_equal(view.to_numpy(), t.to_numpy())
    whole = tile.from_numpy(a)
    borrow = whole[()]
    with pytest.raises(tile.BorrowError, match="1 other live handle"):
        whole.partition([1, 2])
    del borrow
    part = whole.partition([1, 2])
    with pytest.raises(tile.MovedError, match=r"partition\(\)"):
        whole[()]
    part.unpartition()
