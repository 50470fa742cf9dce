"""`Partition`: a tensor split into disjoint tiles, the only thing a kernel's ``Mut`` output accepts.

Invariants:
- Making a partition moves the tensor and requires an injective layout (no two elements share memory: a broadcast
  or stride-0 view would let two blocks write one element, `AliasError`) and exclusive memory: no other live handle,
  view, export or foreign borrow may overlap it (`BorrowError` lists each one with the line that made it); read-only
  foreign memory can never be partitioned.
- Tile extents are powers of two (Tile IR tiles are); the grid is ``ceil(extent / tile)`` per axis, so shapes need
  not divide: blocks of edge tiles load padding and their stores are masked.
- A partition is a move-only handle like a tensor: `unpartition` moves the tensor back out. Moving a partition (into
  a launch) moves the wrapper only: the new partition takes over the same tensor, which a moved partition never
  reaches again (each of its uses checks its own state first).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from tile.compiler._types import MAX_TILE_EXTENT
from tile.frontend._errors import (
    AliasError,
    ArgumentError,
    BorrowError,
    Exact,
    FinalClassError,
    InFlight,
    final_class_error,
    frozen,
    refuse_subclass,
)
from tile.frontend._handle import Wrapper
from tile.frontend._site import user_site
from tile.frontend._storage import OWNED, overlapping, owning
from tile.frontend._tensor import Tensor

__all__ = ["Partition", "injective", "make_partition", "require_exclusive"]

MAX_RANK = 3


class Partition(Wrapper, metaclass=Exact):
    """A tensor split into tiles of ``tile_shape``, for a kernel's ``Mut`` argument (attributes are read-only)."""

    __slots__ = ("_tile_shape",)
    _tile_shape: tuple[int, ...]

    @classmethod
    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error the `Exact` metaclass raises for defining ``qualname``, a subclass of this class."""
        return final_class_error(cls, qualname)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise refuse_subclass(cls)  # launches trust this class's methods: see FinalClassError

    def __init__(self) -> None:
        raise TypeError("make partitions with tensor.partition(tile_shape)")

    _copy_fix = "a partition is the one writer of its memory; copy.deepcopy makes a new partition of copied values"

    def __deepcopy__(self, memo: dict[int, Any]) -> Partition:
        """A partition of a new tensor holding a copy of the elements, in the same tiles."""
        return self._check().copy().partition(self.tile_shape)

    @classmethod
    def _make(cls, tensor: Tensor, tile_shape: tuple[int, ...]) -> Partition:
        self = object.__new__(cls)
        self._tensor, self._tile_shape, self._fate = tensor, tile_shape, None
        return self

    def _describe(self) -> str:
        return f"Partition({self.dtype.name}, {list(self.shape)} in tiles of {list(self.tile_shape)})"

    @owning
    def _move(self, kind: str, where: str, admit: bool = False) -> Partition:
        self._check(admit)
        return self._hand_over((kind, where))

    def _hand_over(self, fate: tuple[str, str]) -> Partition:
        """`_move` for a partition whose state was just checked: the new partition wraps the same tensor, which
        stays registered (live, now in flight); every use of the moved partition stops at its own ``_fate``."""
        new = object.__new__(Partition)  # Partition._make, inlined: this runs per output per launch
        new._tensor, new._tile_shape, new._fate = self._tensor, self._tile_shape, None
        self._fate = fate
        return new

    @property
    def tile_shape(self) -> tuple[int, ...]:
        """The tile each block owns (read-only)."""
        return self._tile_shape

    @tile_shape.setter
    def tile_shape(self, value: object) -> None:
        raise frozen(self, "tile_shape", "repartition instead: z.unpartition().partition(new_tile_shape)")

    @property
    def grid(self) -> tuple[int, ...]:
        """Tiles per axis: ``ceil(extent / tile)``."""
        return tuple(-(-n // t) for n, t in zip(self.shape, self.tile_shape, strict=False))

    @property
    def num_tiles(self) -> int:
        """Number of tiles (blocks of the launch grid)."""
        return math.prod(self.grid)

    @property
    def moved(self) -> bool:
        """True once moved into a launch or unpartitioned."""
        return self._fate is not None or self._tensor.moved

    @owning
    def unpartition(self) -> Tensor:
        """Return the whole tensor (moves this partition).

        Inside a ``.then()``/``.map()`` function (or a graph capture) the partition is in flight: its launch may still
        be writing it. It can still be unpartitioned there, so that the launch the function returns reads what the
        previous one wrote (``k1(z, x).then(lambda z, x: k2(y, z.unpartition()))``): the tensor is in flight too, so
        only a launch can take it, ordered after the writer. The memory stays held against new borrows while the
        writer may run: the held tensor is this partition's, which the writer's launch keeps until it is done.
        """
        from tile.frontend._site import user_site

        where = f"unpartitioned at {user_site()}"
        fate = self._fate
        if type(fate) is InFlight and fate.takeable():
            held = self._tensor
            held._check()
            tensor = held._hand_over(("unpartition", where))
            tensor._fate = fate  # in flight like the partition: only a launch the function returns may take it
            self._fate = ("unpartition", where)
            return tensor
        held = self._check()
        held._storage.unhold(held)
        tensor = held._move("unpartition", where)
        self._fate = ("unpartition", where)
        return tensor

    def __repr__(self) -> str:
        return f"Partition({self.dtype!r}, {list(self.shape)}, tiles {list(self.tile_shape)}, grid {list(self.grid)})"


def make_partition(tensor: Tensor, tile_shape: Sequence[int], site: str) -> Partition:
    """Validate and make a partition of ``tensor`` (see `Tensor.partition`)."""
    tensor._check()
    tile = _tile_shape(tensor, tile_shape)
    if not injective(tensor.shape, tensor.strides):
        raise AliasError(
            f"cannot partition {tensor._describe()} (at {site}): its layout (shape {list(tensor.shape)}, strides "
            f"{list(tensor.strides)}) maps different elements to the same memory, as broadcast, stride-0 and "
            "sliding-window views do, so two blocks would write one element. Partition a .copy() (or "
            "tile.from_numpy(np.ascontiguousarray(...))) instead"
        )
    require_exclusive(tensor, lambda: f"partition {tensor._describe()} (at {site})", "partition")  # text on error
    self = Partition._make(tensor._move("partition", f"moved into .partition() at {site}"), tile)
    self._tensor._storage.hold(self._tensor, f"{self._describe()} made at {site}")
    return self


class partitioned:  # noqa: N801  # used as a function: `with tile.partitioned(out, shape) as p:`
    """``tensor.partition(tile_shape)`` for a kernel call that may be refused: ``with partitioned(out, [64]) as p:
    op = kernel(p, x)``. If the block raises while no launch took the partition (a refused call), the partition is
    given back to ``tensor``, which is live again, so the caller's handle stays usable after a bad argument. Once a
    launch took it, the partition's memory is the launch's and ``tensor`` stays moved, as after ``tensor.partition``.

    For libraries that partition their caller's output tensor (``out=``) before checking the rest of a call.
    """

    def __init__(self, tensor: Tensor, tile_shape: Sequence[int]) -> None:
        if type(tensor) is not Tensor:
            raise ArgumentError(f"tile.partitioned takes a Tensor to partition, got {type(tensor).__name__}")
        self._source, self._shape = tensor, tile_shape
        self._made: Partition | None = None

    def __enter__(self) -> Partition:
        self._made = self._source.partition(self._shape)  # its checks and move as one step (OWNED), as always
        return self._made

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        made, self._made = self._made, None
        if error is not None and made is not None:
            _give_back(made, self._source, user_site())


def _give_back(made: Partition, source: Tensor, site: str) -> None:
    """Undo ``source.partition(...)`` that made ``made``, when no launch took ``made`` (its fate is still None): the
    one live handle on that memory is ``source`` again (registered, not held) and ``made`` is moved."""
    with OWNED:
        held = made._tensor
        if made._fate is not None or held._fate is not None or type(source._fate) is InFlight:
            return  # taken by a launch (or unpartitioned by the block): the caller's handle stays moved
        if source._storage is not held._storage or source._range != held._range or source._layout != held._layout:
            return
        storage = held._storage
        storage.unhold(held)
        storage._handles.pop(id(held), None)
        storage._handles[id(source)] = weakref.ref(source)
        held._fate = ("unpartition", f"given back to the tensor it was made from at {site}")
        made._fate = ("unpartition", f"given back to the tensor it was made from at {site}")
        source._fate = None


def require_exclusive(tensor: Tensor, what: str | Callable[[], str], verb: str, admit: bool = False) -> None:
    """Raise `BorrowError` unless ``tensor``'s memory is writable and no other live handle overlaps it (``what`` says
    what was asked, e.g. "partition Tensor(...) (at f.py:3)", or makes that text, called only for an error; ``verb``
    how to retry it; ``admit``: the tensor may be in flight, taken by an op that runs after its producer)."""
    storage = tensor._check(admit)
    if storage.readonly:
        raise BorrowError(
            f"cannot {_text(what)}: it borrows read-only foreign memory, which cannot be written; "
            f"copy it with tile.from_numpy(...) or .copy() and {verb} the copy"
        )
    lo, hi = tensor._byte_range()
    others = overlapping(storage, lo, hi, exclude=(tensor,))
    if others:
        listed = "; ".join(h._describe() for h in others[:4]) + ("; ..." if len(others) > 4 else "")
        count = len(others)
        del others  # the traceback keeps this frame: it must not keep the conflicting handles alive
        raise BorrowError(
            f"cannot {_text(what)}: that needs exclusive memory, but {count} other live handle(s) overlap it: "
            f"{listed}. Drop them first (`del view`), or {verb} a .copy()"
        )
    storage.settle()  # what a former consumer of an export queued on the memory runs before Tile may write it


def _text(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def injective(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the layout gives every element its own memory: sorted by stride, each axis steps past everything
    the smaller axes reach (sufficient, and what every dense, sliced or permuted layout satisfies)."""
    reach = 0  # the largest element offset the axes seen so far reach
    for stride, n in sorted((s, n) for n, s in zip(shape, strides, strict=True) if n > 1):
        if stride <= reach:
            return False
        reach += (n - 1) * stride
    return True


