"""The compiler's type lattice: element dtypes, tile types, view types, promotion and broadcasting.

Invariants: every type here is a frozen, hashable value; a tile shape is a tuple of positive powers of two
(rank 0 is a scalar); promotion never mixes kinds (integer/float/bool) implicitly, and only widens. The written
rules live in ``docs/compiler/typing-rules.md``; this module is their single implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

__all__ = [
    "DTYPES",
    "MAX_TILE_EXTENT",
    "DType",
    "PartitionViewType",
    "PtrType",
    "TensorViewType",
    "TileType",
    "TokenType",
    "Type",
    "broadcast_shapes",
    "dtype_named",
    "is_pow2",
    "promote",
]

Kind = Literal["b", "i", "u", "f"]


@dataclass(frozen=True)
class DType:
    """An element type: its canonical name, kind (b/i/u/f), width in bits and Tile IR spelling."""

    name: str
    kind: Kind
    bits: int
    ir: str
    numpy: str

    def __repr__(self) -> str:
        return f"tile.{self.name}"

    @property
    def is_float(self) -> bool:
        """True for floating-point dtypes."""
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """True for signed or unsigned integer dtypes (not bool)."""
        return self.kind in ("i", "u")

    @property
    def itemsize(self) -> int:
        """Bytes one element takes in memory (bool takes a byte; tf32 is stored as f32)."""
        return 4 if self.name == "tf32" else max(1, self.bits // 8)


_TABLE = (
    ("i1", "b", 1, "i1", "bool"),
    ("i8", "i", 8, "i8", "int8"),
    ("i16", "i", 16, "i16", "int16"),
    ("i32", "i", 32, "i32", "int32"),
    ("i64", "i", 64, "i64", "int64"),
    ("u8", "u", 8, "i8", "uint8"),
    ("u16", "u", 16, "i16", "uint16"),
    ("u32", "u", 32, "i32", "uint32"),
    ("u64", "u", 64, "i64", "uint64"),
    ("f16", "f", 16, "f16", "float16"),
    ("bf16", "f", 16, "bf16", "bfloat16"),
    ("f32", "f", 32, "f32", "float32"),
    ("tf32", "f", 19, "tf32", "float32"),
    ("f64", "f", 64, "f64", "float64"),
    ("f8e4m3fn", "f", 8, "f8E4M3FN", "float8_e4m3fn"),
    ("f8e5m2", "f", 8, "f8E5M2", "float8_e5m2"),
)
DTYPES: dict[str, DType] = {row[0]: DType(*row) for row in _TABLE}  # type: ignore[arg-type]  # literal kinds


def dtype_named(name: str) -> DType:
    """Return the dtype with canonical name ``name`` (``KeyError`` if none)."""
    return DTYPES[name]


@dataclass(frozen=True)
class PtrType:
    """A global-memory pointer to ``pointee`` elements (only in unchecked kernels)."""

    pointee: DType

    @property
    def name(self) -> str:
        """Canonical spelling, e.g. ``ptr<f32>``."""
        return f"ptr<{self.pointee.name}>"


@dataclass(frozen=True)
class TileType:
    """An immutable tile of ``elem`` with a static shape; rank 0 is a scalar."""

    elem: DType | PtrType
    shape: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dtype(self) -> DType:
        """The element dtype (``TypeError`` for pointer tiles)."""
        if isinstance(self.elem, PtrType):
            raise TypeError("pointer tiles have no numeric dtype")
        return self.elem

    def with_shape(self, shape: tuple[int, ...]) -> TileType:
        """The same element type with another shape."""
        return TileType(self.elem, shape)

    def with_elem(self, elem: DType | PtrType) -> TileType:
        """The same shape with another element type."""
        return TileType(elem, self.shape)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tile<{dims}{self.elem.name}>"


@dataclass(frozen=True)
class TokenType:
    """A memory-ordering token."""

    def __str__(self) -> str:
        return "token"


@dataclass(frozen=True)
class TensorViewType:
    """A global tensor: element dtype, extents and strides (``None`` = dynamic, supplied at run time)."""

    dtype: DType
    shape: tuple[int | None, ...]
    strides: tuple[int | None, ...]

    def __str__(self) -> str:
        def dim(v: int | None) -> str:
            return "?" if v is None else str(v)

        dims = "".join(f"{dim(d)}x" for d in self.shape)
        return f"tensor_view<{dims}{self.dtype.name}, strides=[{','.join(dim(s) for s in self.strides)}]>"


Padding = Literal["zero", "neg_zero", "nan", "pos_inf", "neg_inf"]
PADDINGS: tuple[str, ...] = ("zero", "neg_zero", "nan", "pos_inf", "neg_inf")


@dataclass(frozen=True)
class PartitionViewType:
    """A tensor view cut into tiles of ``tile`` elements; out-of-bounds loads read ``padding``."""

    tile: tuple[int, ...]
    view: TensorViewType
    padding: str | None = None
    dim_map: tuple[int, ...] | None = None

    def __str__(self) -> str:
        pad = f", padding_value = {self.padding}" if self.padding else ""
        dims = f", dim_map=[{', '.join(map(str, self.dim_map))}]" if self.dim_map is not None else ""
        return f"partition_view<tile=({'x'.join(map(str, self.tile))}){pad}, {self.view}{dims}>"


Type = Union[TileType, TokenType, TensorViewType, PartitionViewType]  # noqa: UP007  # runtime alias on 3.10


def is_pow2(n: int) -> bool:
    """True when ``n`` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


MAX_TILE_EXTENT = 2**30
"""The largest tile extent: Tile IR bytecode encodes each as a signed 32-bit int (and the power of two below 2**31)."""


def promote(a: DType, b: DType) -> DType | None:
    """The common dtype of two tile operands, or None when the rules forbid an implicit conversion.

    Same dtype: itself. Both float: the wider; two formats of one width go to the next standard width (f16 with
    bf16 gives f32, f8e4m3fn with f8e5m2 gives f16, tf32 with f32 gives f32). Both signed or both
    unsigned integers: the wider. Anything else (int with float, signed with unsigned, bool with numbers) needs an
    explicit ``astype``.
    """
    if a == b:
        return a
    if a.kind != b.kind or a.kind == "b":
        return None
    if a.kind == "f":
        wa, wb = (32 if t.name == "tf32" else t.bits for t in (a, b))
        if wa == wb:  # two formats of one width (f16/bf16, the f8s, tf32/f32): the next standard width holds both
            return DTYPES["f32"] if wa >= 16 else DTYPES["f16"]
        return a if wa > wb else b
    return a if a.bits > b.bits else b


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy broadcasting of two static shapes (right-aligned; a 1 or a missing dim stretches); None if they clash."""
    out: list[int] = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and 1 not in (da, db):
            return None
        out.append(max(da, db))
    return tuple(reversed(out))
