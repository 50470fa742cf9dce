"""Self-contained attribute values (integer, float, bool, type, string, array, dense elements, dictionaries,
assume predicates and optimization hints).

Invariants: attributes are immutable and hashable; `FloatAttr` stores the exact bit pattern (so bytecode
round-trips bit for bit, NaN payloads included); `DenseElementsAttr` stores the raw little-endian buffer
whose element type and shape come from the op or global that uses it (one element = splat).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from tile.ir._errors import IRTypeError
from tile.ir._floats import float_from_bits, float_to_bits
from tile.ir._types import ScalarType, TileType, Type, i32

__all__ = [
    "ArrayAttr",
    "AssumePredicate",
    "Attr",
    "BoolAttr",
    "Bounded",
    "DenseElementsAttr",
    "DictAttr",
    "DivBy",
    "FloatAttr",
    "IntegerAttr",
    "OptimizationHints",
    "SameElements",
    "StringAttr",
    "TypeAttr",
]


@dataclass(frozen=True)
class IntegerAttr:
    """An integer of scalar type `type` (stored as the Python int given; written masked to the width)."""

    type: ScalarType
    value: int


@dataclass(frozen=True)
class FloatAttr:
    """A float of scalar type `type`, kept as its bit pattern."""

    type: ScalarType
    bits: int

    @classmethod
    def of(cls, type: ScalarType, value: float) -> FloatAttr:
        """Return the attribute holding `value` rounded to `type`."""
        if not type.is_float:
            raise IRTypeError(f"FloatAttr needs a float type, got {type}")
        return cls(type, float_to_bits(type.name, value))

    @property
    def value(self) -> float:
        """The numeric value."""
        return float_from_bits(self.type.name, self.bits)


@dataclass(frozen=True)
class BoolAttr:
    """A boolean."""

    value: bool


@dataclass(frozen=True)
class TypeAttr:
    """A type used as an attribute."""

    value: Type


@dataclass(frozen=True)
class StringAttr:
    """A UTF-8 string."""

    value: str


@dataclass(frozen=True)
class ArrayAttr:
    """An ordered list of attributes."""

    elements: tuple[Attr, ...]


@dataclass(frozen=True)
class DenseElementsAttr:
    """A constant buffer for a tile of `type` (raw little-endian bytes; a one-element buffer is a splat)."""

    type: TileType
    data: bytes

    @classmethod
    def splat(cls, type: TileType, value: float | bool) -> DenseElementsAttr:
        """Return the splat of `value` over `type` (element must be a number type)."""
        return cls(type, _element_bytes(type, value))

    @classmethod
    def from_values(cls, type: TileType, values: Iterable[float | bool]) -> DenseElementsAttr:
        """Return the constant holding `values` in row-major order (i1 is bit-packed LSB first)."""
        items = list(values)
        if isinstance(type.element, ScalarType) and type.element.bits == 1 and len(items) > 1:
            packed = bytearray((len(items) + 7) // 8)
            for i, v in enumerate(items):
                packed[i // 8] |= int(bool(v)) << (i % 8)
            return cls(type, bytes(packed))
        return cls(type, b"".join(_element_bytes(type, v) for v in items))


def _element_bytes(type: TileType, value: float | bool) -> bytes:
    elem = type.element
    if not isinstance(elem, ScalarType):
        raise IRTypeError(f"constants need a number element type, got {elem}")
    if elem.bits == 1:
        return b"\xff" if value else b"\x00"
    width = {4: 1, 19: 3}.get(elem.bits, max(elem.bits // 8, 1))
    if elem.is_float:
        bits = float_to_bits(elem.name, float(value))
        width = 3 if elem.name == "tf32" else width
        return bits.to_bytes(width, "little")
    if not isinstance(value, (int, bool)):
        raise IRTypeError(f"integer constant of {elem} needs an int, got {value!r}")
    return (int(value) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


@dataclass(frozen=True)
class DivBy:
    """Assume predicate ``div_by<divisor[, every, along]>``: elements (or every n-th along a dim) divisible."""

    divisor: int
    every: int | None = None
    along: int | None = None


@dataclass(frozen=True)
class SameElements:
    """Assume predicate ``same_elements<[...]>``: groups of that many elements per dim are equal."""

    values: tuple[int, ...]


@dataclass(frozen=True)
class Bounded:
    """Assume predicate ``bounded<lb, ub>``; `None` is an open bound."""

    lb: int | None
    ub: int | None


@dataclass(frozen=True)
class DictAttr:
    """An ordered string-keyed dictionary of attributes (keys unique, non-empty)."""

    items: tuple[tuple[str, Attr], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, Attr]) -> DictAttr:
        """Return the dictionary with the items of `mapping` in insertion order."""
        return cls(tuple(mapping.items()))

    def get(self, key: str) -> Attr | None:
        """Return the value under `key`, or None."""
        return next((v for k, v in self.items if k == key), None)


@dataclass(frozen=True)
class OptimizationHints:
    """Per-architecture hints: ``{"sm_90": {"occupancy": 2}, "default": {...}}`` in a fixed order."""

    by_arch: tuple[tuple[str, DictAttr], ...]

    @classmethod
    def of(cls, mapping: Mapping[str, Mapping[str, int | bool]]) -> OptimizationHints:
        """Build hints from plain values: ints become i32 `IntegerAttr`, bools `BoolAttr`."""
        return cls(
            tuple(
                (arch, DictAttr(tuple((k, _hint_value(v)) for k, v in hints.items())))
                for arch, hints in mapping.items()
            )
        )

    def to_dict(self) -> dict[str, dict[str, int | bool]]:
        """Return the hints as plain values (inverse of `of` for i32/bool hints)."""
        out: dict[str, dict[str, int | bool]] = {}
        for arch, hints in self.by_arch:
            out[arch] = {k: v.value for k, v in hints.items if isinstance(v, (IntegerAttr, BoolAttr))}
        return out


def _hint_value(value: int | bool) -> Attr:
    return BoolAttr(value) if isinstance(value, bool) else IntegerAttr(i32, value)


AssumePredicate: TypeAlias = DivBy | SameElements | Bounded
Attr: TypeAlias = (
    IntegerAttr
    | FloatAttr
    | BoolAttr
    | TypeAttr
    | StringAttr
    | ArrayAttr
    | DenseElementsAttr
    | DivBy
    | SameElements
    | Bounded
    | DictAttr
    | OptimizationHints
)
