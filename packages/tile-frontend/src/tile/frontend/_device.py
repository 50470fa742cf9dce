"""GPU-backend storage: allocation, copies and views through ``tile.core`` (imported only when a GPU is used).

Invariant: nothing here runs on the CPU backend; every function takes or makes `Storage` with a ``buffer``
(a ``tile.core.DeviceBuffer`` when owned, a ``DeviceView`` when borrowed) and a ``tile.core.Device``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tile.frontend._dtypes import numpy_dtype
from tile.frontend._errors import ArgumentError, TileError
from tile.frontend._storage import Storage

if TYPE_CHECKING:
    from tile.frontend._tensor import Tensor

__all__ = ["allocate", "borrow", "copy_to", "default_device", "read", "upload", "view"]


def default_device() -> Any:
    """The device new GPU tensors go to: tile.aio's default device when it is a GPU (``tile.aio.use_device(1)``,
    ``tile.aio.set_default_device``, which ``tile.distributed.init`` sets to the process's GPU), else GPU 0."""
    import tile.aio
    from tile import core

    found = tile.aio.default_device()
    return found if isinstance(found, core.Device) else core.Device(0)


def allocate(nbytes: int, device: Any) -> Storage:
    """An uninitialised owned device allocation."""
    from tile import core

    # Launches use plain addresses on other streams: the allocation must be complete before the tensor exists.
    # A ready allocation is, and waiting for it never waits for queued frees or kernels (tile.core's private stream).
    buffer = core.DeviceBuffer.allocate(max(nbytes, 1), device=device, ready=True)
    return Storage(device, buffer.ptr, buffer.nbytes, buffer=buffer)


def upload(array: np.ndarray[Any, Any], device: Any) -> Storage:
    """An owned device allocation holding a copy of the contiguous host ``array``."""
    from tile import core

    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)  # bytes: ml_dtypes element types copy as they are
    # Copied on the buffer's home stream (tile.core's stream for ready buffers), which never carries a free: the
    # copy's synchronize waits for the copy, not for queued frees and the kernels they follow.
    buffer = core.DeviceBuffer.from_host(raw, device=device, ready=True)
    return Storage(device, buffer.ptr, buffer.nbytes, buffer=buffer)


def copy_to(tensor: Tensor, device: Any) -> Storage:
    """An owned allocation on ``device`` holding a copy of the contiguous device ``tensor`` (blocks until copied).

    Between two GPUs this is a peer copy (``cuMemcpyPeerAsync``; tile.core enables peer access where the hardware
    allows it). The copy is ordered after the source buffer's pending work and recorded on both buffers, so neither
    is freed under it.
    """
    from tile import core

    storage = tensor._check()
    lo, hi = tensor._byte_range()
    buffer = core.DeviceBuffer.allocate(max(hi - lo, 1), device=device, ready=True)
    if hi > lo:
        home = storage.buffer if isinstance(storage.buffer, core.DeviceBuffer) else None
        raw = (np.dtype(np.uint8), (hi - lo,), (1,))
        # Read-only: the copy only reads it, and memory a producer exported read-only refuses a writable view.
        src = core.DeviceView(lo, *raw, device=storage.device, owner=storage.buffer, buffer=home, readonly=True)  # type: ignore[arg-type]  # a tile.core.Device
        dst = core.DeviceView(buffer.ptr, *raw, device=device, owner=buffer, buffer=buffer)
        core.copy(dst, src, stream=buffer.stream)  # blocks until copied
    return Storage(device, buffer.ptr, buffer.nbytes, buffer=buffer)


class _ThroughDLPack:
    """A ``tile.core.DeviceView`` offered to ``tile.core.borrow`` through DLPack only. Given the view itself, tile.core
    hands it back as it is and registers nothing, so the frontend would keep a raw pointer the view's buffer does not
    know about (its ``free()`` would succeed under the tensor); imported through DLPack, the export is registered and
    the buffer refuses ``free()`` (``StateError``) while the tensor lives."""

    __slots__ = ("_view",)

    def __init__(self, view: Any) -> None:
        self._view = view

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._view.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self._view.__dlpack_device__()
        return device


