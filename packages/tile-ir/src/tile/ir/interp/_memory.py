"""Global memory of an interpreted launch: host numpy buffers mapped at virtual byte addresses.

Invariants: each mapped *root* buffer (the ndarray that owns the memory of the arrays handed in) gets one
`Region` with a distinct base address; bases are 64 KiB aligned and separated by at least 64 KiB of unmapped
space, so a small overrun faults instead of landing in a neighbour. A pointer value is a plain int64 virtual
address; ``base + k * itemsize`` is element k of a region's typed view. Accesses must be aligned to the element
size. Reads and writes go straight to the host buffers, so results are visible in the caller's arrays.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._dtypes import Array
from ._errors import MemoryAccessError

__all__ = ["Access", "Memory", "Region"]

_ALIGN = 1 << 16
_FIRST_BASE = 1 << 32

Access = Callable[["Region", Array, int], None]
"""Callback told of every region chunk an access touches: ``(region, byte addresses, element size)``."""


@dataclass(eq=False)
class Region:
    """One mapped host buffer.

    Attributes
    ----------
    index
        Position in the memory's region table (stable for the memory's lifetime).
    base
        Virtual address of the buffer's first byte.
    raw
        The whole buffer as a flat uint8 array (a view: writes reach the caller's array).
    name
        How errors name the buffer.
    array
        The array the caller mapped, used to turn addresses back into its indices.
    writable
        False for read-only host arrays: a store into them faults.
    """

    index: int
    base: int
    raw: Array
    name: str
    array: Array
    writable: bool
    _typed: dict[tuple[np.dtype[Any], int], Array] = field(default_factory=dict)

    @property
    def end(self) -> int:
        """One past the last mapped address."""
        return self.base + int(self.raw.size)

    def typed(self, dtype: np.dtype[Any]) -> Array:
        """Return the buffer as a flat array of `dtype` (element k at byte ``k * itemsize``)."""
        key = (dtype, 0)
        view = self._typed.get(key)
        if view is None:
            usable = self.raw.size - self.raw.size % dtype.itemsize
            view = self.raw[:usable].view(dtype)
            self._typed[key] = view
        return view

    def describe(self, address: int, itemsize: int | None = None) -> str:
        """Name the element at `address`: ``x[2, 5]`` when it lies in the mapped array, else an offset.

        `itemsize` is the size of the accessed element; when it differs from the mapped array's (a byte buffer
        holding f32 data, say), the element is named by its flat index in units of the access.
        """
        offset = address - self.array_address
        size = self.array.itemsize
        if itemsize is not None and itemsize != size:
            if 0 <= offset < self.array.nbytes and offset % itemsize == 0:
                return f"{self.name} element {offset // itemsize} (byte {offset})"
        elif self.array.ndim and offset >= 0 and offset % size == 0:
            index = _unravel(offset, self.array.strides, self.array.shape)
            if index is not None:
                return f"{self.name}[{', '.join(map(str, index))}]"
        return f"{self.name} (byte {address - self.base} of its buffer)"

    @property
    def array_address(self) -> int:
        """Virtual address of the mapped array's first element."""
        return self.base + _data_address(self.array) - _data_address(self.raw)


def _data_address(a: Array) -> int:
    return int(a.__array_interface__["data"][0])


