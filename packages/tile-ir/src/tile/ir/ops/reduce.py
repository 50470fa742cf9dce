"""Reductions, scans and matrix multiply-accumulate.

``reduce``/``scan`` take N operands and one region whose block has 2N rank-0 tile arguments (element_i,
accumulator_i) and yields N values; ``identities`` holds one Integer/Float attribute per operand.
"""

from __future__ import annotations

from tile.ir._enums import Signedness
from tile.ir._version import V13_3
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandLayout, res, single, var

__all__ = ["OPS"]

_DIM = AttrSpec("dim", AttrKind.INT)
_IDENTITIES = AttrSpec("identities", AttrKind.ARRAY)

OPS: tuple[OpDef, ...] = (
    OpDef(
        "reduce",
        0x58,
        "reduce",
        variadic_results=True,
        counted_results=True,
        operands=(var("operands"),),
        layout=OperandLayout.TOTAL,
        attrs=(_DIM, _IDENTITIES),
        regions=1,
    ),
    OpDef(
        "scan",
        0x5E,
        "reduce",
        variadic_results=True,
        counted_results=True,
        operands=(var("operands"),),
        layout=OperandLayout.TOTAL,
        attrs=(_DIM, AttrSpec("reverse", AttrKind.BOOL, default=False), _IDENTITIES),
        regions=1,
    ),
    OpDef(
        "mmaf",
        0x49,
        "reduce",
        results=res("result"),
        operands=single("lhs", "rhs", "acc"),
        attrs=(AttrSpec("fast_acc", AttrKind.UNIT, since=V13_3, default=False),),
        flags=("fast_acc",),
        flags_since=V13_3,
        infer="third",
    ),
    OpDef(
        "mmai",
        0x4A,
        "reduce",
        results=res("result"),
        operands=single("lhs", "rhs", "acc"),
        attrs=(
            AttrSpec("signedness_lhs", AttrKind.ENUM, Signedness, default=Signedness.SIGNED),
            AttrSpec("signedness_rhs", AttrKind.ENUM, Signedness, default=Signedness.SIGNED),
        ),
        infer="third",
    ),
    OpDef(
        "mmaf_scaled",
        0x72,
        "reduce",
        since=V13_3,
        results=res("result"),
        operands=single("lhs", "rhs", "acc", "lhs_scale", "rhs_scale"),
        infer="third",
    ),
)
