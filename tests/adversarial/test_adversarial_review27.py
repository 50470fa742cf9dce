"""Review 27: tile.core's launches and read-only memory (a hole review 22 found). Each hole's test names it and failed
before its fix.

Hole found and fixed:

- ``tile.core.launch``, ``prepare`` and ``pack_args`` (and the launch plan, and kinds inferred without a signature)
  took a read-only `DeviceView` (``view.readonly``: a DLPack import of a read-only export, such as a tile.frontend
  ``Shared`` borrow) for a ``"ptr"`` parameter, so a kernel wrote memory its owner lent for reading only (racing the
  owner's other readers, or changing what another library promised would not change). tile.core's copies already
  refused it; launches could not tell which parameters a kernel writes. A signature now says so: ``"cptr"`` (C's
  ``const T*``) is a pointer the kernel only reads, and takes any view; ``"ptr"`` refuses a read-only view, and so
  does a kind inferred from a view (always ``"ptr"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core import _args
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver

# vec_add's x and y are only read: declared so, a read-only view may be passed for them (z is written: "ptr").
READ_XY = ("cptr", "i32", "i32", "cptr", "i32", "i32", "ptr", "i32", "i32")
READ_ONLY = r'read-only .* "ptr" parameter may be written through: .*declare the parameter "cptr"'


def _floats(n: int, value: float = 0.0) -> tc.DeviceBuffer:
    return tc.DeviceBuffer.from_host(np.full(n, value, np.float32))


def _read_only(buffer: tc.DeviceBuffer, n: int = 32) -> tc.DeviceView:
    """A view of ``buffer`` lent for reading only (as a DLPack import of a read-only export is)."""
    return tc.DeviceView(
        buffer.ptr, np.dtype(np.float32), (n,), (4,), device=buffer.device, owner=buffer, buffer=buffer, readonly=True
    )


def _contents(buffer: tc.DeviceBuffer) -> np.ndarray[Any, Any]:
    return buffer.to_numpy(np.float32)


def _args_with_z(x: object, y: object, z: object) -> list[Any]:
    return [x, 32, 1, y, 32, 1, z, 32, 1]


# -- hole: a read-only view passed for a "ptr" parameter, which the kernel writes ---------------------------------


def test_launch_refuses_a_read_only_view_for_a_ptr_parameter(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: the launch ran and the kernel wrote z, memory its owner lent read-only."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32, 7.0)
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        tc.launch(vec_add, 1, 1, _args_with_z(x, y, _read_only(z)), signature=VEC_ADD_SIGNATURE)
    np.testing.assert_array_equal(_contents(z), np.full(32, 7.0, np.float32))  # not written


def test_prepare_refuses_a_read_only_view_for_a_ptr_parameter(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: ``prepare`` packed it, and each call of the prepared launch wrote z."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32, 7.0)
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        tc.prepare(vec_add, 1, 1, _args_with_z(x, y, _read_only(z)), signature=VEC_ADD_SIGNATURE)
    np.testing.assert_array_equal(_contents(z), np.full(32, 7.0, np.float32))


def test_pack_args_and_pack_launch_refuse_a_read_only_view_for_a_ptr_parameter(sim: SimDriver) -> None:
    """Hole: the building blocks packed its address for a "ptr" parameter (a launcher of one's own wrote it)."""
    z = _floats(32)
    args = _args_with_z(_floats(32), _floats(32), _read_only(z))
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        tc.pack_args(args, VEC_ADD_SIGNATURE)
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        _args.pack_launch(args, VEC_ADD_SIGNATURE, device=None, expected=None)
    # A read-only view derived from another read-only view (a slice of a borrowed array) is refused the same way.
    derived = tc.DeviceView(
        z.ptr + 16, np.dtype(np.float32), (4,), (4,), device=z.device, owner=_read_only(z), readonly=True
    )
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 0 .*" + READ_ONLY):
        tc.pack_args([derived], ("ptr",))


def test_the_launch_plan_of_a_writable_launch_does_not_take_a_read_only_view(
    sim: SimDriver, vec_add: tc.Function
) -> None:
    """Hole: after writable launches made the function's plan for the signature, a launch with a read-only view of
    the same memory in z's place went down the full path, which took it, and the kernel wrote it."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32, 7.0)
    writable = z.view(np.float32, 32)
    for _ in range(2):  # the full path remembers the pointers; the second launch hits the plan
        tc.launch(vec_add, 1, 1, _args_with_z(x, y, writable), signature=VEC_ADD_SIGNATURE)
        np.testing.assert_array_equal(_contents(z), np.full(32, 3.0, np.float32))
    x.copy_from(np.full(32, 5.0, np.float32))
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        tc.launch(vec_add, 1, 1, _args_with_z(x, y, _read_only(z)), signature=VEC_ADD_SIGNATURE)
    np.testing.assert_array_equal(_contents(z), np.full(32, 3.0, np.float32))  # 7.0 (5 + 2) had it been written
    # The plan still serves the writable view, and a view's read-only flag cannot be turned off under it.
    tc.launch(vec_add, 1, 1, _args_with_z(x, y, writable), signature=VEC_ADD_SIGNATURE)
    np.testing.assert_array_equal(_contents(z), np.full(32, 7.0, np.float32))
    lent = _read_only(z)
    with pytest.raises(tc.ReadOnlyError, match=r"DeviceView.readonly is read-only"):
        lent.readonly = False


def test_kinds_inferred_from_a_read_only_view_are_refused(sim: SimDriver, vec_add: tc.Function) -> None:
    """Hole: without a signature a view's kind is "ptr", so a read-only view was launched as writable memory."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32, 7.0)
    i32 = np.int32
    args = [x, i32(32), i32(1), y, i32(32), i32(1), _read_only(z), i32(32), i32(1)]
    with pytest.raises(tc.LaunchArgumentError, match=r'kind inferred from a view is "ptr": pass a signature and'):
        tc.launch(vec_add, 1, 1, args)
    with pytest.raises(tc.LaunchArgumentError, match=r'kind inferred from a view is "ptr": pass a signature and'):
        tc.prepare(vec_add, 1, 1, args)
    np.testing.assert_array_equal(_contents(z), np.full(32, 7.0, np.float32))


def test_a_read_only_dlpack_import_is_refused_for_a_ptr_parameter(sim: SimDriver, vec_add: tc.Function) -> None:
    """The route the hole was found on: another library lends its array read-only through DLPack."""

    class Lender:  # a producer that exports its memory read-only (a versioned capsule with the read-only flag)
        def __init__(self, view: tc.DeviceView) -> None:
            self.view = view

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.view.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return self.view.__dlpack_device__()

    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32, 7.0)
    borrowed = tc.borrow(Lender(_read_only(z)))
    assert borrowed.readonly
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 6 .*" + READ_ONLY):
        tc.launch(vec_add, 1, 1, _args_with_z(x, y, borrowed), signature=VEC_ADD_SIGNATURE)
    del borrowed
    np.testing.assert_array_equal(_contents(z), np.full(32, 7.0, np.float32))


