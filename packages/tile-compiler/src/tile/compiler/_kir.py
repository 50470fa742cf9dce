"""The typed kernel IR that ``typecheck`` produces and ``lower`` turns into a ``tile.ir`` module.

It is Tile-IR shaped on purpose (op names, operands, results, attributes, regions are Tile IR's), so lowering is a
table walk; but its types are the compiler's own (`tile.compiler._types`), which keeps the type checker independent
of ``tile.ir``. Invariants: values are defined once; a region's block arguments come first; every block ends with a
terminator (``return``, ``yield``, ``continue`` or ``break``); every op carries the user's source location.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tile.compiler._diagnostics import SourceLoc
from tile.compiler._types import Type

__all__ = ["AssumeBounded", "AssumeDivBy", "Block", "KernelIR", "Op", "Value"]


@dataclass(eq=False)
class Value:
    """An SSA value of the typed kernel IR."""

    id: int
    type: Type

    def __repr__(self) -> str:
        return f"%{self.id}"


@dataclass(frozen=True)
class AssumeDivBy:
    """``assume div_by<n>``: the value (or pointer address in bytes) is a multiple of ``n``."""

    divisor: int


@dataclass(frozen=True)
class AssumeBounded:
    """``assume bounded<lb, ub>``: lower/upper bounds, None when open."""

    lb: int | None
    ub: int | None


@dataclass(eq=False)
class Block:
    """A block: arguments, then ops; the last op is a terminator."""

    args: list[Value] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)


@dataclass(eq=False)
class Op:
    """One Tile IR op: name, operands (grouped for ops with several variadic groups), results, attributes, regions."""

    name: str
    operands: list[Value | list[Value] | None]
    results: list[Value]
    attrs: dict[str, Any]
    regions: list[Block] = field(default_factory=list)
    loc: SourceLoc | None = None
    inlined_from: tuple[SourceLoc, ...] = ()  # call sites of the helpers this op was inlined through, innermost first

    def flat_operands(self) -> list[Value]:
        """All operand values in order."""
        out: list[Value] = []
        for o in self.operands:
            if isinstance(o, list):
                out.extend(o)
            elif o is not None:
                out.append(o)
        return out


@dataclass(eq=False)
class KernelIR:
    """One entry kernel: its parameters (rank-0 tiles), body and optimization hints."""

    name: str
    params: list[Value]
    body: Block
    hints: dict[str, dict[str, int]] = field(default_factory=dict)

    def dump(self) -> str:
        """MLIR-like text of the kernel (``TILE_DUMP=typed``)."""
        sig = ", ".join(f"{p}: {p.type}" for p in self.params)
        lines = [f"entry @{self.name}({sig}) {{"]
        _dump_block(self.body, lines, 1)
        lines.append("}")
        return "\n".join(lines)


def _fmt(o: Value | list[Value] | None) -> str:
    if isinstance(o, list):
        return "[" + ", ".join(map(repr, o)) + "]"
    return "_" if o is None else repr(o)


def _dump_block(block: Block, lines: list[str], depth: int) -> None:
    pad = "  " * depth
    if block.args:
        lines.append(f"{pad}^({', '.join(f'{a}: {a.type}' for a in block.args)}):")
    for op in block.ops:
        res = ", ".join(map(repr, op.results))
        head = f"{res} = " if res else ""
        attrs = " {" + ", ".join(f"{k}={v!r}" for k, v in op.attrs.items()) + "}" if op.attrs else ""
        types = ", ".join(str(r.type) for r in op.results)
        lines.append(f"{pad}{head}{op.name} {', '.join(map(_fmt, op.operands))}{attrs}{' : ' + types if types else ''}")
        for region in op.regions:
            lines.append(f"{pad}{{")
            _dump_block(region, lines, depth + 1)
            lines.append(f"{pad}}}")
