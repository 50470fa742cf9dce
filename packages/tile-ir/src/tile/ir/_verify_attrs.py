"""Whether an op attribute's value has the shape its `AttrKind` stores (what the writer and printer can spell).

Canonical values (see `tile.ir.Operation`): UNIT and BOOL a bool; INT an int; STRING a str; TYPE a type; the two
lists tuples of ints or bools; ARRAY an `ArrayAttr` or a tuple of attributes; DENSE a `DenseElementsAttr`; HINTS
`OptimizationHints`; TAGGED any attribute. ENUM members are checked by the verifier against the spec's enum.
"""

from __future__ import annotations

from typing import get_args

from tile.ir._attrs import ArrayAttr, Attr, DenseElementsAttr, OptimizationHints
from tile.ir._types import (
    FunctionType,
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
)
from tile.ir.ops import AttrKind

__all__ = ["attr_kind_problem"]

_ATTRS = get_args(Attr)
_TYPES = (
    ScalarType, PointerType, TileType, TokenType, TensorViewType, PartitionViewType, StridedViewType,
    GatherScatterViewType, FunctionType,
)  # fmt: skip


def _is_list(value: object, item: type) -> bool:
    return isinstance(value, tuple) and all(type(v) is item for v in value)


def _is_array(value: object) -> bool:
    return isinstance(value, ArrayAttr) or (isinstance(value, tuple) and all(isinstance(a, _ATTRS) for a in value))


_CHECKS = {
    AttrKind.UNIT: lambda v: isinstance(v, bool),
    AttrKind.BOOL: lambda v: isinstance(v, bool),
    AttrKind.INT: lambda v: type(v) is int,
    AttrKind.STRING: lambda v: isinstance(v, str),
    AttrKind.TYPE: lambda v: isinstance(v, _TYPES),
    AttrKind.I32_LIST: lambda v: _is_list(v, int),
    AttrKind.BOOL_LIST: lambda v: _is_list(v, bool),
    AttrKind.ARRAY: lambda v: (
        isinstance(v, ArrayAttr) or (isinstance(v, tuple) and all(isinstance(a, _ATTRS) for a in v))
    ),
    AttrKind.DENSE: lambda v: isinstance(v, DenseElementsAttr),
    AttrKind.HINTS: lambda v: isinstance(v, OptimizationHints),
    AttrKind.TAGGED: lambda v: isinstance(v, _ATTRS),
}


def attr_kind_problem(name: str, kind: AttrKind, value: object) -> str | None:
    """What is wrong with `value` as attribute `name` of kind `kind`, or None when its shape fits."""
    check = _CHECKS.get(kind)
    if check is None or check(value):
        return None
    return f"attribute '{name}' holds {value!r}, which is not a {kind.value} attribute value"
