"""Attribute specs shared by several op families."""

from __future__ import annotations

from tile.ir._enums import (
    AtomicRMWMode,
    IntegerOverflow,
    MemoryOrdering,
    MemoryScope,
    MultimemReductionKind,
    RoundingMode,
    Signedness,
)
from tile.ir._version import Version
from tile.ir.ops._spec import AttrKind, AttrSpec

__all__ = [
    "FTZ",
    "HINTS",
    "IEEE_ROUNDING",
    "IEEE_ROUNDINGS",
    "MODE",
    "MULTIMEM",
    "ORDERING",
    "OVERFLOW",
    "ROUNDING",
    "SCOPE",
    "SCOPE_OPT",
    "SIGNEDNESS",
    "inbounds",
    "rounding",
]

FTZ = AttrSpec("flush_to_zero", AttrKind.UNIT, default=False)
_R = RoundingMode
IEEE_ROUNDINGS = (_R.NEAREST_EVEN, _R.ZERO, _R.NEGATIVE_INF, _R.POSITIVE_INF)
ROUNDING = AttrSpec("rounding_mode", AttrKind.ENUM, RoundingMode, default=_R.NEAREST_EVEN)
IEEE_ROUNDING = AttrSpec("rounding_mode", AttrKind.ENUM, RoundingMode, default=_R.NEAREST_EVEN, allowed=IEEE_ROUNDINGS)
OVERFLOW = AttrSpec("overflow", AttrKind.ENUM, IntegerOverflow, default=IntegerOverflow.NONE)
SIGNEDNESS = AttrSpec("signedness", AttrKind.ENUM, Signedness)
ORDERING = AttrSpec("memory_ordering_semantics", AttrKind.ENUM, MemoryOrdering, default=MemoryOrdering.WEAK)
SCOPE = AttrSpec("memory_scope", AttrKind.ENUM, MemoryScope)
SCOPE_OPT = AttrSpec("memory_scope", AttrKind.ENUM, MemoryScope, optional=True)
HINTS = AttrSpec("optimization_hints", AttrKind.HINTS, optional=True)
MODE = AttrSpec("mode", AttrKind.ENUM, AtomicRMWMode)
MULTIMEM = AttrSpec("reduction", AttrKind.ENUM, MultimemReductionKind)


def rounding(default: RoundingMode, since: Version, allowed: tuple[RoundingMode, ...] | None = None) -> AttrSpec:
    """A rounding_mode attribute added after its op (older versions can only express `default`)."""
    return AttrSpec("rounding_mode", AttrKind.ENUM, RoundingMode, since=since, default=default, allowed=allowed)


def inbounds(since: Version) -> AttrSpec:
    """The per-index ``inbounds`` promise of view loads/stores (an empty or all-false list before `since`)."""
    return AttrSpec("inbounds", AttrKind.BOOL_LIST, since=since, default=())
