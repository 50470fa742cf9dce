"""Typed, strided windows on device memory: views of Tile buffers and borrowed foreign memory.

Invariants: a view never owns memory; it references its owner (a :class:`DeviceBuffer` or the foreign object)
so the memory outlives the view; every access through a view of a freed buffer raises
:class:`UseAfterFreeError`; the one export, ``__dlpack__``, hands out the same pointer, so consumers see the same
bytes (zero-copy), and keeps the owner alive (a buffer's free refused) until they let go. ``__cuda_array_interface__``,
an export whose consumer never says when it is done, is refused with :class:`UntrackedExportError`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tile.core import _dlpack
from tile.core._context import Device
from tile.core._errors import (
    LayoutMismatchError,
    OutOfBoundsError,
    UseAfterFreeError,
    WrongDeviceError,
    WrongTypeError,
    untracked_export_error,
)
from tile.core._final import Exact, Frozen
from tile.core._layout import as_dtype, as_index, as_indices, as_shape, is_c_contiguous, span
from tile.core._nocopy import Uncopyable

if TYPE_CHECKING:
    from tile.core._buffer import DeviceBuffer

__all__ = ["DeviceView"]

_LEGACY_STREAM, _PER_THREAD_STREAM = 1, 2  # DLPack stream numbers that mean the CUDA default streams


class DeviceView(Frozen, Uncopyable, metaclass=Exact):
    """A typed, strided view of device memory (a Tile buffer's or a foreign producer's).

    Made by ``buffer.view(...)`` and ``borrow(...)``, or directly: a view of a Tile buffer (``buffer=``, or an
    ``owner`` that is a DeviceBuffer) must lie inside that live buffer, on its device (`OutOfBoundsError`,
    `UseAfterFreeError`, `WrongDeviceError`); a view whose ``owner`` is another DeviceView (a borrowed array) must lie
    inside that view, on its device, and is read-only when it is (a view derived from a Tile buffer's view belongs to
    that buffer, as the view does). A view over any other address names raw memory no
    check can vouch for: it needs ``unchecked=True`` (the greppable opt-out, like ``@tile.entry(unchecked=True)``),
    else `WrongTypeError`. The class is final and its fields are read-only (see ``tile.core._final``).

    Attributes
    ----------
    dtype : numpy.dtype
        Element type.
    shape, strides : tuple of int
        Extents and byte strides.
    device : Device
        Where the memory lives.
    owner : object
        What keeps the memory alive (the DeviceBuffer, or the foreign object).
    readonly : bool
        True when the producer exported the memory read-only.
    """

    _copy_fix = "make another view of the same memory with buffer.view(...) or pass this one"
    _frozen = frozenset({"dtype", "shape", "strides", "device", "owner", "readonly"})

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    device: Device
    owner: object
    readonly: bool
    _ptr: int
    _buffer: DeviceBuffer | None

    def __init__(
        self,
        ptr: int,
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        *,
        device: Device,
        owner: object,
        buffer: DeviceBuffer | None = None,
        readonly: bool = False,
        unchecked: bool = False,
    ) -> None:
        address, dt, dims, steps = as_index(ptr), as_dtype(dtype), as_shape(shape), as_indices(strides)
        if address is None or steps is None or len(steps) != len(dims):
            raise LayoutMismatchError(
                f"a view needs an int address and one int byte stride per extent, got {ptr!r}, shape {dims} and "
                f"strides {strides!r}"
            )
        home = _home_buffer(owner, buffer)
        if home is not None:
            _check_inside(home, address, dt, dims, steps, device=device)
            # A view of a Tile buffer belongs to it, also when named only as its owner: its ptr dies with the buffer,
            # and its launches, copies and exports are uses of the buffer (before, owner=buffer alone kept the
            # address usable after buffer.free()).
            buffer = home
        elif type(owner) is DeviceView:
            _check_inside_view(owner, address, dt, dims, steps, device=device, readonly=bool(readonly))
            # A view derived from a Tile buffer's view is a view of that buffer: its ptr dies with the buffer, and
            # launches, copies and exports of it are uses of the buffer (that its free waits for or refuses).
            buffer = owner._buffer
        elif unchecked is not True:
            raise WrongTypeError(
                f"a DeviceView over the raw address 0x{address:x} (owner {type(owner).__name__}, no Tile buffer) "
                "names memory no check can vouch for: view Tile memory with buffer.view(dtype, shape, offset), a "
                "foreign array with tile.core.borrow(obj), or opt out explicitly with DeviceView(..., unchecked=True)"
            )
        vars(self).update(  # the first (and only) assignment of the read-only fields, without __setattr__'s check
            _ptr=address, dtype=dt, shape=dims, strides=steps, device=device, owner=owner, _buffer=buffer
        )
        vars(self)["readonly"] = bool(readonly)

    def __repr__(self) -> str:
        return f"<DeviceView {self.dtype}{list(self.shape)} on device {self.device.ordinal}>"

    @property
    def ptr(self) -> int:
        """Address of element 0; raises UseAfterFreeError when the underlying Tile buffer was freed."""
        if self._buffer is not None and self._buffer.closed:
            raise UseAfterFreeError(f"{self!r} views {self._buffer!r}, which was freed: keep the buffer alive")
        return self._ptr

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes covered by the elements (dense views: ``size * itemsize``)."""
        lo, hi = span(self.shape, self.strides, self.dtype.itemsize)
        return hi - lo if self.size else 0

    @property
    def is_contiguous(self) -> bool:
        """True for dense row-major layouts (what copies and fills require)."""
        return is_c_contiguous(self.shape, self.strides, self.dtype.itemsize)

    @property
    def buffer(self) -> DeviceBuffer | None:
        """The Tile buffer this view belongs to (None for foreign memory; a ``borrow`` of Tile memory exported through
        DLPack belongs to its buffer)."""
        return self._buffer

    def _default_stream(self) -> Any:
        return self._buffer.stream if self._buffer is not None else self.device.default_stream

    def copy_from(self, src: Any, *, stream: object = None, sync: bool = True) -> None:
        """Copy ``src`` (same dtype and element count; host, pinned or device) into this view."""
        from tile.core._copy import copy

        copy(self, src, stream=stream, sync=sync)

    def copy_to(self, dst: Any, *, stream: object = None, sync: bool = True) -> None:
        """Copy this view into ``dst`` (same dtype and element count)."""
        from tile.core._copy import copy

        copy(dst, self, stream=stream, sync=sync)

    def fill(self, value: Any, *, stream: object = None, sync: bool = True) -> None:
        """Set every element to ``value`` (converted to the view's dtype)."""
        from tile.core._copy import fill

        fill(self, value, stream=stream, sync=sync)

    def to_numpy(self, *, stream: object = None) -> np.ndarray[Any, Any]:
        """Copy the view into a new numpy array; blocks until the data is on the host."""
        out = np.empty(self.shape, self.dtype)
        self.copy_to(out, stream=stream, sync=True)
        return out

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """Not offered: a ``__cuda_array_interface__`` consumer keeps a raw pointer and never says when it is done, so
        a free of the buffer could not wait for it. Raises `UntrackedExportError` (an ``AttributeError``: ``hasattr``
        is False, and libraries take the DLPack route, which tile.core tracks)."""
        raise untracked_export_error(f"a tile.core DeviceView ({self.dtype}, shape {self.shape})")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_dlpack.KDL_CUDA, self.device.ordinal)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        """Export through DLPack; the consumer's ``stream`` is made to wait for this memory's pending work."""
        if copy:
            raise BufferError("tile.core exports device memory without copying; pass copy=None or False")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"this memory lives on {self.__dlpack_device__()}, not {dl_device}")
        from tile.core._buffer import use_lock

        with use_lock:  # a free on another thread comes before the check or after the export is registered
            ptr = self.ptr
            if self._buffer is not None and stream != -1:
                self._order_consumer(stream)
            owner = self._buffer if self._buffer is not None else self
            return _dlpack.export_capsule(
                ptr,
                self.dtype,
                self.shape,
                self.strides,
                device=self.__dlpack_device__(),
                owner=owner,
                readonly=self.readonly,
                versioned=_dlpack.wants_versioned(max_version),
            )

    def _order_consumer(self, stream: int | None) -> None:
        from tile.bindings import check
        from tile.core import _reaper

        home = self._default_stream()
        if stream is None:
            home.synchronize()
            return
        handle = {_LEGACY_STREAM: 1, _PER_THREAD_STREAM: 2}.get(stream, stream)
        if handle != home.handle and self._buffer is not None:
            self._buffer._foreign_streams.add(handle)
            event = home.record()
            d = _reaper.driver()
            check(d.cuStreamWaitEvent(d.CUstream(handle), event._raw, 0), "cuStreamWaitEvent")