def borrow(obj: object) -> tuple[Storage, np.dtype[Any], tuple[int, ...], tuple[int, ...], int]:
    """Borrow a foreign device array: (storage, dtype, shape, element strides, element offset).

    Refused (`ArgumentError`): negative strides, a pointer not aligned to the element size (a kernel's access would
    fault), and what the import itself refuses untyped (cuda.core's ``ValueError`` for strides that are not whole
    elements of a ``__cuda_array_interface__``).
    """
    from tile import core

    try:  # orders the producer's pending work before the device's default stream (DLPack protocol)
        dv = core.borrow(_ThroughDLPack(obj) if isinstance(obj, core.DeviceView) else obj)
    except TileError:
        raise
    except (BufferError, TypeError, ValueError) as exc:
        raise ArgumentError(
            f"cannot borrow {type(obj).__name__}: {exc}; pass a device array with non-negative strides of whole "
            "elements, or borrow a contiguous copy (e.g. torch's .contiguous(), cupy.ascontiguousarray)"
        ) from None
    dv.device.default_stream.synchronize()  # launches run on other streams: the producer's writes must be done
    item = dv.dtype.itemsize
    if any(s < 0 for s in dv.strides):
        raise ArgumentError(
            f"{type(obj).__name__} has negative strides {dv.strides}, which Tile does not support; borrow a "
            "contiguous copy (e.g. torch's .contiguous(), cupy.ascontiguousarray)"
        )
    if all(dv.shape) and dv.ptr % item:
        raise ArgumentError(
            f"{type(obj).__name__} starts at {dv.ptr:#x}, not aligned to its {item}-byte elements (a kernel's access "
            "would fault); borrow a contiguous copy (e.g. torch's .clone(), cupy.ascontiguousarray)"
        )
    span = sum((n - 1) * s for n, s in zip(dv.shape, dv.strides, strict=False)) + item if all(dv.shape) else 0
    storage = Storage(dv.device, dv.ptr, span, buffer=dv, owned=False, readonly=dv.readonly, keepalive=dv)
    return storage, dv.dtype, tuple(dv.shape), tuple(s // item for s in dv.strides), 0


def view(tensor: Tensor, *, export: bool = False, writable: bool = False) -> Any:
    """A ``tile.core.DeviceView`` of the tensor's elements (zero-copy).

    With ``export``, the view is not tied to the buffer (it only keeps it referenced), so a DLPack capsule made from
    it owns the *view* until the consumer is done: the frontend watches that view to know how long the export lives
    (a buffer-tied view hands the capsule the buffer, and the view would die at once). Ordering the consumer's stream
    is not needed: a handle exists only once the work writing its memory is complete (`_execute`, `_launch`). The
    view is read-only unless ``writable`` (only a `Lent` tensor, which no Tile handle can use meanwhile, is).
    """
    from tile import core

    storage = tensor._check()
    item = tensor.dtype.itemsize
    layout = (tensor.data_ptr(), numpy_dtype(tensor.dtype), tensor.shape, tuple(s * item for s in tensor.strides))
    if export and storage.owned:
        return untied_view(storage, *layout, readonly=not writable)
    return core.DeviceView(
        *layout,
        device=storage.device,  # type: ignore[arg-type]  # device storage always holds a tile.core.Device
        owner=storage.buffer if storage.owned else storage.keepalive,
        buffer=storage.buffer if storage.owned else None,
        readonly=not writable,
    )


class Held:
    """Keeps a Tile buffer referenced as a view's owner without tying the view to it (see `untied_view`)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj


def untied_view(
    storage: Any, ptr: int, dtype: Any, shape: tuple[int, ...], strides: tuple[int, ...], *, readonly: bool
) -> Any:
    """A view of owned storage that is not tied to its buffer (it keeps it referenced): the frontend's exports and
    cached torch views, whose lifetime the frontend tracks itself (a buffer-tied view hands a DLPack capsule the
    buffer). tile.core bounds-checks the layout first, on a tied view that is dropped at once."""
    from tile import core

    device: Any = storage.device  # a tile.core.Device for device storage
    core.DeviceView(ptr, dtype, shape, strides, device=device, owner=storage.buffer)  # raises if outside the buffer
    return core.DeviceView(
        ptr, dtype, shape, strides, device=device, owner=Held(storage.buffer), readonly=readonly, unchecked=True
    )


def read(tensor: Tensor) -> np.ndarray[Any, Any]:
    """Copy a device tensor's elements to a new host array (blocks)."""
    from tile import core

    storage = tensor._check()
    lo, hi = tensor._byte_range()
    if hi == lo:
        return np.empty(tensor.shape, numpy_dtype(tensor.dtype))
    device: Any = storage.device  # a tile.core.Device for device storage
    # Read-only: memory a producer exported read-only (a borrowed import) refuses a writable view of it.
    span = core.DeviceView(lo, np.dtype(np.uint8), (hi - lo,), (1,), device=device, owner=storage.buffer, readonly=True)
    # Owned memory is read on its buffer's home stream, which carries no frees (borrowed: the default stream).
    raw = span.to_numpy(stream=storage.buffer.stream if storage.owned else None)
    item = tensor.dtype.itemsize
    typed = raw[: (hi - lo) // item * item].view(numpy_dtype(tensor.dtype))
    strided = np.lib.stride_tricks.as_strided(typed, tensor.shape, tuple(s * item for s in tensor.strides))
    return np.array(strided, copy=True)