def _unravel(offset: int, strides: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Find the index whose byte offset under `strides` is `offset` (strides may be in any order)."""
    order = sorted(range(len(shape)), key=lambda d: -abs(strides[d]))
    index = [0] * len(shape)
    rest = offset
    for d in order:
        if strides[d] == 0:
            continue
        index[d], rest = divmod(rest, strides[d])
        if not 0 <= index[d] < shape[d]:
            return None
    return tuple(index) if rest == 0 else None


def _root(array: Array) -> Array:
    """Return the contiguous ndarray owning `array`'s memory (the array itself when it owns it)."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.flags.c_contiguous or root.flags.f_contiguous:
        return root
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return array
    raise TypeError(
        "cannot map a non-contiguous array whose base is not contiguous either; pass np.ascontiguousarray(x)"
    )


class Memory:
    """The address space of interpreted kernels: numpy buffers mapped at virtual addresses.

    Map each host array once (`map`) and pass the returned address, or pass the array itself to `launch`,
    which maps it. Arrays that share a buffer (views of one base) share one region, so pointer arithmetic
    between them works as on a device.
    """

    def __init__(self) -> None:
        self._regions: list[Region] = []
        self._bases: list[int] = []
        self._by_root: dict[int, Region] = {}
        self._next = _FIRST_BASE

    @property
    def regions(self) -> tuple[Region, ...]:
        """Every mapped region, in mapping order."""
        return tuple(self._regions)

    def map(self, array: Array, name: str | None = None) -> int:
        """Map `array`'s buffer (once) and return the virtual address of its first element.

        Parameters
        ----------
        array
            A numpy array; views of a contiguous base are fine (their base buffer is mapped).
        name
            How errors name it (default ``buffer<N>``).
        """
        if not isinstance(array, np.ndarray):
            raise TypeError(f"only numpy arrays can be mapped, got {type(array).__name__}")
        root = _root(array)
        region = self._by_root.get(id(root))
        if region is None:
            raw = root.reshape(-1, order="F" if not root.flags.c_contiguous else "C").view(np.uint8)
            base = self._next
            region = Region(
                len(self._regions), base, raw, name or f"buffer{len(self._regions)}", array, bool(array.flags.writeable)
            )
            self._regions.append(region)
            self._bases.append(base)
            self._by_root[id(root)] = region
            self._next = base + ((raw.size + 2 * _ALIGN - 1) // _ALIGN + 1) * _ALIGN
        elif name is not None:
            region.name, region.array = name, array
        return region.base + _data_address(array) - _data_address(region.raw)

    def has(self, array: Array) -> bool:
        """True when `array`'s buffer is already mapped."""
        return id(_root(array)) in self._by_root

    def region_at(self, address: int) -> Region | None:
        """Return the region containing `address`, or None."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and address < self._regions[i].end:
            return self._regions[i]
        return None

    def read(self, addresses: Array, dtype: np.dtype[Any], on_access: Access | None = None) -> Array:
        """Load elements of `dtype` at `addresses` (any shape); the result has the same shape.

        Booleans (i1) occupy a byte each; any non-zero byte reads as true.
        """
        if dtype == np.bool_:
            return np.asarray(self.read(addresses, np.dtype(np.uint8), on_access) != 0)
        flat = addresses.reshape(-1)
        out = np.empty(flat.shape, dtype=dtype)
        for region, sel, index in self._chunks(flat, dtype, "read from"):
            values = region.typed(dtype)[index]
            if sel is None:
                out = values
            else:
                out[sel] = values
            if on_access is not None:
                on_access(region, flat if sel is None else flat[sel], dtype.itemsize)
        return out.reshape(addresses.shape)

    def write(self, addresses: Array, values: Array, on_access: Access | None = None) -> None:
        """Store `values` at `addresses` (same shape). Within one store, a later element wins a duplicate."""
        flat = addresses.reshape(-1)
        vals = np.asarray(values).reshape(-1)
        for region, sel, index in self._chunks(flat, vals.dtype, "write to"):
            if not region.writable:
                raise MemoryAccessError(f"store into read-only array {region.name}; pass a writeable array for outputs")
            region.typed(vals.dtype)[index] = vals if sel is None else vals[sel]
            if on_access is not None:
                on_access(region, flat if sel is None else flat[sel], vals.dtype.itemsize)

    def _chunks(self, flat: Array, dtype: np.dtype[Any], what: str) -> list[tuple[Region, Array | None, Array]]:
        """Split addresses by region: ``(region, selection or None for all, element indices)``."""
        if flat.size == 0:
            return []
        lo, hi = int(flat.min()), int(flat.max())
        region = self.region_at(lo)
        size = dtype.itemsize
        if region is not None and hi + size <= region.end:
            return [(region, None, self._indices(region, flat, size, what))]
        bases = np.asarray(self._bases, dtype=np.int64)
        which = np.searchsorted(bases, flat, side="right") - 1
        chunks: list[tuple[Region, Array | None, Array]] = []
        for i in np.unique(which):
            sel = np.nonzero(which == i)[0]
            picked = flat[sel]
            region = self._regions[int(i)] if i >= 0 else None
            if region is None or int(picked.max()) + size > region.end:
                bad = picked if region is None else picked[picked + size > region.end]
                raise MemoryAccessError(f"{what} address {int(bad[0]):#x}, outside every mapped buffer")
            chunks.append((region, sel, self._indices(region, picked, size, what)))
        return chunks

    @staticmethod
    def _indices(region: Region, addresses: Array, size: int, what: str) -> Array:
        offsets = addresses - region.base
        if size > 1 and bool((offsets % size).any()):
            bad = int(addresses[(offsets % size) != 0][0])
            raise MemoryAccessError(
                f"misaligned {size}-byte {what.split(maxsplit=1)[0]} at address {bad:#x} in {region.name}"
            )
        return offsets // size if size > 1 else offsets