def _home_buffer(owner: object, buffer: object) -> DeviceBuffer | None:
    """The Tile buffer a view claims to lie in: ``buffer``, else an ``owner`` that is one (None for foreign memory)."""
    from tile.core._buffer import DeviceBuffer

    if buffer is not None and not isinstance(buffer, DeviceBuffer):
        raise LayoutMismatchError(f"buffer= must be the DeviceBuffer the view lies in, got {type(buffer).__name__}")
    return buffer if buffer is not None else (owner if isinstance(owner, DeviceBuffer) else None)


def _check_inside(
    home: DeviceBuffer,
    address: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    *,
    device: Device,
) -> None:
    """Refuse a view of a Tile buffer that reaches outside it, lives on another device, or outlived it."""
    base = home.ptr  # UseAfterFreeError for a freed buffer
    if device is not home.device:
        raise WrongDeviceError(
            f"the view says device {getattr(device, 'ordinal', device)!r} but {home!r} lives on device "
            f"{home.device.ordinal}: pass device=buffer.device"
        )
    lo, hi = span(shape, strides, dtype.itemsize)
    if math.prod(shape) and (address + lo < base or address + hi > base + home.nbytes):
        raise OutOfBoundsError(
            f"a view {dtype}{list(shape)} with strides {strides} at 0x{address:x} covers bytes "
            f"[{address + lo - base}, {address + hi - base}) of {home!r}, which has {home.nbytes}: "
            "make views with buffer.view(dtype, shape, offset)"
        )


def _check_inside_view(
    home: DeviceView,
    address: int,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    *,
    device: Device,
    readonly: bool,
) -> None:
    """Refuse a view derived from ``home`` (a borrowed array's view) that reaches outside it, lives on another device
    or writes what the producer exported read-only."""
    base = home.ptr  # UseAfterFreeError when ``home`` views a freed Tile buffer
    if device is not home.device:
        raise WrongDeviceError(
            f"the view says device {getattr(device, 'ordinal', device)!r} but {home!r} lives on device "
            f"{home.device.ordinal}: pass device=owner.device"
        )
    if home.readonly and not readonly:
        raise LayoutMismatchError(
            f"{home!r} was exported read-only by its producer: a view of it must be readonly=True"
        )
    lo, hi = span(shape, strides, dtype.itemsize)
    low, high = span(home.shape, home.strides, home.dtype.itemsize)
    if math.prod(shape) and (address + lo < base + low or address + hi > base + high or not home.size):
        raise OutOfBoundsError(
            f"a view {dtype}{list(shape)} with strides {strides} at 0x{address:x} covers bytes "
            f"[{address + lo - base}, {address + hi - base}) of {home!r}, which spans [{low}, {high}): "
            "make views inside the array it views"
        )
