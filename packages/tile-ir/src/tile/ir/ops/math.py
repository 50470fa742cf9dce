"""Floating-point math functions (transcendentals, roots, powers, rounding to integral values)."""

from __future__ import annotations

from tile.ir._enums import RoundingMode
from tile.ir._version import V13_1, V13_2, V13_3, V13_4, Version
from tile.ir.ops._common import FTZ, IEEE_ROUNDINGS, rounding
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, res, single

__all__ = ["OPS"]

_FAST_OR_FULL = (RoundingMode.APPROX, RoundingMode.FULL)
_SQRT_ROUNDING = AttrSpec(
    "rounding_mode",
    AttrKind.ENUM,
    RoundingMode,
    default=RoundingMode.NEAREST_EVEN,
    allowed=(*IEEE_ROUNDINGS, RoundingMode.APPROX),
)
_UNARY = {
    "ceil": 0x0D,
    "floor": 0x27,
    "cos": 0x12,
    "cosh": 0x13,
    "sin": 0x62,
    "sinh": 0x63,
    "tan": 0x69,
    "log": 0x3F,
    "log2": 0x40,
}


def _op(
    name: str, opcode: int, operands: tuple[str, ...], attrs: tuple[AttrSpec, ...] = (), since: Version = V13_1
) -> OpDef:
    has_ftz = FTZ in attrs
    return OpDef(
        name,
        opcode,
        "math",
        since=since,
        results=res("result"),
        operands=single(*operands),
        attrs=attrs,
        flags=("flush_to_zero",) if has_ftz else (),
        flags_since=V13_1 if has_ftz else None,
        infer="same",
    )


OPS: tuple[OpDef, ...] = (
    *(_op(n, c, ("source",)) for n, c in _UNARY.items()),
    _op("exp", 0x17, ("source",), (rounding(RoundingMode.FULL, V13_3, _FAST_OR_FULL),)),
    _op("exp2", 0x18, ("source",), (FTZ,)),
    _op("rsqrt", 0x5D, ("source",), (FTZ,)),
    _op("sqrt", 0x64, ("source",), (_SQRT_ROUNDING, FTZ)),
    _op("tanh", 0x6A, ("source",), (rounding(RoundingMode.FULL, V13_2, _FAST_OR_FULL),)),
    _op("pow", 0x54, ("source", "exponent")),
    _op("fpowi", 0x79, ("source", "exponent"), since=V13_4),
    _op("atan2", 0x6E, ("x", "y"), since=V13_2),
)
