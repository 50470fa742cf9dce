"""Elementwise integer and floating-point arithmetic, comparisons and select.

Operands and result share one tile type (except comparisons, whose result is an i1 tile of the same shape).
"""

from __future__ import annotations

from tile.ir._enums import ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode
from tile.ir._version import V13_2
from tile.ir.ops._common import FTZ, IEEE_ROUNDING, IEEE_ROUNDINGS, OVERFLOW, SIGNEDNESS
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, res, single

__all__ = ["OPS"]

_PROPAGATE_NAN = AttrSpec("propagate_nan", AttrKind.UNIT, default=False)
_PREDICATE = AttrSpec("comparison_predicate", AttrKind.ENUM, ComparisonPredicate)
_DIVI_ROUNDING = AttrSpec(
    "rounding", AttrKind.ENUM, RoundingMode, default=RoundingMode.ZERO, allowed=IEEE_ROUNDINGS[1:]
)
_DIVF_ROUNDING = AttrSpec(
    "rounding_mode",
    AttrKind.ENUM,
    RoundingMode,
    default=RoundingMode.NEAREST_EVEN,
    allowed=(*IEEE_ROUNDINGS, RoundingMode.APPROX, RoundingMode.FULL),
)
_ORDERING = AttrSpec("comparison_ordering", AttrKind.ENUM, ComparisonOrdering, default=ComparisonOrdering.ORDERED)


def _op(
    name: str, opcode: int, operands: tuple[str, ...], attrs: tuple[AttrSpec, ...] = (), infer: str = "same"
) -> OpDef:
    units = tuple(a.name for a in attrs if a.kind is AttrKind.UNIT)
    return OpDef(
        name,
        opcode,
        "arith",
        results=res("result"),
        operands=single(*operands),
        attrs=attrs,
        flags=units,
        flags_since=min((a.since for a in attrs if a.kind is AttrKind.UNIT), default=None),
        infer=infer,
    )


_NEGI = (IntegerOverflow.NONE, IntegerOverflow.NSW, IntegerOverflow.NW)  # nuw means nothing for a negation
_FLOAT_BINARY = {"addf": 0x02, "subf": 0x67, "mulf": 0x4C}
_INT_OVERFLOW_BINARY = {"addi": 0x03, "subi": 0x68, "muli": 0x4E, "shli": 0x60}
_INT_SIGNED_BINARY = {"remi": 0x5A, "maxi": 0x46, "mini": 0x48, "shri": 0x61}
_INT_PLAIN_BINARY = {"andi": 0x04, "ori": 0x52, "xori": 0x6C}

OPS: tuple[OpDef, ...] = (
    *(_op(n, c, ("lhs", "rhs"), (IEEE_ROUNDING, FTZ)) for n, c in _FLOAT_BINARY.items()),
    _op("divf", 0x14, ("lhs", "rhs"), (_DIVF_ROUNDING, FTZ)),
    _op("fma", 0x28, ("lhs", "rhs", "acc"), (IEEE_ROUNDING, FTZ)),
    _op("maxf", 0x45, ("lhs", "rhs"), (_PROPAGATE_NAN, FTZ)),
    _op("minf", 0x47, ("lhs", "rhs"), (_PROPAGATE_NAN, FTZ)),
    _op("remf", 0x59, ("lhs", "rhs")),
    _op("negf", 0x4F, ("source",)),
    _op("absf", 0x00, ("source",)),
    *(_op(n, c, ("lhs", "rhs"), (OVERFLOW,)) for n, c in _INT_OVERFLOW_BINARY.items()),
    _op("divi", 0x15, ("lhs", "rhs"), (SIGNEDNESS, _DIVI_ROUNDING)),
    *(_op(n, c, ("lhs", "rhs"), (SIGNEDNESS,)) for n, c in _INT_SIGNED_BINARY.items()),
    *(_op(n, c, ("lhs", "rhs")) for n, c in _INT_PLAIN_BINARY.items()),
    _op("mulhii", 0x4D, ("x", "y")),
    _op("absi", 0x01, ("source",)),
    _op(
        "negi",
        0x50,
        ("source",),
        (AttrSpec("overflow", OVERFLOW.kind, OVERFLOW.enum, since=V13_2, default=OVERFLOW.default, allowed=_NEGI),),
    ),
    _op("cmpf", 0x0E, ("lhs", "rhs"), (_PREDICATE, _ORDERING), infer="i1"),
    _op("cmpi", 0x0F, ("lhs", "rhs"), (_PREDICATE, SIGNEDNESS), infer="i1"),
    _op("select", 0x5F, ("cond", "val_if_true", "val_if_false"), infer="second"),
)
