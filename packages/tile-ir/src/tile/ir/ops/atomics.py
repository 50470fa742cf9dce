"""Atomic read-modify-write, compare-and-swap, view reductions and the 13.5 multimem (NVLink SHARP) view ops."""

from __future__ import annotations

from tile.ir._enums import AtomicRMWMode, MemoryOrdering, MemoryScope
from tile.ir._version import V13_1, V13_3, V13_5
from tile.ir.ops._common import MODE, MULTIMEM, ORDERING, SCOPE, SCOPE_OPT, inbounds
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandLayout, opt, res, single, var

__all__ = ["OPS"]

_ACQ_REL = AttrSpec("memory_ordering_semantics", AttrKind.ENUM, MemoryOrdering, default=MemoryOrdering.ACQ_REL)
_RELAXED = AttrSpec("memory_ordering_semantics", AttrKind.ENUM, MemoryOrdering, default=MemoryOrdering.RELAXED)
_ONLY_RELAXED = AttrSpec(
    "memory_ordering_semantics",
    AttrKind.ENUM,
    MemoryOrdering,
    default=MemoryOrdering.RELAXED,
    allowed=(MemoryOrdering.RELAXED,),
)
_BLOCK_OR_DEVICE = AttrSpec(
    "memory_scope", AttrKind.ENUM, MemoryScope, allowed=(MemoryScope.TL_BLK, MemoryScope.DEVICE)
)
# "atomic_red_view_tko op cannot use xchg operation" (a reduction needs a combining mode)
_NO_XCHG = AttrSpec(
    "mode", AttrKind.ENUM, AtomicRMWMode, allowed=tuple(m for m in AtomicRMWMode if m is not AtomicRMWMode.XCHG)
)
_LOAD_REDUCE_ORDERING = AttrSpec(
    "memory_ordering_semantics",
    AttrKind.ENUM,
    MemoryOrdering,
    default=MemoryOrdering.RELAXED,
    allowed=(MemoryOrdering.RELAXED, MemoryOrdering.ACQUIRE),
)
_REDUCE_ORDERING = AttrSpec(
    "memory_ordering_semantics",
    AttrKind.ENUM,
    MemoryOrdering,
    default=MemoryOrdering.RELAXED,
    allowed=(MemoryOrdering.RELAXED, MemoryOrdering.RELEASE),
)

OPS: tuple[OpDef, ...] = (
    OpDef(
        "atomic_cas_tko",
        0x07,
        "atomics",
        results=res("result", "result_token"),
        operands=(*single("pointers", "cmp", "val"), opt("mask"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(_ACQ_REL, SCOPE),
        flags=("mask", "token"),
        flags_since=V13_1,
        infer="atomic",
    ),
    OpDef(
        "atomic_rmw_tko",
        0x08,
        "atomics",
        results=res("result", "result_token"),
        operands=(*single("pointers", "arg"), opt("mask"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(_ACQ_REL, SCOPE, MODE),
        flags=("mask", "token"),
        flags_since=V13_1,
        infer="atomic",
    ),
    OpDef(
        "atomic_red_view_tko",
        0x75,
        "atomics",
        since=V13_3,
        results=res("result_token"),
        counted_results=True,
        operands=(*single("view"), var("index"), *single("value"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(_ONLY_RELAXED, _BLOCK_OR_DEVICE, _NO_XCHG, inbounds(V13_5)),
        flags=("token",),
        flags_since=V13_3,
        infer="token",
    ),
    OpDef(
        "multimem_load_reduce_view_tko",
        0x7B,
        "atomics",
        since=V13_5,
        results=res("reduced_values", "result_token"),
        counted_results=True,
        operands=(*single("view"), var("index"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(_LOAD_REDUCE_ORDERING, SCOPE_OPT, MULTIMEM, inbounds(V13_5)),
        flags=("memory_scope", "token"),
        flags_since=V13_5,
        infer="view_load",
    ),
    OpDef(
        "multimem_reduce_view_tko",
        0x7C,
        "atomics",
        since=V13_5,
        results=res("result_token"),
        counted_results=True,
        operands=(*single("view", "tile"), var("index"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(_REDUCE_ORDERING, SCOPE, MULTIMEM, inbounds(V13_5)),
        flags=("token",),
        flags_since=V13_5,
        infer="token",
    ),
    OpDef(
        "multimem_store_view_tko",
        0x7D,
        "atomics",
        since=V13_5,
        results=res("result_token"),
        counted_results=True,
        operands=(*single("view", "tile"), var("index"), opt("token")),
        layout=OperandLayout.SEGMENTED,
        attrs=(ORDERING, SCOPE_OPT, inbounds(V13_5)),
        flags=("memory_scope", "token"),
        flags_since=V13_5,
        infer="token",
    ),
)
