"""Tile IR types: scalars, pointers, tiles, tokens, views and function signatures.

Invariants: types are immutable, hashable values compared structurally. Every SSA value has a `TileType`
(rank 0 for scalars), a `TokenType` or a view type; bare scalar types appear only as element types and as
the type of integer/float attributes. Dynamic extents of tensor views are `None` in the model (the bytecode
writes INT64_MIN). `str(t)` is the spelling `tileirdisasm` prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeAlias

from tile.ir._version import V13_1, V13_2, V13_3, V13_4, Version

__all__ = [
    "DYNAMIC",
    "ElementType",
    "FunctionType",
    "GatherScatterViewType",
    "Padding",
    "PartitionViewType",
    "PointerAttr",
    "PointerType",
    "ScalarType",
    "StridedViewType",
    "TensorViewType",
    "TileType",
    "TokenType",
    "Type",
    "ViewType",
    "bf16",
    "f4E2M1FN",
    "f8E4M3FN",
    "f8E5M2",
    "f8E8M0FNU",
    "f16",
    "f32",
    "f64",
    "i1",
    "i4",
    "i8",
    "i16",
    "i32",
    "i64",
    "ptr",
    "scalar",
    "tf32",
    "tile",
    "token",
]


def _text(t: Type) -> str:
    """The tileirdisasm spelling, shared with the printer (imported late: the printer imports this module)."""
    from tile.ir._asm_types import type_text

    return type_text(t)


DYNAMIC = None
"""Marker for a dynamic tensor_view extent (``?``)."""


class PointerAttr(IntEnum):
    """Address kind of a pointer or tensor_view (13.4+): multimem ops need MULTICAST."""

    NONE = 0
    UNICAST = 1
    MULTICAST = 2

    def __str__(self) -> str:
        return self.name.lower()


class Padding(IntEnum):
    """Value that a view load yields for elements outside the tensor."""

    ZERO = 0
    NEG_ZERO = 1
    NAN = 2
    POS_INF = 3
    NEG_INF = 4

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class ScalarType:
    """An element type (integer or floating point); `tag` is its type-table code, `bits` its storage width."""

    name: str
    tag: int
    bits: int
    is_float: bool
    since: Version = V13_1

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        """True for the signless integer types i1..i64."""
        return not self.is_float


i1 = ScalarType("i1", 0, 1, False)
i8 = ScalarType("i8", 1, 8, False)
i16 = ScalarType("i16", 2, 16, False)
i32 = ScalarType("i32", 3, 32, False)
i64 = ScalarType("i64", 4, 64, False)
f16 = ScalarType("f16", 5, 16, True)
bf16 = ScalarType("bf16", 6, 16, True)
f32 = ScalarType("f32", 7, 32, True)
tf32 = ScalarType("tf32", 8, 32, True)
f64 = ScalarType("f64", 9, 64, True)
f8E4M3FN = ScalarType("f8E4M3FN", 10, 8, True)  # noqa: N816 - the dialect spells these types in mixed case
f8E5M2 = ScalarType("f8E5M2", 11, 8, True)  # noqa: N816 - the dialect spells these types in mixed case
f8E8M0FNU = ScalarType("f8E8M0FNU", 18, 8, True, V13_2)  # noqa: N816 - the dialect spells these types in mixed case
f4E2M1FN = ScalarType("f4E2M1FN", 19, 4, True, V13_3)  # noqa: N816 - the dialect spells these types in mixed case
i4 = ScalarType("i4", 22, 4, False, V13_3)
SCALARS: tuple[ScalarType, ...] = (
    i1,
    i4,
    i8,
    i16,
    i32,
    i64,
    f16,
    bf16,
    f32,
    tf32,
    f64,
    f8E4M3FN,
    f8E5M2,
    f8E8M0FNU,
    f4E2M1FN,
)


@dataclass(frozen=True)
class PointerType:
    """``ptr<T>``: a global-memory pointer to elements of `pointee`; `ptr_attr` (13.4+): a `PointerAttr` code."""

    pointee: ScalarType
    ptr_attr: int | None = None

    def __str__(self) -> str:
        return _text(self)


ElementType: TypeAlias = ScalarType | PointerType


@dataclass(frozen=True)
class TileType:
    """``tile<d0 x ... x T>``: an immutable, statically shaped array; every dim a power of two; rank 0 = scalar."""

    shape: tuple[int, ...]
    element: ElementType

    def __str__(self) -> str:
        return _text(self)

    @property
    def rank(self) -> int:
        """Number of dimensions (0 for a scalar tile)."""
        return len(self.shape)

    def with_shape(self, shape: tuple[int, ...]) -> TileType:
        """Return the tile type with the same element and another shape."""
        return TileType(tuple(shape), self.element)

    def with_element(self, element: ElementType) -> TileType:
        """Return the tile type with the same shape and another element type."""
        return TileType(self.shape, element)


@dataclass(frozen=True)
class TokenType:
    """``token``: a compile-time ordering edge between memory operations."""

    def __str__(self) -> str:
        return "token"


@dataclass(frozen=True)
class TensorViewType:
    """``tensor_view``: a global tensor (base pointer, shape, strides in elements); `None` marks a dynamic extent."""

    element: ScalarType
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]
    ptr_attr: int | None = None

    def __str__(self) -> str:
        return _text(self)

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)


@dataclass(frozen=True)
class PartitionViewType:
    """``partition_view``: `tensor_view` cut into `tile_shape` tiles; `dim_map[i]` = tensor dim of tile dim i."""

    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding: Padding | None = None

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True)
class StridedViewType:
    """``strided_view`` (13.3+): a partition whose tiles advance by `traversal_strides` elements."""

    tile_shape: tuple[int, ...]
    traversal_strides: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding: Padding | None = None

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True)
class GatherScatterViewType:
    """``gather_scatter_view`` (13.3+): `sparse_dim` is indexed by a 1-D index tile, the others by scalars."""

    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    sparse_dim: int
    padding: Padding | None = None

    def __str__(self) -> str:
        return _text(self)


@dataclass(frozen=True)
class FunctionType:
    """A function signature; entry kernels have no results."""

    inputs: tuple[Type, ...]
    results: tuple[Type, ...] = ()

    def __str__(self) -> str:
        return f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.results))})"


ViewType: TypeAlias = PartitionViewType | StridedViewType | GatherScatterViewType
Type: TypeAlias = "ScalarType | PointerType | TileType | TokenType | TensorViewType | ViewType | FunctionType"

token = TokenType()


def ptr(pointee: ScalarType) -> PointerType:
    """Return ``ptr<pointee>``."""
    return PointerType(pointee)


def tile(shape: tuple[int, ...] | list[int], element: ElementType) -> TileType:
    """Return ``tile<shape x element>``."""
    return TileType(tuple(shape), element)


def scalar(element: ElementType) -> TileType:
    """Return the rank-0 tile of `element` (how scalars are typed in Tile IR)."""
    return TileType((), element)


def type_since(t: Type) -> Version:
    """Return the first bytecode version able to encode `t` (its own kind and every nested type)."""
    if isinstance(t, (ScalarType, TokenType)):
        return t.since if isinstance(t, ScalarType) else V13_1
    if isinstance(t, (PointerType, TensorViewType)):
        own = V13_4 if t.ptr_attr is not None else V13_1
        return max(own, t.pointee.since if isinstance(t, PointerType) else t.element.since)
    if isinstance(t, TileType):
        return type_since(t.element)
    if isinstance(t, FunctionType):
        return max((type_since(x) for x in t.inputs + t.results), default=V13_1)
    own = V13_1 if isinstance(t, PartitionViewType) else V13_3
    return max(own, type_since(t.tensor_view))