def _tile_shape(tensor: Tensor, tile_shape: Sequence[int]) -> tuple[int, ...]:
    tile = tuple(tile_shape) if isinstance(tile_shape, (tuple, list)) else (tile_shape,)
    if not 1 <= tensor.ndim <= MAX_RANK:
        raise ArgumentError(
            f"only tensors of rank 1 to {MAX_RANK} can be partitioned; {tensor!r} has rank {tensor.ndim}"
        )
    if len(tile) != tensor.ndim:
        raise ArgumentError(f"tile shape {list(tile)} has rank {len(tile)} but {tensor!r} has rank {tensor.ndim}")
    for t in tile:
        if type(t) is not int or t <= 0 or t & (t - 1):
            hint = ""
            if all(type(u) is int and u > 0 for u in tile):
                up = [1 << (u - 1).bit_length() for u in tile]
                hint = f": use {up}, a tile may run past the tensor's end (loads pad, stores there are masked)"
            raise ArgumentError(f"tile extents must be powers of two (Tile IR tiles are); got {list(tile)}{hint}")
        if t > MAX_TILE_EXTENT:
            raise ArgumentError(f"tile extents must be at most 2**30 (what Tile IR can encode); got {list(tile)}")
    if any(n == 0 for n in tensor.shape):
        raise ArgumentError(f"cannot partition the empty tensor {tensor!r}")
    return tile
