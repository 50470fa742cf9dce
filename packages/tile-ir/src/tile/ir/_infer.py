"""Result-type rules the builder applies when the caller gives no result types.

Each catalog entry names its rule in ``OpDef.infer``; "explicit" means the caller must pass the types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tile.ir._attrs import DenseElementsAttr
from tile.ir._errors import IRTypeError
from tile.ir._types import (
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    StridedViewType,
    TileType,
    Type,
    i1,
    i32,
    scalar,
    token,
)

__all__ = ["infer_results"]


def _tile_of(value_type: Type, what: str) -> TileType:
    if not isinstance(value_type, TileType):
        raise IRTypeError(f"{what} must be a tile, got {value_type}")
    return value_type


def _view_load(types: Sequence[Type], attrs: Mapping[str, object]) -> list[Type]:
    view = types[0]
    if not isinstance(view, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        raise IRTypeError(f"view operand must be a partition, strided or gather/scatter view, got {view}")
    return [TileType(view.tile_shape, view.tensor_view.element), token]


def _ptr_load(types: Sequence[Type], attrs: Mapping[str, object]) -> list[Type]:
    pointers = _tile_of(types[0], "pointer operand")
    if not isinstance(pointers.element, PointerType):
        raise IRTypeError(f"pointer operand must be a tile of pointers, got {pointers}")
    return [pointers.with_element(pointers.element.pointee), token]


def _constant(types: Sequence[Type], attrs: Mapping[str, object]) -> list[Type]:
    value = attrs.get("value")
    if not isinstance(value, DenseElementsAttr):
        raise IRTypeError("constant needs a DenseElementsAttr 'value'")
    return [value.type]


def _i1(types: Sequence[Type], attrs: Mapping[str, object]) -> list[Type]:
    return [_tile_of(types[0], "comparison operand").with_element(i1)]


_Rule = Callable[[Sequence[Type], Mapping[str, object]], list[Type]]
_RULES: dict[str, _Rule] = {
    "same": lambda types, attrs: [types[0]],
    "second": lambda types, attrs: [types[1]],
    "third": lambda types, attrs: [types[2]],
    "i1": _i1,
    "token": lambda types, attrs: [token],
    "none": lambda types, attrs: [],
    "i32x3": lambda types, attrs: [scalar(i32)] * 3,
    "constant": _constant,
    "view_load": _view_load,
    "ptr_load": _ptr_load,
    "atomic": _ptr_load,
}


def infer_results(op_name: str, rule: str, operand_types: Sequence[Type], attrs: Mapping[str, object]) -> list[Type]:
    """Return the result types of `op_name` by `rule`, raising `IRTypeError` when they must be given."""
    fn = _RULES.get(rule)
    if fn is None:
        raise IRTypeError(f"'{op_name}' cannot infer its result types: pass result_type= (or result_types=)")
    if rule not in {"token", "none", "i32x3", "constant"} and not operand_types:
        raise IRTypeError(f"'{op_name}' needs operands to infer its result type")
    return fn(operand_types, attrs)
