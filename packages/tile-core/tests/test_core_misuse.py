"""Misuse that must fail before the driver: no driver present, freed buffers, bad copies and views (no GPU).

Buffers here are built around a fake address with ``__new__`` so every check that precedes a driver call can be
exercised on a machine without a GPU; if a check were missing, the test would reach the (absent) driver and fail
with DriverNotFoundError instead of the expected error.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import weakref
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as cu

import tile.bindings as tb
import tile.core as tc
from tile.bindings import _driver
from tile.core._buffer import Uses


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver._state, "module", None)
    monkeypatch.setattr(_driver._state, "failure", None)

    def missing(flags: int) -> None:
        raise RuntimeError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(cu, "cuInit", missing)
    monkeypatch.setattr(tc.Device, "_instances", {})


class FakeDevice:
    ordinal = 0
    arch = "sm_90"


class FakeStream:
    closed = False
    handle = 0x5


def fake_buffer(nbytes: int = 64) -> tc.DeviceBuffer:
    buffer = tc.DeviceBuffer.__new__(tc.DeviceBuffer)
    fake_device: Any = FakeDevice()
    fake_stream: Any = FakeStream()
    buffer._ptr, buffer.nbytes, buffer.device, buffer.stream = 0x7F0000000000, nbytes, fake_device, fake_stream
    buffer._freed, buffer._uses, buffer._foreign_streams = False, Uses(), set()
    buffer._ordered = {0x5: weakref.ref(fake_stream)}
    return buffer


def test_import_touches_no_driver() -> None:
    code = "import sys, tile.core; print('cuda.bindings.driver' in sys.modules, 'cuda.core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.usefixtures("no_driver")
@pytest.mark.parametrize(
    "use",
    [
        lambda: tc.Device(0),
        tc.Device.count,
        tc.Stream,
        tc.Event,
        lambda: tc.DeviceBuffer.allocate(16),
        lambda: tc.PinnedBuffer.allocate(16),
        lambda: tc.Module.from_cubin(b"\x7fELF" + bytes(60)),
    ],
)
def test_gpu_apis_without_a_driver_say_so(use: Any) -> None:
    with pytest.raises(tb.DriverNotFoundError, match="needs an NVIDIA GPU"):
        use()


@pytest.mark.usefixtures("no_driver")
def test_borrowing_host_memory_is_refused() -> None:
    with pytest.raises(tc.WrongDeviceError, match="lives in host memory"):
        tc.borrow(np.zeros(4))


def test_constructors_are_not_public() -> None:
    with pytest.raises(TypeError, match=r"DeviceBuffer\.allocate"):
        tc.DeviceBuffer()
    with pytest.raises(TypeError, match=r"PinnedBuffer\.allocate"):
        tc.PinnedBuffer()
    with pytest.raises(TypeError, match=r"Module\.from_cubin"):
        tc.Module()


@pytest.mark.parametrize("nbytes", [0, -1, 1.5, True])
def test_allocation_size_is_checked_first(nbytes: Any) -> None:
    with pytest.raises(tc.LayoutMismatchError, match="pass a positive int"):
        tc.DeviceBuffer.allocate(nbytes)


def test_use_after_free_and_double_free() -> None:
    buffer = fake_buffer()
    view = buffer.view(np.float32)
    buffer._freed = True
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        _ = buffer.ptr
    with pytest.raises(tc.UseAfterFreeError, match="which was freed"):
        _ = view.ptr
    with pytest.raises(tc.DoubleFreeError, match="already freed"):
        buffer.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed: allocate a new buffer"):
        buffer.copy_from(np.zeros(4, np.uint8))


def test_views_are_bounds_checked() -> None:
    buffer = fake_buffer(64)
    assert buffer.view(np.float32).shape == (16,)
    assert buffer.view(np.float64, (2, 2), offset=32).ptr == buffer.ptr + 32
    with pytest.raises(tc.OutOfBoundsError, match="fall outside the 64-byte buffer"):
        buffer.view(np.float64, (2, 2), offset=40)
    with pytest.raises(tc.OutOfBoundsError, match="not aligned"):
        buffer.view(np.float32, 1, offset=2)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda b: b.copy_from(np.zeros(65, np.uint8)), tc.OutOfBoundsError, r"copy into .* \[0, 65\)"),
        (lambda b: b.copy_from(b"abcd", offset=62), tc.OutOfBoundsError, r"\[62, 66\)"),
        (lambda b: b.copy_to(np.zeros(8, np.uint8), offset=-1), tc.OutOfBoundsError, "outside"),
        (lambda b: b.copy_to(np.zeros(8)[::2]), tc.LayoutMismatchError, "not C-contiguous"),
        (lambda b: b.copy_to(bytes(8)), tc.LayoutMismatchError, "read-only"),
        (lambda b: b.copy_from([1, 2]), tc.WrongTypeError, "cannot copy from/to list: use a numpy array"),
        (lambda b: b.view(np.float32).copy_from(np.zeros(16, np.float64)), tc.LayoutMismatchError, "size mismatch"),
        (lambda b: b.view(np.float32).copy_from(np.zeros(16, np.int32)), tc.LayoutMismatchError, "dtype mismatch"),
        (lambda b: b.view(np.uint8).fill(300), tc.LayoutMismatchError, "does not fit uint8"),
        (lambda b: b.view(np.int32).fill(1.5), tc.LayoutMismatchError, "cannot fill"),
        (lambda b: tc.copy(np.zeros(4), np.zeros(4)), tc.WrongTypeError, "got ndarray and ndarray.*host-to-host"),
        (lambda b: tc.copy([0], b), TypeError, "cannot copy from/to list"),  # still a TypeError to the caller
    ],
)
def test_bad_copies_fail_before_the_driver(call: Any, error: type[Exception], match: str) -> None:
    buffer = fake_buffer(64)
    with pytest.raises(error, match=match):
        call(buffer)


def test_strided_views_cannot_be_copied() -> None:
    buffer = fake_buffer(64)
    strided = tc.DeviceView(buffer.ptr, np.dtype(np.float32), (4,), (8,), device=buffer.device, owner=buffer)
    assert not strided.is_contiguous
    with pytest.raises(tc.LayoutMismatchError, match="strided"):
        strided.copy_to(np.zeros(4, np.float32))


def test_buffers_and_views_refuse_the_untracked_cuda_array_interface() -> None:
    """Its consumer (cupy, numba) keeps a raw pointer and never says when it is done, so a free could not wait for it:
    refused with a typed error that is also an AttributeError (``hasattr`` False, libraries take DLPack)."""
    buffer = fake_buffer(64)
    strided = tc.DeviceView(buffer.ptr, np.dtype(np.int16), (2, 2), (8, 2), device=buffer.device, owner=buffer)
    for exporter in (buffer, buffer.view(np.float32, (4, 4)), strided, buffer.view("bfloat16")):
        assert not hasattr(exporter, "__cuda_array_interface__")
        with pytest.raises(tc.UntrackedExportError, match=r"does not track.*cupy\.from_dlpack\(buf\)") as refused:
            _ = exporter.__cuda_array_interface__
        assert isinstance(refused.value, AttributeError)
        assert type(exporter).__name__ in str(refused.value)
    assert not buffer.closed  # the refusal registered nothing and freed nothing


@pytest.mark.parametrize(
    "error",
    [
        tc.UseAfterFreeError("x"),
        tc.DoubleFreeError("x"),
        tc.OutOfBoundsError("x"),
        tc.LayoutMismatchError("x"),
        tc.WrongDeviceError("x"),
        tc.StreamClosedError("x"),
        tc.NullHandleError("x"),
        tc.ArchMismatchError("x"),
        tc.LaunchArgumentError("x"),
        tc.StateError("x"),
        tc.WrongTypeError("x"),
        tc.UntrackedExportError("x"),
    ],
)
def test_errors_are_tile_errors_with_a_builtin_base_and_pickle(error: Exception) -> None:
    assert isinstance(error, tb.TileError)
    assert isinstance(error, (RuntimeError, ValueError, TypeError, IndexError, AttributeError))
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == "x"


def test_only_known_objects_pass_as_streams() -> None:
    from tile.core._stream import _foreign_stream_handle

    assert _foreign_stream_handle(0x1234, unchecked=True) == 0x1234
    assert _foreign_stream_handle(cu.CUstream(0x4321), unchecked=True) == 0x4321
    with pytest.raises(tc.WrongTypeError, match=r"raw stream handle.*Stream\.borrow\(handle, unchecked=True\)"):
        _foreign_stream_handle(0x1234, unchecked=False)
    assert _foreign_stream_handle(SimpleNamespace(__cuda_stream__=lambda: (0, 0x99)), unchecked=False) == 0x99
    with pytest.raises(tc.WrongTypeError, match=r"cannot use DeviceBuffer as a stream: pass a tile\.core\.Stream"):
        _foreign_stream_handle(fake_buffer(), unchecked=True)
    with pytest.raises(TypeError, match="cannot use float as a stream"):
        _foreign_stream_handle(1.5, unchecked=True)


@pytest.mark.usefixtures("no_driver")
def test_objects_of_the_wrong_kind_are_typed_errors_before_the_driver() -> None:
    """Each refusal is a tile.core error (a TileError and a TypeError) and is raised before any driver call: the
    fixture makes a driver call fail with a RuntimeError instead."""
    with pytest.raises(tc.WrongTypeError, match=r"cannot use float as a stream: pass a tile\.core\.Stream"):
        tc.Stream.borrow(1.5)
    with pytest.raises(tc.WrongTypeError, match=r"cannot borrow list: it supports neither DLPack.*from_host"):
        tc.borrow([1.0, 2.0])
    with pytest.raises(tc.WrongTypeError, match="cannot copy from/to object: use a numpy array"):
        tc.copy(fake_buffer(), object())
