"""Checked copies and fills between host memory, pinned memory and device memory.

Invariants: both sides are classified and every check (sizes, dtypes, bounds, contiguity, writability, device of
the stream) passes before the driver is called; a copy is ordered on one stream (given, else the device side's
home stream) and device buffers involved record that use, so their frees wait for it; ``sync=True`` returns
after the copy completed. Pageable host memory is staged by the driver, so the host side may be reused as soon
as the call returns; pinned memory is truly asynchronous and records its use too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tile.bindings import check
from tile.core import _keepalive, _reaper
from tile.core._buffer import DeviceBuffer, use_lock
from tile.core._errors import LayoutMismatchError, StreamClosedError, WrongDeviceError, WrongTypeError
from tile.core._layout import as_dtype, check_span
from tile.core._pinned import PinnedBuffer
from tile.core._stream import Stream, as_stream
from tile.core._view import DeviceView

__all__ = ["HostRegion", "copy", "copy_bytes", "fill", "host_region"]


@dataclass(frozen=True)
class HostRegion:
    """A contiguous host byte range: address, size, element type (None for raw bytes) and what keeps it alive."""

    ptr: int
    nbytes: int
    dtype: np.dtype[Any] | None
    keepalive: object
    pinned: PinnedBuffer | None = None


def host_region(obj: Any, *, writable: bool) -> HostRegion:
    """Describe a host array, bytes-like object or PinnedBuffer as a contiguous region."""
    pinned = obj if isinstance(obj, PinnedBuffer) else _pinned_base(obj)
    array = obj.array if isinstance(obj, PinnedBuffer) else obj
    if isinstance(array, np.ndarray) and type(array) is not np.ndarray:
        # A subclass may override nbytes, ctypes, flags or dtype: the copy would trust its size and address (a
        # device-to-host copy writing past the array). Its plain ndarray view reports the memory as it is.
        array = np.asarray(array).view(np.ndarray)
    if not isinstance(array, np.ndarray):
        try:
            array = np.frombuffer(memoryview(array), np.uint8)
        except TypeError:
            raise WrongTypeError(
                f"cannot copy from/to {type(obj).__name__}: use a numpy array, bytes-like object, PinnedBuffer, "
                "DeviceBuffer or DeviceView"
            ) from None
        dtype = None
    else:
        dtype = array.dtype
        if dtype.hasobject:
            raise LayoutMismatchError(
                f"the host array holds Python objects ({dtype}): their bytes are pointers a copy would read or "
                "overwrite; use a numeric dtype"
            )
    if not array.flags.c_contiguous:
        raise LayoutMismatchError("the host array is not C-contiguous: pass np.ascontiguousarray(array)")
    if writable and not array.flags.writeable:
        raise LayoutMismatchError("the host destination is read-only: pass a writable array (np.empty(...))")
    return HostRegion(int(array.ctypes.data), int(array.nbytes), dtype, array, pinned)


def _pinned_base(obj: object) -> PinnedBuffer | None:
    """The PinnedBuffer a numpy array views (``pinned.array``, a view or slice of it), so that an asynchronous copy
    records its use there and the release waits for it; None for other host memory."""
    base = obj.base if isinstance(obj, np.ndarray) else None
    while isinstance(base, np.ndarray):
        base = base.base
    return base if isinstance(base, PinnedBuffer) else None


@dataclass(frozen=True)
class _DeviceSide:
    ptr: int
    nbytes: int
    dtype: np.dtype[Any] | None
    view: DeviceView | None
    buffer: DeviceBuffer | None


def _device_side(obj: DeviceBuffer | DeviceView, *, writable: bool) -> _DeviceSide:
    if isinstance(obj, DeviceBuffer):
        return _DeviceSide(obj.ptr, obj.nbytes, None, None, obj)
    if not obj.is_contiguous:
        raise LayoutMismatchError(f"{obj!r} is strided: copies need contiguous views")
    if writable and obj.readonly:
        raise LayoutMismatchError(f"{obj!r} was exported read-only by its producer: it cannot be written")
    return _DeviceSide(obj.ptr, obj.nbytes, obj.dtype, obj, obj.buffer)


def _check_match(dst: Any, src: Any) -> None:
    if dst.nbytes != src.nbytes:
        raise LayoutMismatchError(f"copy size mismatch: destination has {dst.nbytes} bytes, source {src.nbytes}")
    if dst.dtype is not None and src.dtype is not None and dst.dtype != src.dtype:
        raise LayoutMismatchError(f"copy dtype mismatch: destination is {dst.dtype}, source {src.dtype}")


def _check_disjoint(dst_device: object, dst: int, src_device: object, src: int, nbytes: int) -> None:
    """Refuse a copy between partly overlapping ranges of one device: the copy engine may read bytes it already wrote
    (``cuMemcpy`` leaves overlap undefined). A range copied onto itself is allowed: every byte keeps its value."""
    if dst_device is src_device and dst != src and dst < src + nbytes and src < dst + nbytes:
        raise LayoutMismatchError(
            f"the copy's source and destination overlap ({abs(dst - src)} bytes apart, {nbytes} bytes each): the "
            "result would be undefined; copy through a temporary buffer"
        )


def _stream_for(stream: object, side: DeviceBuffer | DeviceView, other: object = None) -> Stream:
    device = side.device
    if stream is None:
        if not isinstance(side, DeviceBuffer):
            return as_stream(side._default_stream(), device)
        if side.stream.closed:  # never enqueue on a destroyed stream handle (it may name another stream by now)
            raise StreamClosedError(
                f"the home stream {side.stream!r} of {side!r} was closed: pass stream= an open stream of device "
                f"{device.ordinal} for its copies"
            )
        return side.stream
    chosen = stream if isinstance(stream, Stream) else Stream.borrow(stream)
    allowed = {device} | ({other.device} if isinstance(other, (DeviceBuffer, DeviceView)) else set())
    if chosen.device not in allowed:
        raise WrongDeviceError(
            f"{chosen!r} is on device {chosen.device.ordinal}, but the copy involves device(s) "
            f"{sorted(d.ordinal for d in allowed)}: use a stream of one of them"
        )
    chosen._check_open()
    for item in (side, other):
        owner = item if isinstance(item, DeviceBuffer) else getattr(item, "buffer", None)
        if isinstance(owner, DeviceBuffer):
            owner._before_use(chosen)
    return chosen


def _record(stream: Stream, sync: bool, *users: object, held: tuple[object, ...] = ()) -> Stream:
    """Record the copy just enqueued on ``stream`` for the buffers it touches (the caller holds ``use_lock``).

    Device buffers record it even for a copy that will be waited for: a free on another thread may come before the
    wait returns. Pinned memory cannot be freed under a caller that holds it, so only an asynchronous copy records it.
    An asynchronous copy also holds ``held`` (the host array and borrowed views it reads or writes: memory whose
    owner frees it with its last reference, or hands it to its next allocation) until it completes (see
    ``tile.core._keepalive``); a copy that will be waited for is held by its caller until then.
    """
    for user in users:
        if isinstance(user, DeviceBuffer) or (isinstance(user, PinnedBuffer) and not sync):
            user.record_use(stream)
    kept = [item for item in held if item is not None] if not sync else []
    if kept and not stream.is_capturing():
        _keepalive.prune(stream)
        _keepalive.hold(stream, stream._record_mark(), kept)
    return stream


def _unpinned(host: HostRegion) -> object:
    """The host array to hold while a copy from/to it runs; None for a PinnedBuffer's (its release waits for the
    copy's recorded use)."""
    return host.keepalive if host.pinned is None else None


