"""What the values inside a kernel are, for type checkers: ``z.store``, ``x.partition(...).load(...)``, tile maths.

A kernel's parameters are annotated the kernel language's way (``Mut[Tensor[f32, "B"]]``, ``Tensor[f16, -1]``,
``Const[int]``, ``f32``); the mypy plugin shipped here (``plugins = ["tile.frontend.mypy_plugin"]``) reads each such
annotation as one of the classes below, so ``mypy --strict`` checks a kernel body: a misspelt method, a ``store``
on an input or a ``load`` on a tile is an error before the compiler runs. Helpers (``@tile.function``) annotate
their parameters with these classes directly.

The classes describe the compiler's view and are never instantiated: the compiler reads the kernel's source, so
nothing here runs, and calling any method outside a kernel raises ``TypeError``. A helper parameter annotated with
one of them is, for the compiler, an unannotated parameter (the marker ``__tile_kernel_type__`` says so). Every
method of the kernel language's method table (``tile.compiler.lang.METHODS``) is here, which a test checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NoReturn

__all__ = ["CLASSES", "Index", "MutParam", "PartitionView", "Pointer", "Scalar", "SubtileView", "TensorParam", "Tile"]

Scalar = int | float | bool
"""A Python number, a compile-time constant inside a kernel."""


def _outside(name: str) -> NoReturn:
    raise TypeError(f"{name}() can only be used inside a @tile.entry kernel or a @tile.function helper")


class Tile:
    """A tile value: the result of a load, an op or arithmetic (a scalar parameter is a 0-d tile)."""

    __tile_kernel_type__: ClassVar[bool] = True

    shape: tuple[int, ...]
    ndim: int
    dtype: Any
    """The element type (a `tile.frontend.DType`; ``t.dtype == tile.f32`` is a compile-time bool)."""
    T: Tile
    """The transpose (``transpose()``)."""

    def __init__(self) -> None:
        _outside("Tile")

    # Arithmetic and comparisons are elementwise and broadcast; a Python number is a constant tile.
    def __add__(self, other: Tile | Scalar) -> Tile:
        _outside("+")

    def __radd__(self, other: Tile | Scalar) -> Tile:
        _outside("+")

    def __sub__(self, other: Tile | Scalar) -> Tile:
        _outside("-")

    def __rsub__(self, other: Tile | Scalar) -> Tile:
        _outside("-")

    def __mul__(self, other: Tile | Scalar) -> Tile:
        _outside("*")

    def __rmul__(self, other: Tile | Scalar) -> Tile:
        _outside("*")

    def __truediv__(self, other: Tile | Scalar) -> Tile:
        _outside("/")

    def __rtruediv__(self, other: Tile | Scalar) -> Tile:
        _outside("/")

    def __floordiv__(self, other: Tile | Scalar) -> Tile:
        _outside("//")

    def __rfloordiv__(self, other: Tile | Scalar) -> Tile:
        _outside("//")

    def __mod__(self, other: Tile | Scalar) -> Tile:
        _outside("%")

    def __rmod__(self, other: Tile | Scalar) -> Tile:
        _outside("%")

    def __pow__(self, other: Tile | Scalar) -> Tile:
        _outside("**")

    def __rpow__(self, other: Tile | Scalar) -> Tile:
        _outside("**")

    def __matmul__(self, other: Tile) -> Tile:
        _outside("@")

    def __and__(self, other: Tile | Scalar) -> Tile:
        _outside("&")

    def __rand__(self, other: Tile | Scalar) -> Tile:
        _outside("&")

    def __or__(self, other: Tile | Scalar) -> Tile:
        _outside("|")

    def __ror__(self, other: Tile | Scalar) -> Tile:
        _outside("|")

    def __xor__(self, other: Tile | Scalar) -> Tile:
        _outside("^")

    def __rxor__(self, other: Tile | Scalar) -> Tile:
        _outside("^")

    def __lshift__(self, other: Tile | Scalar) -> Tile:
        _outside("<<")

    def __rshift__(self, other: Tile | Scalar) -> Tile:
        _outside(">>")

    def __neg__(self) -> Tile:
        _outside("-")

    def __pos__(self) -> Tile:
        _outside("+")

    def __invert__(self) -> Tile:
        _outside("~")

    def __lt__(self, other: Tile | Scalar) -> Tile:
        _outside("<")

    def __le__(self, other: Tile | Scalar) -> Tile:
        _outside("<=")

    def __gt__(self, other: Tile | Scalar) -> Tile:
        _outside(">")

    def __ge__(self, other: Tile | Scalar) -> Tile:
        _outside(">=")

    def __eq__(self, other: object) -> Tile:  # type: ignore[override]  # elementwise, as numpy's
        _outside("==")

    def __ne__(self, other: object) -> Tile:  # type: ignore[override]  # elementwise, as numpy's
        _outside("!=")

    __hash__ = None  # type: ignore[assignment]  # == is elementwise, so tiles are not hashable

    def __getitem__(self, index: Any) -> Tile:
        _outside("[]")

    # The methods of tile.compiler.lang.METHODS["tile"]: the same as the tile.<name>(x, ...) functions.
    def astype(self, dtype: Any) -> Tile:
        _outside("astype")

    def reshape(self, shape: Any) -> Tile:
        _outside("reshape")

    def broadcast_to(self, shape: Any) -> Tile:
        _outside("broadcast_to")

    def expand_dims(self, axis: int) -> Tile:
        _outside("expand_dims")

    def permute(self, axes: Any) -> Tile:
        _outside("permute")

    def transpose(self, axes: Any = None) -> Tile:
        _outside("transpose")

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tile:
        _outside("sum")

    def prod(self, axis: Any = None, keepdims: bool = False) -> Tile:
        _outside("prod")

    def max(self, axis: Any = None, keepdims: bool = False, propagate_nan: bool | None = None) -> Tile:
        _outside("max")

    def min(self, axis: Any = None, keepdims: bool = False, propagate_nan: bool | None = None) -> Tile:
        _outside("min")

    def argmax(self, axis: Any = None, keepdims: bool = False) -> Tile:
        _outside("argmax")

    def argmin(self, axis: Any = None, keepdims: bool = False) -> Tile:
        _outside("argmin")

    def cumsum(self, axis: int = 0, reverse: bool = False) -> Tile:
        _outside("cumsum")

    def cumprod(self, axis: int = 0, reverse: bool = False) -> Tile:
        _outside("cumprod")

    def extract(self, index: Any, shape: Any) -> Tile:
        _outside("extract")


Index = tuple[Any, ...]
"""A tile index: one int (or int tile) per dimension, e.g. ``tile.block_id()`` or an item of ``z.tiles()``."""


class Pointer(Tile):
    """A raw device pointer (``Ptr[dtype]`` or ``x.ptr()``), only in kernels marked ``unchecked=True``."""


class PartitionView:
    """``x.partition(tile_shape)``: a read-only tensor seen as a grid of tiles."""

    __tile_kernel_type__: ClassVar[bool] = True

    num_tiles: tuple[int, ...]
    """How many tiles the partition has along each dimension."""

    tile_shape: tuple[int, ...]
    """The shape of one tile (in the view's order, for ``partition(..., order=)``)."""

    def load(self, index: Index | Any, latency: int | None = None, allow_tma: bool | None = None) -> Tile:
        """The tile at ``index`` (out-of-bounds elements read the partition's padding)."""
        _outside("load")


class SubtileView:
    """``z.subtiles(shape)``: the tile a block owns of an output, in smaller tiles of ``shape``.

    Indices are relative to the owned tile; ``num_tiles`` counts the sub-tiles of it that touch the tensor, so a loop
    over ``range(zs.num_tiles[d])`` stays inside the block's own tile.
    """

    __tile_kernel_type__: ClassVar[bool] = True

    num_tiles: tuple[int, ...]
    """How many sub-tiles of the owned tile touch the tensor, along each dimension."""

    tile_shape: tuple[int, ...]
    """The sub-tile shape."""

    def store(
        self, tile: Tile | Scalar, index: Index | Tile | int, latency: int | None = None, allow_tma: bool | None = None
    ) -> None:
        """Write the sub-tile at ``index`` (relative to the owned tile; one int or int tile for a 1-d output)."""
        _outside("store")

    def load(self, index: Index | Tile | int, latency: int | None = None, allow_tma: bool | None = None) -> Tile:
        """Read the sub-tile at ``index`` (relative to the owned tile) back."""
        _outside("load")


class TensorParam:
    """A read-only tensor parameter (``Tensor[dtype, shape]``)."""

    __tile_kernel_type__: ClassVar[bool] = True

    shape: tuple[Any, ...]
    """The tensor's extents (index tiles; constants where the annotation fixes them)."""

    extents: tuple[Any, ...]
    """The tensor's extents, as ``shape``."""

    ndim: int
    dtype: Any

    def partition(self, shape: Any, padding: str | None = None, order: tuple[int, ...] | None = None) -> PartitionView:
        """Split the tensor into tiles of ``shape``; ``padding`` names what out-of-bounds elements read.

        ``order`` (a permutation of the dims) walks the tensor's dims in that order: ``order=(1, 0)`` of a 2-d
        tensor gives tiles of its transpose, loaded without a permute.
        """
        _outside("partition")

    def subtiles(self, shape: Any, at: Index | None = None, padding: str = "zero") -> SubtileView:
        """Refused: an input owns no tile (read it anywhere with ``partition(shape).load(index)``).

        It is here because the kernel language's method table names it (to say so): the compiler refuses a call and
        the mypy plugin reports it with the same advice (the return type lets mypy go on checking the rest).
        """
        _outside("subtiles")

    def gather(self, *indices: Any, padding: Any = 0, mask: Any = None) -> Tile:
        """The elements at ``indices`` (one integer tile per dim, or one tuple of them, broadcast together).

        Element ``e`` is ``x[i0[e], i1[e], ...]``, or ``padding`` (a constant or a tile of the tensor's dtype)
        where any index is outside ``0 <= i[d] < x.extents[d]`` or the bool ``mask`` is false: a checked read,
        allowed in safe kernels.
        """
        _outside("gather")

    def ptr(self) -> Pointer:
        """The tensor's base address (unchecked kernels only)."""
        _outside("ptr")


class MutParam:
    """An output partition parameter (``Mut[Tensor[dtype, tile_shape]]``): a block reads and writes only its tiles."""

    __tile_kernel_type__: ClassVar[bool] = True

    shape: tuple[Any, ...]
    """The tile this block owns (constants)."""

    extents: tuple[Any, ...]
    """The whole output tensor's extents (index tiles)."""

    ndim: int
    dtype: Any

    def store(
        self, tile: Tile | Scalar, at: Index | None = None, latency: int | None = None, allow_tma: bool | None = None
    ) -> None:
        """Write this block's tile (or, with ``at``, one of the tiles `tiles` hands it)."""
        _outside("store")

    def load(self, at: Index | None = None, latency: int | None = None, allow_tma: bool | None = None) -> Tile:
        """Read this block's tile back (or one of the tiles `tiles` hands it)."""
        _outside("load")

    def tiles(self, group: int | None = None) -> Iterator[Index]:
        """The indices of the tiles this block owns, for kernels that walk several output tiles."""
        _outside("tiles")

    def partition(self, shape: Any, padding: str | None = None) -> PartitionView:
        """This block's tile seen as sub-tiles of ``shape``."""
        _outside("partition")

    def subtiles(self, shape: Any, at: Index | None = None, padding: str = "zero") -> SubtileView:
        """This block's tile (or, with ``at``, one of the tiles `tiles` hands it) in sub-tiles of ``shape``."""
        _outside("subtiles")

    def gather(self, *indices: Any, padding: Any = 0, mask: Any = None) -> Tile:
        """Refused: other blocks may be writing any element of an output (gather from an input tensor).

        It is here because the kernel language's method table names it (to say so): the compiler refuses a call and
        the mypy plugin reports it with the same advice (the return type lets mypy go on checking the rest).
        """
        _outside("gather")

    def ptr(self) -> Pointer:
        """The output's base address (unchecked kernels only)."""
        _outside("ptr")


CLASSES: Mapping[str, type] = MappingProxyType(
    {"tile": Tile, "tensor": TensorParam, "partition": PartitionView, "mut": MutParam, "subtiles": SubtileView}
)
"""The class for each receiver kind of the method table ``tile.compiler.lang.METHODS`` (a test keeps them equal)."""