# -- "cptr": a parameter the kernel only reads takes read-only and writable views alike ----------------------------


def test_a_cptr_parameter_takes_a_read_only_view(sim: SimDriver, vec_add: tc.Function) -> None:
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
    args = _args_with_z(_read_only(x), y, z)  # x lent read-only, y a writable buffer: both fine for "cptr"
    for _ in range(2):  # the full path, then the plan
        tc.launch(vec_add, 1, 1, args, signature=READ_XY)
    np.testing.assert_array_equal(_contents(z), np.full(32, 3.0, np.float32))
    prepared = tc.prepare(vec_add, 1, 1, _args_with_z(x, _read_only(y), z), signature=READ_XY)
    y.copy_from(np.full(32, 4.0, np.float32))
    prepared()
    np.testing.assert_array_equal(_contents(z), np.full(32, 5.0, np.float32))
    packed = tc.pack_args(args, READ_XY)
    assert packed.kinds == READ_XY
    assert packed.values[0] == x.ptr
    assert packed.buffers == (x, y, z)
    assert tc.param_layout(READ_XY) == tc.param_layout(VEC_ADD_SIGNATURE)  # the same 8-byte pointer
    with pytest.raises(tc.LaunchArgumentError, match=r"raw address .* unchecked=True"):
        tc.pack_args([x.ptr], ("cptr",))  # "cptr" is no way around the raw-address check


# -- hole (found by this review, fixed by the lead): a view naming its buffer only as its owner was not tied to it ---


def test_a_view_with_its_buffer_as_owner_dies_with_the_buffer(sim: SimDriver, vec_add: tc.Function) -> None:
    """``DeviceView(ptr, ..., owner=buffer)`` without ``buffer=`` was checked to lie inside the buffer but not tied
    to it: after ``buffer.free()`` its ptr still packed, launched and copied into the freed memory (and its launches
    were no uses of the buffer, so the free did not wait for them)."""
    x, y, z = _floats(32, 1.0), _floats(32, 2.0), _floats(32)
    view = tc.DeviceView(z.ptr, np.dtype(np.float32), (32,), (4,), device=z.device, owner=z)
    assert view.buffer is z
    tc.launch(vec_add, (1,), (32,), _args_with_z(x, y, view), signature=VEC_ADD_SIGNATURE)
    z.free()
    with pytest.raises(tc.UseAfterFreeError, match=r"which was freed: keep the buffer alive"):
        _ = view.ptr
    with pytest.raises(tc.UseAfterFreeError, match=r"freed"):
        tc.launch(vec_add, (1,), (32,), _args_with_z(x, y, view), signature=VEC_ADD_SIGNATURE)
    with pytest.raises(tc.UseAfterFreeError, match=r"freed"):
        view.copy_from(np.zeros(32, np.float32))