def _untied(side: _DeviceSide) -> DeviceView | None:
    """The side's view when no Tile buffer owns its memory (a borrowed foreign view), else None."""
    return side.view if side.buffer is None else None


def _finish(stream: Stream | None, sync: bool) -> None:
    """Wait for the copy after ``use_lock`` was let go (never held across a wait for other work)."""
    if sync and stream is not None:
        stream.synchronize()


def copy(dst: Any, src: Any, *, stream: object = None, sync: bool = True) -> None:
    """Copy all of ``src`` into all of ``dst``; sizes (and dtypes, where both sides have one) must match, and two
    device ranges of one device must not partly overlap (`LayoutMismatchError`: the result would be undefined).

    Parameters
    ----------
    dst, src : DeviceBuffer, DeviceView, PinnedBuffer, numpy array or bytes-like
        At least one side must be device memory.
    stream : Stream or stream-like, optional
        Where the copy is ordered (default: the device side's own stream).
    sync : bool
        Wait for the copy to complete before returning.
    """
    with use_lock:  # from the liveness checks until the copy is enqueued and recorded: see use_lock
        s = _enqueue_copy(dst, src, stream, sync)
    _finish(s, sync)


def _enqueue_copy(dst: Any, src: Any, stream: object, sync: bool) -> Stream:
    dst_dev, src_dev = isinstance(dst, (DeviceBuffer, DeviceView)), isinstance(src, (DeviceBuffer, DeviceView))
    if not (dst_dev or src_dev):
        raise WrongTypeError(
            f"copy() moves data to or from device memory, but got {type(dst).__name__} and {type(src).__name__}: "
            "pass a DeviceBuffer or DeviceView on one side; for host-to-host use numpy.copyto"
        )
    if dst_dev and src_dev:
        out, inp = _device_side(dst, writable=True), _device_side(src, writable=False)
        _check_match(out, inp)
        _check_disjoint(dst.device, out.ptr, src.device, inp.ptr, out.nbytes)
        s = _stream_for(stream, dst, src)
        _order_other_side(s, src)
        _device_to_device(dst.device, out.ptr, src.device, inp.ptr, out.nbytes, stream=s)
        return _record(s, sync, out.buffer, inp.buffer, held=(_untied(out), _untied(inp)))
    if dst_dev:
        out, host = _device_side(dst, writable=True), host_region(src, writable=False)
        _check_match(out, host)
        s = _stream_for(stream, dst)
        check(_reaper.driver().cuMemcpyHtoDAsync(out.ptr, host.ptr, out.nbytes, s._raw), "cuMemcpyHtoDAsync")
        return _record(s, sync, out.buffer, host.pinned, held=(_untied(out), _unpinned(host)))
    inp, host = _device_side(src, writable=False), host_region(dst, writable=True)
    _check_match(host, inp)
    s = _stream_for(stream, src)
    check(_reaper.driver().cuMemcpyDtoHAsync(host.ptr, inp.ptr, inp.nbytes, s._raw), "cuMemcpyDtoHAsync")
    return _record(s, sync, inp.buffer, host.pinned, held=(_untied(inp), _unpinned(host)))


