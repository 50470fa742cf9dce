"""Tensor views and tile views (partition, strided, gather/scatter) as runtime values, and their addressing.

A `TileView` maps an index to the elements of one tile: tile dim i walks tensor dim ``dim_map[i]``, starting
at ``index[i] * step[i]`` (step = tile size for a partition view, the traversal stride for a strided view);
a gather/scatter view takes element offsets: a 1-D index tile for its sparse dim, a start for every other
dim. Elements beyond the tensor's extent are out of bounds: loads yield the view's padding value (or the
poison value when it has none), stores skip them. An index outside the view's index space is undefined on
the device and an error here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import GatherScatterViewType, PartitionViewType, ScalarType, StridedViewType, TensorViewType

from ._compile import Compiler, Env, Signal, Step, StepFactory, operand, operands
from ._dtypes import Array, padding_value, storage
from ._errors import MemoryAccessError, UnsupportedOpError

__all__ = ["HANDLERS", "TensorView", "TileView"]


@dataclass(frozen=True)
class TensorView:
    """A tensor in global memory: base address, extents and strides (in elements)."""

    base: int
    element: ScalarType
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    dtype: np.dtype[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", storage(self.element))


@dataclass(frozen=True)
class TileView:
    """A tile view of a `TensorView` (see the module docstring)."""

    tensor: TensorView
    tile: tuple[int, ...]
    dim_map: tuple[int, ...]
    step: tuple[int, ...]
    padding: Any
    sparse_dim: int | None = None

    index_space: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Number of valid indices per view dim (element offsets for a gather/scatter view)."""

    def __post_init__(self) -> None:
        space = (
            self.tensor.shape
            if self.sparse_dim is not None
            else tuple(-(-self.tensor.shape[d] // s) for d, s in zip(self.dim_map, self.step, strict=True))
        )
        object.__setattr__(self, "index_space", space)

    def addresses(self, index: Sequence[Any]) -> tuple[Array, Array | None]:
        """Byte addresses of the tile at `index`, and its in-bounds mask (None when all are in bounds)."""
        if self.sparse_dim is not None:
            return self._gather(index)
        tv = self.tensor
        starts = [i * s for i, s in zip(self._tile_index(index), self.step, strict=True)]
        origin = (
            tv.base + sum(st * tv.strides[d] for st, d in zip(starts, self.dim_map, strict=True)) * tv.dtype.itemsize
        )
        local = _local_bytes(self.tile, tuple(tv.strides[d] for d in self.dim_map), tv.dtype.itemsize)
        addresses = local + origin
        if all(st + n <= tv.shape[d] for st, n, d in zip(starts, self.tile, self.dim_map, strict=True)):
            return addresses, None
        coords = [st + np.arange(n, dtype=np.int64) for st, n in zip(starts, self.tile, strict=True)]
        return addresses, self._inside(coords)

    def overhanging(self, index: Sequence[Any]) -> list[int]:
        """View dims along which the tile at `index` runs past the tensor's extent."""
        if self.sparse_dim is not None:
            mask = self._gather(index)[1]
            return [] if mask is None else [a for a in range(len(self.tile)) if not bool(mask.all(axis=a).all())]
        starts = [i * s for i, s in zip(self._tile_index(index), self.step, strict=True)]
        zipped = zip(starts, self.tile, self.dim_map, strict=True)
        return [a for a, (st, n, d) in enumerate(zipped) if st + n > self.tensor.shape[d]]

    def _inside(self, coords: list[Array]) -> Array:
        """Mask of the tile elements whose coordinates lie inside the tensor."""
        rank = len(self.tile)
        mask = np.ones((1,) * rank, dtype=bool)
        for axis, (d, coord) in enumerate(zip(self.dim_map, coords, strict=True)):
            shaped = coord.reshape([-1 if a == axis else 1 for a in range(rank)])
            mask = mask & (shaped >= 0) & (shaped < self.tensor.shape[d])
        return np.broadcast_to(mask, self.tile)

    def _gather(self, index: Sequence[Any]) -> tuple[Array, Array | None]:
        tv = self.tensor
        coords = [
            np.asarray(i, dtype=np.int64).reshape(-1)
            if d == self.sparse_dim
            else _unsigned(i) + np.arange(n, dtype=np.int64)
            for d, (i, n) in enumerate(zip(index, self.tile, strict=True))
        ]
        rank = len(self.tile)
        offsets = sum(
            (
                c.reshape([-1 if a == axis else 1 for a in range(rank)]) * tv.strides[axis]
                for axis, c in enumerate(coords)
            ),
            np.zeros((1,) * rank, dtype=np.int64),
        )
        addresses = np.broadcast_to(tv.base + offsets * tv.dtype.itemsize, self.tile)
        mask = self._inside(coords)
        return addresses, None if bool(mask.all()) else mask

    def _tile_index(self, index: Sequence[Any]) -> tuple[int, ...]:
        idx = tuple(_unsigned(i) for i in index)
        space = self.index_space
        if any(i >= n for i, n in zip(idx, space, strict=True)):
            raise MemoryAccessError(
                f"tile index {idx} is outside the view's index space {space}; valid indices are 0 <= i < n per dim"
            )
        return idx


def _unsigned(value: Any) -> int:
    """An index operand read as an unsigned integer of its width (as every view op reads its indices)."""
    v = int(value)
    return v if v >= 0 else v + (1 << (8 * np.asarray(value).dtype.itemsize))


@functools.lru_cache(maxsize=512)
def _local_bytes(tile: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> Array:
    """Byte offsets of a tile's elements from its first element (read-only, shared between blocks)."""
    rank = len(tile)
    local = np.zeros((1,) * rank, dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(tile, strides, strict=True)):
        local = local + np.arange(n, dtype=np.int64).reshape([-1 if a == axis else 1 for a in range(rank)]) * stride
    out = np.ascontiguousarray(np.broadcast_to(local * itemsize, tile))
    out.flags.writeable = False
    return out


def _dims(static: tuple[int | None, ...], dynamic: list[Any]) -> tuple[int, ...]:
    values = iter(_unsigned(v) for v in dynamic)
    return tuple(next(values) if d is None else d for d in static)


def _make_tensor_view(op: Operation, c: Compiler) -> Step:
    t = op.results[0].type
    assert isinstance(t, TensorViewType)
    if t.element.bits < 8 and t.element.name != "i1":
        raise UnsupportedOpError(
            f"tensor views of {t.element} (two elements packed per byte) are not supported by the interpreter",
            None,
            c.location(op),
        )
    base = c.slot(operand(op, "base"))  # type: ignore[arg-type]  # required operand
    shape_slots, stride_slots = c.slots(operands(op, "dynamicShape")), c.slots(operands(op, "dynamicStrides"))
    out = c.slot(op.results[0])

    def step(env: Env) -> Signal | None:
        shape = _dims(t.shape, [env[s] for s in shape_slots])
        strides = _dims(t.strides, [env[s] for s in stride_slots])
        env[out] = TensorView(int(env[base]), t.element, shape, strides)
        return None

    return step


def _make_tile_view(op: Operation, c: Compiler) -> Step:
    t = op.results[0].type
    src, out = c.slot(op.operands[0]), c.slot(op.results[0])
    if isinstance(t, PartitionViewType):
        tile, dim_map, step_, sparse = t.tile_shape, t.dim_map, t.tile_shape, None
    elif isinstance(t, StridedViewType):
        tile, dim_map, step_, sparse = t.tile_shape, t.dim_map, t.traversal_strides, None
    elif isinstance(t, GatherScatterViewType):
        tile, dim_map, sparse = t.tile_shape, tuple(range(len(t.tile_shape))), t.sparse_dim
        step_ = tuple(1 for _ in tile)
    else:
        raise TypeError(f"'{op.name}' produces {t}, not a tile view")
    pad = padding_value(t.padding, t.tensor_view.element)
    dim_map = dim_map or tuple(range(len(tile)))

    def step(env: Env) -> Signal | None:
        env[out] = TileView(env[src], tile, dim_map, step_, pad, sparse)
        return None

    return step


def _shape_query(op: Operation, c: Compiler, of_index_space: bool) -> Step:
    src = c.slot(op.operands[0])
    outs = c.slots(op.results)
    dtypes = [storage(r.type.element) for r in op.results]  # type: ignore[union-attr]  # results are int tiles

    def step(env: Env) -> Signal | None:
        view = env[src]
        dims = view.index_space if of_index_space else view.shape
        for slot, dtype, dim in zip(outs, dtypes, dims, strict=False):
            env[slot] = np.asarray(dim).astype(dtype)
        return None

    return step


HANDLERS: dict[str, StepFactory] = {
    "make_tensor_view": _make_tensor_view,
    "make_partition_view": _make_tile_view,
    "make_strided_view": _make_tile_view,
    "make_gather_scatter_view": _make_tile_view,
    "get_tensor_shape": lambda op, c: _shape_query(op, c, False),
    "get_index_space_shape": lambda op, c: _shape_query(op, c, True),
}
