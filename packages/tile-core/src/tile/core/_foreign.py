"""Borrowing foreign device memory (DLPack producers, ``__cuda_array_interface__`` objects, torch, cupy).

Invariants: borrowing never copies and never takes ownership: the returned view points at the producer's memory
and keeps the producer (and, for DLPack, the consumed capsule through cuda.core's ``StridedMemoryView``) alive
for as long as the view lives; the producer's pending work is ordered before the consumer stream (the given one,
or the device's default stream) as both protocols specify; host-only memory is refused with a hint.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tile.core import _dlpack, _reaper
from tile.core._buffer import DeviceBuffer
from tile.core._context import Device
from tile.core._errors import NullHandleError, WrongDeviceError, WrongTypeError
from tile.core._layout import as_dtype, c_strides, span
from tile.core._stream import Stream
from tile.core._view import DeviceView

__all__ = ["borrow"]

_KDL_CUDA, _KDL_CUDA_MANAGED = 2, 13


def _producer_device(obj: Any) -> int | None:
    """The producer's device ordinal when it says so cheaply (DLPack), else None."""
    device = getattr(obj, "__dlpack_device__", None)
    if device is None:
        return None
    kind, ordinal = device()
    if int(kind) not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        raise WrongDeviceError(
            f"{type(obj).__name__} lives in host memory (DLPack device type {int(kind)}): copy it to the GPU first, "
            "e.g. DeviceBuffer.from_host(array)"
        )
    return int(ordinal)


def borrow(obj: Any, *, stream: Stream | None = None) -> DeviceView:
    """View a foreign device array without copying or owning it.

    Parameters
    ----------
    obj : object
        A DLPack producer (``__dlpack__``: torch, cupy, jax, ...) or an object with ``__cuda_array_interface__``.
        Tile's own views are returned unchanged.
    stream : Stream, optional
        The stream that will use the memory; the producer's pending work is ordered before it. Defaults to the
        device's default stream.

    Returns
    -------
    DeviceView
        Its ``owner`` keeps ``obj`` alive. Tile memory coming back (a DLPack export of a `DeviceBuffer` or of a view of
        one, through any object that offers it) is that buffer's view (``view.buffer``): launches and copies through it
        are uses its free waits for, and the export it holds refuses the free while it lives.
    """
    if isinstance(obj, DeviceView):
        return obj
    if not hasattr(obj, "__dlpack__") and not hasattr(obj, "__cuda_array_interface__"):
        raise WrongTypeError(
            f"cannot borrow {type(obj).__name__}: it supports neither DLPack nor __cuda_array_interface__; pass a "
            "device array (torch, cupy, a tile.core DeviceView), or copy host data with DeviceBuffer.from_host"
        )
    from cuda.core.utils import StridedMemoryView

    if stream is not None and not isinstance(stream, Stream):
        raise WrongTypeError(
            f"borrow's stream= takes a tile.core.Stream, not {type(stream).__name__}: wrap a foreign stream with "
            "tile.core.Stream.borrow(obj) first"
        )
    ordinal = _producer_device(obj)
    if stream is None:
        stream = Device(ordinal if ordinal is not None else 0).default_stream
    # from_any_interface arrived in cuda.core 1.x; the constructor does the same (deprecated there).
    make = getattr(StridedMemoryView, "from_any_interface", StridedMemoryView)
    # The producer orders its pending work before this stream: never on a destroyed handle. Counted (refused once
    # closed): a close while the producer runs (its own code, a finalizer at one of its allocations, another thread)
    # leaves the destroy until it has returned (review 42).
    with stream.in_use():
        smv = make(obj, stream_ptr=stream.handle)
    if not smv.is_device_accessible or smv.device_id < 0:
        raise WrongDeviceError(f"{type(obj).__name__} is not device memory: copy it with DeviceBuffer.from_host")
    device = Device(int(smv.device_id))
    _check_residence(int(smv.ptr), device, type(obj).__name__)
    if device is not stream.device:
        raise WrongDeviceError(
            f"{type(obj).__name__} lives on device {device.ordinal} but {stream!r} is on device "
            f"{stream.device.ordinal}: pass a stream of the memory's device"
        )
    dtype = as_dtype(smv.dtype)
    shape = tuple(int(n) for n in smv.shape)
    if smv.ptr == 0 and math.prod(shape) > 0:
        raise NullHandleError(f"{type(obj).__name__} exported a null pointer for a non-empty array")
    strides = (
        tuple(int(s) * dtype.itemsize for s in smv.strides)
        if smv.strides is not None
        else c_strides(shape, dtype.itemsize)
    )
    # Tile memory coming back (a DLPack export of a DeviceBuffer, through whatever object offered it): the view is the
    # buffer's, checked to lie inside it and tied to it, so launches and copies through it are uses of the buffer
    # that its free waits for (untied, a launch on a stream the export never saw was no use of the buffer: dropped
    # view, freed buffer, the free not ordered after the kernel). The consumed export, held by ``smv``, keeps the
    # buffer's free refused while the view lives.
    home = _exporting_buffer(int(smv.ptr), dtype, shape, strides, device)
    if home is not None:
        return DeviceView(
            int(smv.ptr), dtype, shape, strides, device=device, owner=smv, buffer=home, readonly=bool(smv.readonly)
        )
    # The address is the producer's export (its DLPack capsule or __cuda_array_interface__): the one place tile.core
    # trusts a foreign address, as every consumer of those protocols must. Views made from this one are checked.
    return DeviceView(
        int(smv.ptr), dtype, shape, strides, device=device, owner=smv, readonly=bool(smv.readonly), unchecked=True
    )


def _check_residence(ptr: int, device: Device, what: str) -> None:
    """Refuse device memory the driver places on another GPU than ``device``, the one the import names.

    cuda.core takes a DLPack producer's device from its ``__dlpack_device__``, which any Python object can answer
    as it likes (a wrapper forwarding another array's export): trusted, a GPU 0 array would be a view "on GPU 1",
    and a kernel of GPU 1 would be launched on it, unordered with its frees. The driver knows where the allocation
    lives (``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``); managed memory, which every GPU may use, and memory the driver
    does not know (its producer's word is all there is, as for any foreign address) are left as named."""
    if not ptr:
        return
    d = _reaper.driver()
    attrs, ok = d.CUpointer_attribute, d.CUresult.CUDA_SUCCESS
    err, managed = d.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr)
    if err != ok or managed:
        return
    err, ordinal = d.cuPointerGetAttribute(attrs.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if err == ok and int(ordinal) != device.ordinal:
        raise WrongDeviceError(
            f"{what} says its memory is on device {device.ordinal}, but the driver places it on device "
            f"{int(ordinal)}: borrow it from a producer that names its own device (its __dlpack_device__)"
        )


def _exporting_buffer(
    ptr: int, dtype: np.dtype[Any], shape: tuple[int, ...], strides: tuple[int, ...], device: Device
) -> DeviceBuffer | None:
    """The live Tile buffer of ``device`` with a DLPack export still held (by the importer, or by the library that
    re-exports it) whose memory holds all of the array; None for other memory. Live buffers never overlap, so the
    address alone says whose memory it is."""
    lo, hi = span(shape, strides, dtype.itemsize)
    for owner in _dlpack.live_owners():
        if type(owner) is DeviceBuffer and owner.device is device and not owner.closed:
            base = owner._ptr
            if base <= ptr + lo and ptr + hi <= base + owner.nbytes:
                return owner
    return None
