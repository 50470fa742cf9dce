"""Turn the Python values a builder caller passes for attributes into the canonical stored form.

Canonical forms (what `Operation.attributes` holds): ENUM -> the IntEnum member; INT -> int; BOOL/UNIT ->
bool; STRING -> str; TYPE -> a Type; I32_LIST -> tuple[int, ...]; BOOL_LIST -> tuple[bool, ...]; DENSE ->
DenseElementsAttr; ARRAY -> ArrayAttr; HINTS -> OptimizationHints; TAGGED -> an attribute value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Any

from tile.ir._attrs import ArrayAttr, DenseElementsAttr, OptimizationHints
from tile.ir._errors import IRTypeError
from tile.ir.ops import AttrKind, AttrSpec

__all__ = ["normalize_attr"]


def _enum(spec: AttrSpec, value: object) -> IntEnum:
    assert spec.enum is not None
    if isinstance(value, spec.enum):
        return value
    if isinstance(value, str):
        try:
            member: IntEnum = spec.enum[value.upper()]
            return member
        except KeyError:
            pass
    names = ", ".join(str(m) for m in spec.enum)
    raise IRTypeError(f"attribute '{spec.name}' must be one of {names}; got {value!r}")


def _check(ok: bool, spec: AttrSpec, want: str, value: object) -> None:
    if not ok:
        raise IRTypeError(f"attribute '{spec.name}' must be {want}; got {value!r}")


def _list(spec: AttrSpec, value: Any, item: type) -> tuple[Any, ...]:
    ok = isinstance(value, Sequence) and all(
        isinstance(v, item) and not (item is int and isinstance(v, bool)) for v in value
    )
    _check(ok, spec, f"a list of {item.__name__}s", value)
    return tuple(value)


def _hints(spec: AttrSpec, value: Any) -> OptimizationHints:
    if isinstance(value, Mapping):
        return OptimizationHints.of(value)
    _check(isinstance(value, OptimizationHints), spec, "OptimizationHints or a dict of dicts", value)
    return value  # type: ignore[no-any-return]  # narrowed by _check


def _scalar(spec: AttrSpec, value: Any, kind: type, want: str) -> Any:
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    _check(ok and (kind is not int or value >= 0), spec, want, value)
    return value


_NORMALIZERS: dict[AttrKind, Callable[[AttrSpec, Any], object]] = {
    AttrKind.ENUM: _enum,
    AttrKind.UNIT: lambda s, v: _scalar(s, v, bool, "a bool"),
    AttrKind.BOOL: lambda s, v: _scalar(s, v, bool, "a bool"),
    AttrKind.INT: lambda s, v: _scalar(s, v, int, "an int >= 0"),
    AttrKind.STRING: lambda s, v: _scalar(s, v, str, "a str"),
    AttrKind.I32_LIST: lambda s, v: _list(s, v, int),
    AttrKind.BOOL_LIST: lambda s, v: _list(s, v, bool),
    AttrKind.DENSE: lambda s, v: _scalar(s, v, DenseElementsAttr, "a DenseElementsAttr"),
    AttrKind.ARRAY: lambda s, v: v if isinstance(v, ArrayAttr) else ArrayAttr(tuple(v)),
    AttrKind.HINTS: _hints,
}


def normalize_attr(spec: AttrSpec, value: Any) -> object:
    """Return `value` in the canonical form for `spec`, raising `IRTypeError` for a wrong kind."""
    fn = _NORMALIZERS.get(spec.kind)
    return value if fn is None else fn(spec, value)
