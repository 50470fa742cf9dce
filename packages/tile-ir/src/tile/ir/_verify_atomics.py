"""Element types of atomic and multimem ops, per mode or reduction kind, as tileiras 13.5 accepts them.

Each table row was measured with tileirdisasm 13.5 over i1, i8, i16, i32, i64, f16, bf16, f32, f64 and
f8E4M3FN (the accepted ones also compiled by tileiras for sm_100):

- `RMW_ELEMENTS`: ``atomic_rmw_tko`` and ``atomic_red_view_tko`` by mode (``xchg`` is rmw-only; the catalog
  does not allow it on the view reduction);
- ``atomic_cas_tko``: 32- and 64-bit integers and floats;
- `MULTIMEM_ELEMENTS`: the multimem view ops by reduction kind (the store has none).

The element type is the pointee of the pointers (rmw, cas) or the view's tensor element (view ops).
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._enums import AtomicRMWMode, MultimemReductionKind
from tile.ir._ir import Operation
from tile.ir._types import PartitionViewType, PointerType, ScalarType, StridedViewType, TileType, Type

__all__ = ["ATOMIC_RULES", "MULTIMEM_ELEMENTS", "RMW_ELEMENTS"]

_M, _K = AtomicRMWMode, MultimemReductionKind
_INTS = frozenset({"i32", "i64"})
_FLOATS = frozenset({"f16", "bf16", "f32", "f64"})
_WORDS = frozenset({"i32", "i64", "f32", "f64"})
RMW_ELEMENTS: dict[AtomicRMWMode, frozenset[str]] = dict.fromkeys(_M, _INTS)
RMW_ELEMENTS |= {_M.ADDF: _FLOATS, _M.XCHG: _WORDS}
_LOAD_REDUCE = dict.fromkeys(_K, _INTS) | {_K.ADD: _INTS | _FLOATS, _K.MIN: _INTS | {"f16", "bf16"}}
_LOAD_REDUCE[_K.MAX] = _LOAD_REDUCE[_K.MIN]
MULTIMEM_ELEMENTS: dict[str, dict[MultimemReductionKind, frozenset[str]]] = {
    "multimem_load_reduce_view_tko": _LOAD_REDUCE,
    "multimem_reduce_view_tko": dict.fromkeys(_K, _INTS) | {_K.ADD: _INTS | _FLOATS},
}
_MULTIMEM_STORE = _INTS | _FLOATS


def _element(t: Type) -> str:
    if isinstance(t, TileType) and isinstance(t.element, PointerType):
        return t.element.pointee.name
    if isinstance(t, (PartitionViewType, StridedViewType)):
        return t.tensor_view.element.name
    if isinstance(t, TileType) and isinstance(t.element, ScalarType):
        return t.element.name
    return ""


def _only(allowed: frozenset[str], elem: str, what: str) -> list[str]:
    if not elem or elem in allowed:
        return []
    return [f"{what} works only on {', '.join(sorted(allowed))} elements, got {elem}"]


def _rmw(op: Operation) -> list[str]:
    mode = op.attributes.get("mode")
    if not isinstance(mode, AtomicRMWMode):
        return []
    return _only(RMW_ELEMENTS[mode], _element(op.operands[0].type), f"mode {mode}")


def _cas(op: Operation) -> list[str]:
    return _only(_WORDS, _element(op.operands[0].type), "atomic_cas_tko")


def _multimem(op: Operation) -> list[str]:
    elem = _element(op.operands[0].type)
    kind = op.attributes.get("reduction")
    if op.name == "multimem_store_view_tko":
        return _only(_MULTIMEM_STORE, elem, "multimem_store_view_tko")
    if not isinstance(kind, MultimemReductionKind):
        return []
    return _only(MULTIMEM_ELEMENTS[op.name][kind], elem, f"reduction {kind} of {op.name}")


ATOMIC_RULES: dict[str, Callable[[Operation], list[str]]] = {
    "atomic_rmw_tko": _rmw,
    "atomic_red_view_tko": _rmw,
    "atomic_cas_tko": _cas,
    "multimem_load_reduce_view_tko": _multimem,
    "multimem_reduce_view_tko": _multimem,
    "multimem_store_view_tko": _multimem,
}
