"""Views (tensor, partition, strided, gather/scatter), view and pointer loads/stores, pointer arithmetic.

Every memory op is token-ordered: it may take an input token and yields a result token.
"""

from __future__ import annotations

from tile.ir._version import V13_1, V13_3, V13_4
from tile.ir.ops._common import HINTS, ORDERING, SCOPE_OPT, inbounds
from tile.ir.ops._spec import OpDef, OperandLayout, opt, res, single, var

__all__ = ["OPS"]

_VIEW_FLAGS = ("memory_scope", "optimization_hints", "token")

OPS: tuple[OpDef, ...] = (
    OpDef(
        "make_tensor_view",
        0x43,
        "memory",
        results=res("result"),
        counted_results=True,
        operands=(*single("base"), var("dynamicShape"), var("dynamicStrides")),
        layout=OperandLayout.SEGMENTED,
    ),
    OpDef("make_partition_view", 0x42, "memory", results=res("result"), operands=single("tensor_view")),
    OpDef("make_strided_view", 0x74, "memory", since=V13_3, results=res("result"), operands=single("tensor_view")),
    OpDef(
        "make_gather_scatter_view", 0x73, "memory", since=V13_3, results=res("result"), operands=single("tensor_view")
    ),
    OpDef(
        "get_tensor_shape",
        0x2F,
        "memory",
        variadic_results=True,
        counted_results=True,
        operands=single("src"),
    ),
    OpDef(
        "get_index_space_shape",
        0x2D,
        "memory",
        variadic_results=True,
        counted_results=True,
        operands=single("src"),
    ),
    OpDef(
        "load_view_tko",
        0x3E,
        "memory",
        results=res("tile", "result_token"),
        counted_results=True,
        operands=(*single("view"), var("index"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(ORDERING, SCOPE_OPT, HINTS, inbounds(V13_4)),
        flags=_VIEW_FLAGS,
        flags_since=V13_1,
        infer="view_load",
    ),
    OpDef(
        "store_view_tko",
        0x66,
        "memory",
        results=res("result_token"),
        counted_results=True,
        operands=(*single("tile", "view"), var("index"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(ORDERING, SCOPE_OPT, HINTS, inbounds(V13_4)),
        flags=_VIEW_FLAGS,
        flags_since=V13_1,
        infer="token",
    ),
    OpDef(
        "load_ptr_tko",
        0x3D,
        "memory",
        results=res("result", "result_token"),
        operands=(*single("source"), opt("mask"), opt("paddingValue"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(ORDERING, SCOPE_OPT, HINTS),
        flags=("memory_scope", "optimization_hints", "mask", "paddingValue", "token"),
        flags_since=V13_1,
        infer="ptr_load",
    ),
    OpDef(
        "store_ptr_tko",
        0x65,
        "memory",
        results=res("result_token"),
        operands=(*single("destination", "value"), opt("mask"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(ORDERING, SCOPE_OPT, HINTS),
        flags=("memory_scope", "optimization_hints", "mask", "token"),
        flags_since=V13_1,
        infer="token",
    ),
    OpDef("offset", 0x51, "memory", results=res("result"), operands=single("ptr", "offset"), infer="same"),
)
