"""Validity of a type on its own, checked wherever the verifier meets a type (signatures, results, attributes).

Tile (and view tile) dims are positive powers of two; f4E2M1FN tiles hold an even number of elements (two per
byte); element types are the `SCALARS` of `tile.ir._types`; nothing in memory is i4 (``ptr<i4>`` fails
tileirdisasm 13.5's pointee check, so i4 lives only in tiles, made by ``trunci`` or ``unpack``).
``f8E5M3FNU`` (tag 130, bytecode 13.4+) exists in tileiras 13.5 but compiles only for sm_107, so tile.ir does
not model it and says so.
"""

from __future__ import annotations

from math import prod

from tile.ir._types import (
    SCALARS,
    FunctionType,
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
    f4E2M1FN,
    i4,
)

__all__ = ["typedef_problems"]

_E5M3 = (
    "element type f8E5M3FNU (tileirdisasm spells it fnv8E5M3FNU; type tag 130, bytecode 13.4+) is not modelled by "
    "tile.ir: tileiras 13.5 compiles it only for sm_107; use f8E4M3FN or f8E5M2"
)
_UNMODELLED = {"f8E5M3FNU": _E5M3, "fnv8E5M3FNU": _E5M3}
_KNOWN = ", ".join(s.name for s in SCALARS)
_VIEWS = (PartitionViewType, StridedViewType, GatherScatterViewType)


def _parts(t: Type) -> list[tuple[tuple[int, ...] | None, ScalarType | PointerType | None]]:
    """(tile shape or None, element or pointer type or None) of `t` and of every type inside it."""
    if isinstance(t, FunctionType):
        return [p for x in t.inputs + t.results for p in _parts(x)]
    if isinstance(t, _VIEWS):
        return [(t.tile_shape, t.tensor_view.element)]
    if isinstance(t, (TileType, TensorViewType)):
        return [(t.shape if isinstance(t, TileType) else None, t.element)]
    return [(None, t)] if isinstance(t, (ScalarType, PointerType)) else []


def typedef_problems(t: Type) -> list[str]:
    """One message per invalid tile shape and per element type inside `t` that tile.ir does not know."""
    problems: list[str] = []
    for shape, elem in dict.fromkeys(_parts(t)):
        scalar = elem.pointee if isinstance(elem, PointerType) else elem
        if scalar is not None and scalar not in SCALARS:
            unknown = f"element type {scalar.name} (tag {scalar.tag}) is not a Tile IR type; use one of {_KNOWN}"
            problems.append(_UNMODELLED.get(scalar.name, unknown))
        if (isinstance(elem, PointerType) and elem.pointee == i4) or (isinstance(t, TensorViewType) and elem == i4):
            problems.append(f"i4 is a register-only type: no pointer or tensor view can address i4 elements ({t})")
        if shape and isinstance(elem, PointerType) and elem.pointee == f4E2M1FN:
            problems.append(f"tiles of ptr<f4E2M1FN> must be scalars, got {t}; reach f4 memory through a tile view")
        if shape is not None and any(d <= 0 or d & (d - 1) for d in shape):
            problems.append(f"tile dims must be positive powers of two, got {list(shape)} in {t}")
        elif shape is not None and elem == f4E2M1FN and prod(shape) % 2:
            problems.append(f"f4E2M1FN tiles hold an even number of elements (two per byte), got {list(shape)} in {t}")
    return problems
