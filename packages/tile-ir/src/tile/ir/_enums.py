"""Enumerations carried by op attributes, with the integer codes the bytecode writes.

`str(member)` is the lowercase keyword `tileirdisasm` prints.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "AtomicRMWMode",
    "ComparisonOrdering",
    "ComparisonPredicate",
    "IntegerOverflow",
    "MemoryOrdering",
    "MemoryScope",
    "MultimemReductionKind",
    "RoundingMode",
    "Signedness",
    "SymbolVisibility",
]


class _Keyword(IntEnum):
    def __str__(self) -> str:
        return self.name.lower()


class Signedness(_Keyword):
    """How an integer operand is interpreted."""

    UNSIGNED = 0
    SIGNED = 1


class IntegerOverflow(_Keyword):
    """Overflow promise of integer arithmetic (wrap by default)."""

    NONE = 0
    NSW = 1
    NUW = 2
    NW = 3


class RoundingMode(_Keyword):
    """Floating-point rounding mode (``approx``/``full`` select fast or IEEE-exact implementations)."""

    NEAREST_EVEN = 0
    ZERO = 1
    NEGATIVE_INF = 2
    POSITIVE_INF = 3
    APPROX = 4
    FULL = 5
    NEAREST_INT_TO_ZERO = 6
    NEAREST_AWAY = 7


class ComparisonPredicate(_Keyword):
    """Predicate of ``cmpf``/``cmpi``."""

    EQUAL = 0
    NOT_EQUAL = 1
    LESS_THAN = 2
    LESS_THAN_OR_EQUAL = 3
    GREATER_THAN = 4
    GREATER_THAN_OR_EQUAL = 5


class ComparisonOrdering(_Keyword):
    """NaN handling of ``cmpf``."""

    UNORDERED = 0
    ORDERED = 1


class MemoryOrdering(_Keyword):
    """Memory ordering semantics of token-ordered memory ops."""

    WEAK = 0
    RELAXED = 1
    ACQUIRE = 2
    RELEASE = 3
    ACQ_REL = 4


class MemoryScope(_Keyword):
    """Scope of a non-weak memory operation."""

    TL_BLK = 0
    DEVICE = 1
    SYS = 2


class AtomicRMWMode(_Keyword):
    """Operation of ``atomic_rmw_tko`` / ``atomic_red_view_tko``."""

    AND = 0
    OR = 1
    XOR = 2
    ADD = 3
    ADDF = 4
    MAX = 5
    MIN = 6
    UMAX = 7
    UMIN = 8
    XCHG = 9


class SymbolVisibility(_Keyword):
    """Visibility of a global (13.3+)."""

    PUBLIC = 0
    PRIVATE = 1


class MultimemReductionKind(_Keyword):
    """Reduction of the 13.5 multimem view ops."""

    ADD = 0
    MIN = 1
    MAX = 2
    AND = 3
    OR = 4
    XOR = 5
    UMIN = 6
    UMAX = 7
