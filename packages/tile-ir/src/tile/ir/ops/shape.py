"""Conversions between element types and shape manipulation (broadcast, reshape, permute, cat, extract...)."""

from __future__ import annotations

from tile.ir._enums import RoundingMode
from tile.ir._version import V13_1, V13_3, V13_4, Version
from tile.ir.ops._common import OVERFLOW, ROUNDING, SIGNEDNESS
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandLayout, res, single, var

__all__ = ["OPS"]

_SATURATING = AttrSpec("saturating", AttrKind.UNIT, since=V13_4, default=False)
_FTOI_ROUNDING = AttrSpec(
    "rounding_mode",
    AttrKind.ENUM,
    RoundingMode,
    default=RoundingMode.NEAREST_INT_TO_ZERO,
    allowed=(RoundingMode.NEAREST_INT_TO_ZERO,),
)
_ITOF_ROUNDING = AttrSpec(
    "rounding_mode",
    AttrKind.ENUM,
    RoundingMode,
    default=RoundingMode.NEAREST_EVEN,
    allowed=(RoundingMode.NEAREST_EVEN,),
)


def _unary(
    name: str,
    opcode: int,
    family: str,
    attrs: tuple[AttrSpec, ...] = (),
    *,
    since: Version = V13_1,
    infer: str = "explicit",
) -> OpDef:
    return OpDef(
        name,
        opcode,
        family,
        since=since,
        results=res("result"),
        operands=single("source"),
        attrs=attrs,
        infer=infer,
    )


OPS: tuple[OpDef, ...] = (
    _unary("ftof", 0x2A, "convert", (ROUNDING,)),
    OpDef(
        "ftoi",
        0x2B,
        "convert",
        results=res("result"),
        operands=single("source"),
        attrs=(_SATURATING, SIGNEDNESS, _FTOI_ROUNDING),
        flags=("saturating",),
        flags_since=V13_4,
    ),
    _unary("itof", 0x3B, "convert", (SIGNEDNESS, _ITOF_ROUNDING)),
    _unary("exti", 0x25, "convert", (SIGNEDNESS,)),
    _unary("trunci", 0x6B, "convert", (OVERFLOW,)),
    _unary("bitcast", 0x09, "convert"),
    _unary("int_to_ptr", 0x33, "convert"),
    _unary("ptr_to_int", 0x56, "convert"),
    _unary("ptr_to_ptr", 0x57, "convert"),
    _unary("pack", 0x6F, "convert", since=V13_3),
    _unary("unpack", 0x70, "convert", since=V13_3),
    _unary("broadcast", 0x0B, "shape"),
    _unary("reshape", 0x5B, "shape"),
    _unary("permute", 0x53, "shape", (AttrSpec("permutation", AttrKind.I32_LIST),)),
    OpDef(
        "cat",
        0x0C,
        "shape",
        results=res("result"),
        operands=single("lhs", "rhs"),
        attrs=(AttrSpec("dim", AttrKind.INT),),
    ),
    OpDef(
        "extract",
        0x26,
        "shape",
        results=res("result"),
        counted_results=True,
        operands=(*single("source"), var("indices")),
        layout=OperandLayout.TOTAL,
    ),
    OpDef(
        "insert",
        0x76,
        "shape",
        since=V13_4,
        results=res("result"),
        counted_results=True,
        operands=(*single("source", "destination"), var("indices")),
        layout=OperandLayout.TOTAL,
        infer="second",
    ),
    OpDef("iota", 0x3A, "shape", results=res("result")),
)
