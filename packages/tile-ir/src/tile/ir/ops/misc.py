"""Kernel structure and utilities: constants, globals, block ids, tokens, assume, assert, print, alloca, PDL."""

from __future__ import annotations

from tile.ir._version import V13_2, V13_3, V13_4
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandLayout, ResultSpec, opt, res, single, var

__all__ = ["OPS"]

_TOKEN_OPT = (opt("token"),)

OPS: tuple[OpDef, ...] = (
    OpDef(
        "constant", 0x10, "misc", results=res("result"), attrs=(AttrSpec("value", AttrKind.DENSE),), infer="constant"
    ),
    OpDef("get_global", 0x2C, "misc", results=res("result"), attrs=(AttrSpec("name", AttrKind.STRING),)),
    OpDef("get_tile_block_id", 0x30, "misc", results=res("blockId_x", "blockId_y", "blockId_z"), infer="i32x3"),
    OpDef("get_num_tile_blocks", 0x2E, "misc", results=res("gridSize_x", "gridSize_y", "gridSize_z"), infer="i32x3"),
    OpDef("make_token", 0x44, "misc", results=res("result"), infer="token"),
    OpDef(
        "join_tokens",
        0x3C,
        "misc",
        results=res("result"),
        counted_results=True,
        operands=(var("tokens"),),
        layout=OperandLayout.TOTAL,
        infer="token",
    ),
    OpDef(
        "assume",
        0x06,
        "misc",
        results=res("result"),
        operands=single("value"),
        attrs=(AttrSpec("predicate", AttrKind.TAGGED),),
        infer="same",
    ),
    OpDef(
        "assert",
        0x05,
        "misc",
        operands=single("condition"),
        attrs=(AttrSpec("message", AttrKind.STRING),),
        infer="none",
    ),
    OpDef(
        "print_tko",
        0x55,
        "misc",
        results=(ResultSpec("result_token", V13_2),),
        counted_results=True,
        operands=(var("args"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(AttrSpec("str", AttrKind.STRING),),
        flags=("token",),
        flags_since=V13_2,
        infer="token",
    ),
    OpDef(
        "alloca",
        0x71,
        "misc",
        since=V13_3,
        results=res("result"),
        attrs=(
            AttrSpec("global", AttrKind.UNIT, default=False),
            AttrSpec("num_elem", AttrKind.INT),
            AttrSpec("alignment", AttrKind.INT),
        ),
        flags=("global",),
        flags_since=V13_3,
    ),
    OpDef(
        "gdc_launch_dependents_tko",
        0x77,
        "misc",
        since=V13_4,
        results=res("result_token"),
        operands=_TOKEN_OPT,
        layout=OperandLayout.TOTAL,
        infer="token",
    ),
    OpDef(
        "gdc_wait_tko",
        0x78,
        "misc",
        since=V13_4,
        results=res("result_token"),
        operands=_TOKEN_OPT,
        layout=OperandLayout.TOTAL,
        infer="token",
    ),
    OpDef(
        "memory_fence_alias_tko",
        0x7A,
        "misc",
        since=V13_4,
        results=res("result_token"),
        operands=single("token"),
        infer="token",
    ),
)
