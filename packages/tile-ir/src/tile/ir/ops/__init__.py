"""The op catalog: one declarative `OpDef` per Tile IR opcode of bytecode 13.1-13.5, split by family.

`CATALOG` maps op names to entries, `BY_OPCODE` opcodes to entries. ``module``, ``entry`` and ``global``
have opcodes too but live in bytecode sections, not in op streams; they are not in the catalog. `PREVIEW`
names the preview ops that exist in tileiras but are not modelled, with why (`lookup` and the verifier say
it instead of "unknown op").
"""

from __future__ import annotations

from tile.ir._errors import VerifyError
from tile.ir.ops import arith, atomics, control, math, memory, misc, reduce, shape
from tile.ir.ops._spec import AttrKind, AttrSpec, OpDef, OperandKind, OperandLayout, OperandSpec, ResultSpec

__all__ = [
    "BY_OPCODE",
    "CATALOG",
    "PREVIEW",
    "AttrKind",
    "AttrSpec",
    "OpDef",
    "OperandKind",
    "OperandLayout",
    "OperandSpec",
    "ResultSpec",
    "lookup",
]

_ALL: tuple[OpDef, ...] = (
    *arith.OPS,
    *math.OPS,
    *shape.OPS,
    *control.OPS,
    *memory.OPS,
    *atomics.OPS,
    *reduce.OPS,
    *misc.OPS,
)
CATALOG: dict[str, OpDef] = {d.name: d for d in _ALL}
BY_OPCODE: dict[int, OpDef] = {d.opcode: d for d in _ALL}

_SIMT = (
    "is a 13.5 preview op (preview$call, opcode 0x4002) of the 'simt' preview: tileiras 13.5 reads it only with "
    "--preview=simt from public-preview bytecode, calling an extern preview$func; tile.ir does not model it "
    "(write the callee's body inline in the entry)"
)
PREVIEW: dict[str, str] = {"call": _SIMT, "preview$call": _SIMT}

if len(CATALOG) != len(_ALL) or len(BY_OPCODE) != len(_ALL):  # pragma: no cover - guards the tables at import
    raise RuntimeError("op catalog has duplicate names or opcodes")


def lookup(name: str) -> OpDef:
    """Return the catalog entry of op `name`, raising `VerifyError` for unknown ops."""
    try:
        return CATALOG[name]
    except KeyError:
        if name in PREVIEW:
            raise VerifyError(f"op '{name}' {PREVIEW[name]}") from None
        raise VerifyError(f"unknown Tile IR op '{name}'; see tile.ir.ops.CATALOG for the known ops") from None
