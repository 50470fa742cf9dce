"""Tensor views and tile views (partition, strided, gather/scatter) as runtime values, and their addressing.

A `TileView` maps an index to the elements of one tile: tile dim i walks tensor dim ``dim_map[i]``, starting
at ``index[i] * step[i]`` (step = tile size for a partition view, the traversal stride for a strided view);
a gather/scatter view takes element offsets: a 1-D index tile for its sparse dim, a start for every other
dim. Elements beyond the tensor's extent are out of bounds: loads yield the view's padding value (or the
poison value when it has none), stores skip them. An index outside the view's index space is undefined on
the device and an error here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import GatherScatterViewType, PartitionViewType, ScalarType, StridedViewType, TensorViewType

from ._compile import Compiler, Env, Signal, Step, StepFactory, operand, operands
from ._dtypes import Array, padding_value, storage
from ._errors import MemoryAccessError

__all__ = ["HANDLERS", "TensorView", "TileView"]


@dataclass(frozen=True)
class TensorView:
    """A tensor in global memory: base address, extents and strides (in elements)."""

    base: int
    element: ScalarType
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype[Any]:
        """Storage dtype of the elements."""
        return storage(self.element)


@dataclass(frozen=True)
class TileView:
    """A tile view of a `TensorView` (see the module docstring)."""

    tensor: TensorView
    tile: tuple[int, ...]
    dim_map: tuple[int, ...]
    step: tuple[int, ...]
    padding: Any
    sparse_dim: int | None = None

    @property
    def index_space(self) -> tuple[int, ...]:
        """Number of valid indices per view dim."""
        if self.sparse_dim is not None:
            return self.tensor.shape
        return tuple(-(-self.tensor.shape[d] // s) for d, s in zip(self.dim_map, self.step, strict=False))

    def addresses(self, index: Sequence[Any]) -> tuple[Array, Array | None]:
        """Byte addresses of the tile at `index`, and its in-bounds mask (None when all are in bounds)."""
        coords = self._coords(index)
        tv = self.tensor
        offsets = np.zeros((1,) * len(self.tile), dtype=np.int64)
        mask = None
        for axis, (d, coord) in enumerate(zip(self.dim_map, coords, strict=False)):
            shaped = coord.reshape([-1 if a == axis else 1 for a in range(len(self.tile))])
            offsets = offsets + shaped * tv.strides[d]
            if int(coord.max()) >= tv.shape[d] or int(coord.min()) < 0:
                inside = (shaped >= 0) & (shaped < tv.shape[d])
                mask = inside if mask is None else mask & inside
        addresses = np.broadcast_to(tv.base + offsets * tv.dtype.itemsize, self.tile)
        return addresses, None if mask is None else np.broadcast_to(mask, self.tile)

    def _coords(self, index: Sequence[Any]) -> list[Array]:
        if self.sparse_dim is not None:
            return [
                np.asarray(i, dtype=np.int64).reshape(-1)
                if d == self.sparse_dim
                else int(np.asarray(i).astype(np.uint64)) + np.arange(n, dtype=np.int64)
                for d, (i, n) in enumerate(zip(index, self.tile, strict=False))
            ]
        space = self.index_space
        idx = tuple(int(np.asarray(i).astype(np.uint64)) for i in index)
        if any(i >= n for i, n in zip(idx, space, strict=False)):
            raise MemoryAccessError(
                f"tile index {idx} is outside the view's index space {space}; valid indices are 0 <= i < n per dim"
            )
        return [i * s + np.arange(n, dtype=np.int64) for i, s, n in zip(idx, self.step, self.tile, strict=False)]


def _dims(static: tuple[int | None, ...], dynamic: list[Any]) -> tuple[int, ...]:
    values = iter(int(np.asarray(v).astype(np.uint64)) for v in dynamic)
    return tuple(next(values) if d is None else d for d in static)


def _make_tensor_view(op: Operation, c: Compiler) -> Step:
    t = op.results[0].type
    assert isinstance(t, TensorViewType)
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