def _device_to_device(dst_dev: Any, dst: int, src_dev: Any, src: int, nbytes: int, *, stream: Stream) -> None:
    """Copy ``nbytes`` device to device on ``stream``; between two GPUs a peer copy (``cuMemcpyPeerAsync``), direct
    over NVLink/PCIe where peer access can be enabled (both ways, once per pair), else staged by the driver."""
    d = _reaper.driver()
    if dst_dev is src_dev:
        check(d.cuMemcpyAsync(dst, src, nbytes, stream._raw), "cuMemcpyAsync")
        return
    dst_dev.enable_peer_access(src_dev)
    src_dev.enable_peer_access(dst_dev)
    check(d.cuMemcpyPeerAsync(dst, dst_dev.context, src, src_dev.context, nbytes, stream._raw), "cuMemcpyPeerAsync")


def _order_other_side(stream: Stream, other: DeviceBuffer | DeviceView) -> None:
    """A device-to-device copy on ``stream`` must also come after the other buffer's pending work."""
    home = other.stream if isinstance(other, DeviceBuffer) else (other.buffer.stream if other.buffer else None)
    if home is not None and home is not stream:
        stream.wait(home)


def copy_bytes(buffer: DeviceBuffer, offset: int, other: Any, *, stream: object, sync: bool, into_buffer: bool) -> None:
    """Copy between ``buffer[offset : offset + size(other)]`` and all of ``other`` (bounds checked first)."""
    with use_lock:  # from the liveness checks until the copy is enqueued and recorded: see use_lock
        s = _enqueue_bytes(buffer, offset, other, stream=stream, sync=sync, into_buffer=into_buffer)
    _finish(s, sync)


