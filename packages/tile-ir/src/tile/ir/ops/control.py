"""Structured control flow (for, loop, if) and the terminators that end their regions and the entry body.

Region conventions: ``for`` body arguments are (induction variable, carried values...) and end in
``continue``; ``loop`` body arguments are the carried values, ``continue`` starts the next iteration and
``break`` leaves with the results; ``if`` has a then and an else region ending in ``yield`` (the else region
may have no block when the op has no results).
"""

from __future__ import annotations

from tile.ir._version import V13_2
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandLayout, single, var

__all__ = ["OPS"]


def _terminator(name: str, opcode: int) -> OpDef:
    return OpDef(
        name,
        opcode,
        "control",
        counted_results=True,
        operands=(var("operands"),),
        layout=OperandLayout.TOTAL,
        terminator=True,
        infer="none",
    )


OPS: tuple[OpDef, ...] = (
    OpDef(
        "for",
        0x29,
        "control",
        variadic_results=True,
        counted_results=True,
        operands=(*single("lowerBound", "upperBound", "step"), var("initValues")),
        layout=OperandLayout.TOTAL,
        attrs=(AttrSpec("unsignedCmp", AttrKind.UNIT, since=V13_2, default=False),),
        flags=("unsignedCmp",),
        flags_since=V13_2,
        regions=1,
    ),
    OpDef(
        "loop",
        0x41,
        "control",
        variadic_results=True,
        counted_results=True,
        operands=(var("initValues"),),
        layout=OperandLayout.TOTAL,
        regions=1,
    ),
    OpDef(
        "if",
        0x32,
        "control",
        variadic_results=True,
        counted_results=True,
        operands=single("condition"),
        regions=2,
    ),
    _terminator("yield", 0x6D),
    _terminator("continue", 0x11),
    _terminator("break", 0x0A),
    _terminator("return", 0x5C),
)
