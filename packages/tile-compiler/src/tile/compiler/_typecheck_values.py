"""Abstract values the type checker computes for kernel expressions, and the op emitter.

A kernel expression evaluates, at compile time, to one of: a Python constant (``int``/``float``/``bool``/``str``/
``None``, folded exactly), a tuple of values, a runtime `Value` (a typed tile or token in the kernel IR), a
`TensorV`/`PartitionV` (a parameter's view), or a compile-time object (a dtype, a `LangOp`, a helper, a module,
a `BoundMethod`). Invariant: runtime values only ever come from ops that `Emitter.emit` appended to the current
block, so dominance holds by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tile.compiler._diagnostics import SourceLoc
from tile.compiler._kir import Block, Op, Value
from tile.compiler._types import DType, PartitionViewType, TensorViewType, TileType, Type

__all__ = ["BoundMethod", "Emitter", "PartitionV", "SubtilesV", "TensorV", "TileIndex", "TileIter"]


@dataclass(eq=False)
class TensorV:
    """A tensor parameter inside the kernel: its view value and what is known about it."""

    name: str
    dtype: DType
    view: Value
    view_type: TensorViewType
    extents: tuple[Value | int, ...]
    mut: bool
    tile: tuple[int, ...] = ()
    base: Value | None = None
    mode: str = ""  # how stores address tiles: "own" (z.store(t)) or "tiles" (z.store(t, at=idx)); one per kernel
    walk: tuple[int | None] | None = None  # the group= of its z.tiles() walks, once walked: one order per kernel
    strides: tuple[Value | int, ...] = ()  # per dim, in elements: 1 where the spec says unit stride (x.gather)

    @property
    def rank(self) -> int:
        """Number of dimensions of the tensor."""
        return len(self.extents)


@dataclass(eq=False)
class PartitionV:
    """``tensor.partition(shape)``: a partition view of a tensor parameter."""

    tensor: TensorV
    view: Value
    view_type: PartitionViewType

    @property
    def tile(self) -> tuple[int, ...]:
        """The tile shape (in the view's dim order: the shape of the tiles it loads)."""
        return self.view_type.tile

    @property
    def order(self) -> tuple[int, ...]:
        """``order[i]``: the tensor dim that tile dim ``i`` walks (the identity unless ``partition(..., order=)``)."""
        dim_map = self.view_type.dim_map
        return dim_map if dim_map is not None else tuple(range(len(self.tile)))

    def tensor_dim(self, d: int) -> tuple[tuple[int, ...], int]:
        """View dim ``d`` as (tile shape in tensor order, tensor dim): how bounds facts and host guards name it.

        A view's index space along dim ``d`` is the unpermuted partition's along tensor dim ``order[d]``, so facts
        about one hold for the other (a loop over ``range(p.num_tiles[d])`` proves indices of both).
        """
        order = self.order
        shape = [0] * len(order)
        for i, dim in enumerate(order):
            shape[dim] = self.tile[i]
        return tuple(shape), order[d]


@dataclass(eq=False)
class SubtilesV:
    """``z.subtiles(shape)``: one output tile this block owns, cut into sub-tiles of ``shape``.

    ``view`` partitions the whole output by ``shape``; sub-tile ``j`` of the owned tile at ``own`` is the view's
    tile ``own * ratio + j``. ``counts[d]`` is how many sub-tiles of the owned tile touch the tensor along ``d``
    (at least 1, at most ``ratio[d]``): the range every index is proven, checked or clamped into.
    """

    tensor: TensorV
    view: PartitionV
    ratio: tuple[int, ...]
    base: tuple[Value, ...]  # own tile coordinate * ratio, per dim
    counts: tuple[Value, ...]

    @property
    def tile(self) -> tuple[int, ...]:
        """The sub-tile shape."""
        return self.view.tile


@dataclass(eq=False)
class TileIter:
    """``out.tiles(group=...)``: the tiles of an output this block owns, for a ``for`` loop."""

    tensor: TensorV
    group: int | None = None


@dataclass(eq=False)
class TileIndex:
    """A tile coordinate minted by ``for idx in out.tiles()``: the only index ``out.store(t, at=idx)`` accepts."""

    tensor: TensorV
    coords: tuple[Value, ...]


@dataclass(frozen=True)
class BoundMethod:
    """``receiver.name`` before the call: a method of a tile, tensor, partition or output."""

    receiver: Any
    name: str
    family: str


@dataclass(eq=False)
class Emitter:
    """Appends typed ops to the current block and numbers values."""

    next_id: int = 0
    block: Block = field(default_factory=Block)
    loc: SourceLoc | None = None
    inlined_from: tuple[SourceLoc, ...] = ()
    depth: int = 0  # loop nesting of the block being filled
    birth: dict[int, int] = field(default_factory=dict)  # value id -> loop depth where it was defined
    hoist: list[Block] = field(default_factory=list)  # hoist[d]: the block at depth d that will hold loop d+1

    def value(self, ty: Type) -> Value:
        """A fresh value of type ``ty`` (for block arguments)."""
        self.next_id += 1
        self.birth[self.next_id] = self.depth
        return Value(self.next_id, ty)

    def emit(
        self,
        name: str,
        operands: list[Value | list[Value] | None],
        result_types: list[Type],
        attrs: dict[str, Any] | None = None,
        regions: list[Block] | None = None,
    ) -> list[Value]:
        """Append op ``name`` to the current block and return its results."""
        results = [self.value(t) for t in result_types]
        self.block.ops.append(Op(name, operands, results, attrs or {}, regions or [], self.loc, self.inlined_from))
        return results

    def one(self, name: str, operands: list[Value | list[Value] | None], ty: Type, **attrs: Any) -> Value:
        """Emit a single-result op."""
        return self.emit(name, operands, [ty], attrs)[0]

    def constant(self, value: int | float | bool, ty: TileType) -> Value:
        """A splat constant of type ``ty``."""
        return self.one("constant", [], ty, value=value)
