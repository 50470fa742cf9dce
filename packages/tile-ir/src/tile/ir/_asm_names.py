"""SSA value names as `tileirdisasm` (MLIR's printer) chooses them.

Rules reproduced here:
- Some ops suggest a name for their results (``%tview``, ``%pview``, ``%cst_64_i32``, ``%assume_...``,
  ``%reshape``, ``%bcast``, ``%for``, ``%reduce``); ops with two or more fixed results are named after
  their results (``%tile, %result_token``, ``%blockId_x, ...``); everything else is numbered (``%0``), a
  multi-result op as one group (``%4:3``, used as ``%4#1``). Block arguments are ``%argN`` unless the op
  names them (``%loopIdx``, ``%iterArg0``, ``%reduce_lhs``).
- A suggested name already in use gets ``_N`` appended, N from one counter per function.
- A region is named entirely before the regions nested in it; each nested region starts from the counters
  its parent ended with and sees the parent's names; sibling regions do not see each other's names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from itertools import pairwise

from tile.ir._asm_attrs import number_element
from tile.ir._attrs import DenseElementsAttr
from tile.ir._floats import float_from_bits
from tile.ir._ir import Block, Function, Operation, Region, Value
from tile.ir._types import TileType
from tile.ir.ops import CATALOG

__all__ = ["Names", "name_function"]

_SIMPLE_NAMES = {
    "make_tensor_view": "tview",
    "make_partition_view": "pview",
    "make_strided_view": "sview",
    "make_gather_scatter_view": "gsview",
    "reshape": "reshape",
    "broadcast": "bcast",
    "for": "for",
    "reduce": "reduce",
}
# Ops that implement MLIR's name hook (even when they suggest nothing): their results are never named
# after the catalog's result names.
_HOOKED = frozenset(_SIMPLE_NAMES) | {"assume", "constant", "if", "loop", "scan"}
_VALID = re.compile(r"[A-Za-z0-9$._-]")


@dataclass
class Names:
    """The printed name of every value of one function."""

    text: dict[Value, str] = field(default_factory=dict)
    groups: dict[Operation, list[tuple[str, int]]] = field(default_factory=dict)

    def results(self, op: Operation) -> str:
        """The result list of `op` as printed before `=` (``%a, %b`` or ``%4:3``)."""
        return ", ".join(name if size == 1 else f"{name}:{size}" for name, size in self.groups[op])

    def ref(self, value: Value) -> str:
        """The text of a use of `value` (``%name``, ``%4#1``)."""
        return self.text[value]


def _constant_name(op: Operation) -> str:
    attr = op.attributes["value"]
    assert isinstance(attr, DenseElementsAttr)
    t = attr.type
    elem = number_element(t)
    width = max(elem.bits // 8, 1)
    splat = len(attr.data) <= width
    if elem.name == "i1":
        splat = len(attr.data) == 1 and attr.data[0] in (0, 0xFF)
        bits = {attr.data[0] != 0} if splat else _bits(attr.data, t)
        return "true" if bits == {True} else "false" if bits == {False} else "cst_i1"
    name = "cst"
    if splat:
        raw = int.from_bytes(attr.data[:width], "little")
        if elem.is_float:
            value = float_from_bits(elem.name, raw)
            if math.isnan(value):
                name += "_NaN"
            elif value >= 0 and value == int(value) and value < 2**64:
                name += f"_{int(value)}"
        else:
            signed = raw - (1 << elem.bits) if raw >> (elem.bits - 1) else raw
            name += f"_{signed}"
    return f"{name}_{elem.name}"


def _bits(data: bytes, t: TileType) -> set[bool]:
    count = 1
    for d in t.shape:
        count *= d
    return {bool(data[i // 8] >> (i % 8) & 1) for i in range(count)}


def _suggested(op: Operation, index: int) -> str | None:
    """The name op `op`'s hook suggests for its result `index` (None: no suggestion)."""
    if op.name in _SIMPLE_NAMES:
        return _SIMPLE_NAMES[op.name] if index == 0 else None
    if op.name == "constant":
        return _constant_name(op)
    if op.name == "assume":
        producer = op.operands[0].owner
        if isinstance(producer, Operation) and producer.name in _HOOKED:
            return "assume_" + (_suggested(producer, op.operands[0].index) or "")
        return "assume"
    return None


def _sanitize(name: str) -> str:
    if not all(_VALID.match(c) for c in name) or name[0].isdigit():
        fixed = "".join(c if _VALID.match(c) else "_" if c == " " else f"{ord(c):X}" for c in name)
        return "_" + fixed if name[0].isdigit() else fixed
    return name


class _Scope:
    def __init__(self, used: set[str], value_id: int, arg_id: int, conflict_id: int) -> None:
        self.used = used
        self.value_id = value_id
        self.arg_id = arg_id
        self.conflict_id = conflict_id

    def unique(self, name: str) -> str:
        name = _sanitize(name)
        if name in self.used:
            while True:
                probe = f"{name}_{self.conflict_id}"
                self.conflict_id += 1
                if probe not in self.used:
                    name = probe
                    break
        self.used.add(name)
        return name


def _block_arg_names(op: Operation | None, block: Block) -> list[str | None]:
    if op is None or op.name not in ("for", "reduce"):
        return [None] * len(block.args)
    names: list[str | None] = []
    if op.name == "for":
        names += ["loopIdx"] + [f"iterArg{i}" for i in range(len(block.args) - 1)]
        return names
    suffix = len(block.args) > 2
    return names + [
        ("reduce_lhs" if i % 2 == 0 else "reduce_rhs") + (str(i // 2) if suffix else "") for i in range(len(block.args))
    ]


def _name_op(op: Operation, scope: _Scope, names: Names) -> None:
    if not op.results:
        if op.name == "print_tko":  # 13.1 print has no result, but tileirdisasm numbers the token it adds
            names.groups[op] = [(f"%{scope.value_id}", 1)]
            scope.value_id += 1
        return
    if op.name in _HOOKED:
        named = {0: n} if (n := _suggested(op, 0)) is not None else {}
    elif len(CATALOG[op.name].results) >= 2:
        named = {i: r.name for i, r in enumerate(CATALOG[op.name].results)}
    else:
        named = {}
    groups = sorted({0, *named})
    bases: dict[int, str] = {i: "%" + scope.unique(n) for i, n in named.items()}
    if 0 not in bases:
        bases[0] = f"%{scope.value_id}"
        scope.value_id += 1
    bounds = [*groups, len(op.results)]
    names.groups[op] = [(bases[start], end - start) for start, end in pairwise(bounds)]
    for start, end in pairwise(bounds):
        for k in range(start, end):
            multi = end - start > 1
            names.text[op.results[k]] = f"{bases[start]}#{k - start}" if multi else bases[start]


def _name_region(owner: Operation | None, block: Block, scope: _Scope, names: Names) -> None:
    for arg, suggested in zip(block.args, _block_arg_names(owner, block), strict=True):
        if suggested is None:
            names.text[arg] = f"%arg{scope.arg_id}"
            scope.arg_id += 1
        else:
            names.text[arg] = "%" + scope.unique(suggested)
    for op in block.ops:
        _name_op(op, scope, names)
    for op in block.ops:
        for region in op.regions:
            _name_nested(op, region, scope, names)


def _name_nested(op: Operation, region: Region, parent: _Scope, names: Names) -> None:
    for block in region.blocks:
        scope = _Scope(set(parent.used), parent.value_id, parent.arg_id, parent.conflict_id)
        _name_region(op, block, scope, names)


def name_function(fn: Function) -> Names:
    """Name every value of `fn` as tileirdisasm does."""
    names = Names()
    _name_region(None, fn.body, _Scope(set(), 0, 0, 0), names)
    return names