def _enqueue_bytes(
    buffer: DeviceBuffer, offset: int, other: Any, *, stream: object, sync: bool, into_buffer: bool
) -> Stream:
    verb = "copy into" if into_buffer else "copy out of"
    base = buffer.ptr  # a freed buffer fails here, before anything else
    if isinstance(other, (DeviceBuffer, DeviceView)):
        side = _device_side(other, writable=not into_buffer)
        offset = check_span(offset, side.nbytes, buffer.nbytes, what=f"{verb} {buffer!r}")
        here = base + offset
        dst, src = (here, side.ptr) if into_buffer else (side.ptr, here)
        _check_disjoint(buffer.device, here, other.device, side.ptr, side.nbytes)
        s = _stream_for(stream, buffer, other)
        _order_other_side(s, other)
        if side.nbytes:
            there = other.device
            a, b = (buffer.device, there) if into_buffer else (there, buffer.device)
            _device_to_device(a, dst, b, src, side.nbytes, stream=s)
        return _record(s, sync, buffer, side.buffer, held=(_untied(side),))
    host = host_region(other, writable=not into_buffer)
    offset = check_span(offset, host.nbytes, buffer.nbytes, what=f"{verb} {buffer!r}")
    s = _stream_for(stream, buffer)
    d = _reaper.driver()
    if host.nbytes and into_buffer:
        check(d.cuMemcpyHtoDAsync(base + offset, host.ptr, host.nbytes, s._raw), "cuMemcpyHtoDAsync")
    elif host.nbytes:
        check(d.cuMemcpyDtoHAsync(host.ptr, base + offset, host.nbytes, s._raw), "cuMemcpyDtoHAsync")
    return _record(s, sync, buffer, host.pinned, held=(_unpinned(host),))


# Which scalar kinds may fill which element kinds: integers anywhere (range-checked), floats only into floats.
_FILL_SOURCES = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}
_MEMSETS = {1: ("cuMemsetD8Async", np.uint8), 2: ("cuMemsetD16Async", np.uint16), 4: ("cuMemsetD32Async", np.uint32)}


def fill(view: DeviceView, value: Any, *, stream: object = None, sync: bool = True) -> None:
    """Set every element of a contiguous view to ``value`` converted to its dtype."""
    with use_lock:  # from the liveness checks until the fill is enqueued and recorded: see use_lock
        s = _enqueue_fill(view, value, stream, sync)
    _finish(s, sync)


def _enqueue_fill(view: DeviceView, value: Any, stream: object, sync: bool) -> Stream | None:
    side = _device_side(view, writable=True)
    dtype = as_dtype(view.dtype)
    given = np.asarray(value)
    target = "f" if dtype.kind == "V" else dtype.kind  # bfloat16 is a void-kind dtype to numpy
    if given.dtype.kind not in _FILL_SOURCES.get(target, "") or given.ndim:
        raise LayoutMismatchError(f"cannot fill a {dtype} view with {value!r}: pass a scalar of a compatible kind")
    if target in "iu" and not np.iinfo(dtype).min <= int(given) <= np.iinfo(dtype).max:
        raise LayoutMismatchError(f"{value!r} does not fit {dtype}: pick a value in its range")
    pattern = given.astype(dtype)
    s = _stream_for(stream, view)
    if not view.size:
        return None
    entry = _MEMSETS.get(dtype.itemsize)
    if entry is None:  # pageable host memory: the driver has staged it when the call returns
        return _enqueue_copy(view, np.full(view.shape, pattern, dtype), s, sync)
    name, bits = entry
    word = int(pattern.reshape(1).view(bits)[0])
    check(getattr(_reaper.driver(), name)(side.ptr, word, view.size, s._raw), name)
    return _record(s, sync, side.buffer, held=(_untied(side),))
