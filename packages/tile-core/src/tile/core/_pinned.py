"""Page-locked (pinned) host memory: the fast, truly asynchronous side of host<->device copies.

Invariants: the memory lives while any reference does - numpy arrays from ``.array`` included, whose base is the
buffer - and is released by the garbage collector only after every use recorded on a stream has completed, so an
asynchronous copy can never read or write freed host memory. The finalizer never blocks (``cuMemFreeHost``
synchronizes the context): the release waits in ``tile.core._reaper``'s queue for the next safe point (an allocation,
a free, a synchronize) and, there, for its recorded uses.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from tile.bindings import check
from tile.core import _reaper
from tile.core._buffer import Uses
from tile.core._context import Device
from tile.core._errors import LayoutMismatchError, factory_error
from tile.core._final import Exact, Frozen
from tile.core._layout import as_dtype, as_index, as_shape
from tile.core._nocopy import Uncopyable
from tile.core._stream import Stream

__all__ = ["PinnedBuffer"]


class PinnedBuffer(Frozen, Uncopyable, metaclass=Exact):
    """Page-locked host memory: the fast, truly asynchronous side of host<->device copies.

    Make one with :meth:`allocate` or :meth:`empty`; ``.array`` is a numpy view that keeps the memory alive. Final,
    and ``ptr`` and ``nbytes`` are read-only (see ``tile.core._final``).
    """

    _copy_fix = "for a second buffer with the same bytes, allocate one and copy into it"
    _frozen = frozenset({"ptr", "nbytes"})

    nbytes: int
    ptr: int
    _uses: Uses
    _freed: bool
    _dtype: np.dtype[Any]
    _shape: tuple[int, ...]

    def __init__(self) -> None:
        raise factory_error("PinnedBuffer", "PinnedBuffer.allocate(nbytes) or PinnedBuffer.empty(shape, dtype)")

    @classmethod
    def allocate(cls, nbytes: int, *, device: Device | None = None) -> PinnedBuffer:
        """Allocate ``nbytes`` (> 0) of pinned host memory, usable from every context."""
        size = as_index(nbytes)
        if size is None or size <= 0:
            raise LayoutMismatchError(f"cannot allocate {nbytes!r} pinned bytes: pass a positive int")
        _reaper.drain()  # a safe point: pinned memory released by the garbage collector goes back first
        d = _reaper.driver()
        (device or Device(0)).make_current()
        flags = d.CU_MEMHOSTALLOC_PORTABLE
        ptr = check(d.cuMemHostAlloc(size, flags), "cuMemHostAlloc")
        self = cls.__new__(cls)
        self.ptr, self.nbytes, self._uses, self._freed = int(ptr), size, Uses(), False
        self._dtype, self._shape = np.dtype(np.uint8), (int(nbytes),)
        return self

    @classmethod
    def empty(cls, shape: int | tuple[int, ...], dtype: Any = np.float32) -> PinnedBuffer:
        """Allocate pinned memory for an array of ``shape`` and ``dtype`` (see ``.array``)."""
        dt, dims = as_dtype(dtype), as_shape(shape)
        self = cls.allocate(max(math.prod(dims) * dt.itemsize, 1))
        self._dtype, self._shape = dt, dims
        return self

    def __repr__(self) -> str:
        return f"<PinnedBuffer {self.nbytes} bytes at 0x{self.ptr:x}>"

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self._shape,
            "typestr": self._dtype.str,
            "descr": self._dtype.descr,
            "data": (self.ptr, False),
            "version": 3,
        }

    @property
    def array(self) -> np.ndarray[Any, Any]:
        """A numpy array over the memory (its base is this buffer, so the memory outlives it)."""
        return np.asarray(self).view(self._dtype) if self._dtype.name == "bfloat16" else np.asarray(self)

    def record_use(self, stream: Stream) -> None:
        """Note that work queued on ``stream`` reads or writes this memory: release waits for it."""
        self._uses.add(stream)

    def __del__(self) -> None:
        if not getattr(self, "_freed", True):
            self._freed = True
            # Never a blocking call here (cuMemFreeHost synchronizes the context): a finalizer may run inside a host
            # function (no driver call allowed) or on a thread holding a lock the pending work needs. The release
            # waits for the next safe point (see tile.core._reaper).
            with contextlib.suppress(Exception):  # interpreter shutdown may have torn the driver module down
                _reaper.defer(_Release(self), blocks=True)


class _Release:
    """``cuMemFreeHost`` of pinned memory once every recorded use completed and nothing but this release holds the
    buffer; returns False while a use is pending or the buffer is held.

    The release holds the finalized buffer itself: a garbage cycle whose finalizer keeps the buffer (or anything that
    reaches it) brings it back after the collector ran the buffer's finalizer with the rest of the garbage, and its
    ``.array`` would then read and write freed memory. Its finalizer does not run again: the memory is released here,
    once the buffer is referenced by this release alone.
    """

    __slots__ = ("buffer",)

    def __init__(self, buffer: PinnedBuffer) -> None:
        self.buffer = buffer

    def __call__(self) -> bool:
        if _reaper.held_elsewhere(self.buffer):  # resurrected by another finalizer: still in use
            return False
        # A closed event raises here: the release is dropped unrun (a leak, never a free under pending work).
        # The buffer's uses as they are now: one brought back may have been used again since its finalizer ran.
        if not all(event.query() for event in tuple(self.buffer._uses.events)):
            return False
        _reaper.driver().cuMemFreeHost(self.buffer.ptr)
        return True
