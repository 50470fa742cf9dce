"""Stage ``lower``: the typed kernel IR to a ``tile.ir`` module with one entry function.

A table walk: each typed op becomes the ``tile.ir`` op of the same name through the builder's generic
``create``; operand groups, result types and regions carry over one to one. This module only translates the
compiler's own types and attribute values into ``tile.ir``'s (element types, splat constants, reduction
identities, assume predicates) and gives every op a debug location in the user's source. An ``assert``'s message and
file names are escaped as ``printf`` format text (``%`` -> ``%%``), which is what tileiras makes of them.
Invariant: the module it returns has exactly the ops, in the order, that the type checker produced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tile import ir
from tile.compiler._diagnostics import SourceLoc
from tile.compiler._kir import AssumeBounded, AssumeDivBy, Block, KernelIR, Op, Value
from tile.compiler._pdl_check import check_entry_wait
from tile.compiler._spec import KernelABI, Target
from tile.compiler._typecheck import TypedKernel
from tile.compiler._types import (
    DType,
    PartitionViewType,
    PtrType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)

__all__ = ["LoweredKernel", "ir_type", "lower"]


@dataclass(eq=False)
class LoweredKernel:
    """The ``tile.ir`` module of one entry kernel and its ABI."""

    name: str
    module: ir.Module
    abi: KernelABI

    def dump(self) -> str:
        """A short description (the pipeline prints the module's text itself)."""
        fn = self.module.functions[0]
        return f"entry @{fn.name}: {sum(1 for _ in fn.walk())} ops, {len(fn.params)} params"


def _scalar(dt: DType) -> ir.ScalarType:
    out = getattr(ir, dt.ir)
    assert isinstance(out, ir.ScalarType)  # every DType.ir names a tile.ir scalar
    return out


def ir_type(t: Type) -> ir.Type:
    """The ``tile.ir`` type for a compiler type."""
    if isinstance(t, TileType):
        elem: ir.ElementType = ir.ptr(_scalar(t.elem.pointee)) if isinstance(t.elem, PtrType) else _scalar(t.elem)
        return ir.tile(t.shape, elem)
    if isinstance(t, TokenType):
        return ir.token
    if isinstance(t, TensorViewType):
        return ir.TensorViewType(_scalar(t.dtype), t.shape, t.strides)
    if isinstance(t, PartitionViewType):
        pad = ir.Padding[t.padding.upper()] if t.padding else None
        dim_map = t.dim_map if t.dim_map is not None else tuple(range(len(t.tile)))
        return ir.PartitionViewType(t.tile, ir_type(t.view), dim_map, pad)  # type: ignore[arg-type]  # a view
    raise TypeError(f"no tile.ir type for {t!r}")


class _Lowerer:
    def __init__(self, kernel: KernelIR, target: Target) -> None:
        self.values: dict[int, ir.Value] = {}
        self.scope = _subprogram(kernel)
        self.target = target

    def value(self, v: Value) -> ir.Value:
        return self.values[v.id]

    def operands(self, op: Op) -> list[Any]:
        out: list[Any] = []
        for group in op.operands:
            if isinstance(group, list):
                out.append([self.value(v) for v in group])
            else:
                out.append(None if group is None else self.value(group))
        return out

    def attrs(self, op: Op) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in op.attrs.items():
            out[name] = self.attr(op, name, value)
        return out

    def attr(self, op: Op, name: str, value: Any) -> Any:
        if name == "value":
            res = ir_type(op.results[0].type)
            assert isinstance(res, ir.TileType)  # constants are tiles
            return ir.DenseElementsAttr.splat(res, value)
        if name == "identities":
            operands = op.flat_operands()
            return ir.ArrayAttr(tuple(_identity(v, o.type) for v, o in zip(value, operands, strict=True)))
        if isinstance(value, AssumeDivBy):
            return ir.DivBy(value.divisor)
        if isinstance(value, AssumeBounded):
            return ir.Bounded(value.lb, value.ub)
        return tuple(value) if name == "permutation" else value

    def block(self, b: ir.Builder, block: Block) -> None:
        for op in block.ops:
            self.op(b, op)

    def op(self, b: ir.Builder, op: Op) -> None:
        loc, attrs = self.loc(op.loc, op.inlined_from), self.attrs(op)
        if op.name == "assert":  # tileiras copies these into a printf format: see tile.ir._format_text
            loc = None if loc is None else _format_text_loc(loc)
            attrs["message"] = ir.escape_format_text(attrs["message"])
        types = [ir_type(r.type) for r in op.results]
        made = b.create(op.name, self.operands(op), attrs, types, loc)
        for mine, theirs in zip(op.results, made.results, strict=False):
            self.values[mine.id] = theirs
        for region, block in zip(made.regions, op.regions, strict=False):
            target = region.add_block([ir_type(a.type) for a in block.args])
            for mine, theirs in zip(block.args, target.args, strict=False):
                self.values[mine.id] = theirs
            with b.at(target):
                self.block(b, block)

    def loc(self, loc: SourceLoc | None, inlined_from: tuple[SourceLoc, ...] = ()) -> ir.Location | None:
        """A DILoc in the kernel's scope; inside inlined helpers, nested CallSites out to the kernel's line."""
        if loc is None:
            return None
        out: ir.Location = ir.DILoc(self.scope, loc.filename, loc.line, loc.col + 1)
        for site in inlined_from:
            out = ir.CallSite(out, ir.DILoc(self.scope, site.filename, site.line, site.col + 1))
        return out


def _format_text_loc(loc: ir.Location) -> ir.Location:
    """``loc`` with its file names escaped as ``printf`` format text (the device prints the path as it is)."""
    if isinstance(loc, ir.DILoc):
        return ir.DILoc(loc.scope, ir.escape_format_text(loc.filename), loc.line, loc.column)
    if isinstance(loc, ir.CallSite):
        return ir.CallSite(_format_text_loc(loc.callee), _format_text_loc(loc.caller))
    return loc


def _identity(value: int | float, t: Type) -> ir.Attr:
    assert isinstance(t, TileType)  # reduction operands are tiles
    assert isinstance(t.elem, DType)  # of numbers
    scalar = _scalar(t.elem)
    if t.elem.is_float:
        return ir.FloatAttr.of(scalar, float(value))
    return ir.IntegerAttr(scalar, int(value))


def _subprogram(kernel: KernelIR) -> ir.DISubprogram:
    first = next((op.loc for op in kernel.body.ops if op.loc is not None), None)
    filename = first.filename if first else "<unknown>"
    file = ir.DIFile(os.path.basename(filename), os.path.dirname(filename))
    line = first.line if first else 0
    return ir.DISubprogram(file, line, kernel.name, kernel.name, ir.DICompileUnit(file), line)


def lower(typed: TypedKernel, target: Target) -> LoweredKernel:
    """Translate ``typed`` into a ``tile.ir`` module for ``target``."""
    kernel = typed.ir
    lw = _Lowerer(kernel, target)
    hints = ir.OptimizationHints.of(kernel.hints) if kernel.hints else None
    fn = ir.Function(
        kernel.name,
        ir.FunctionType(tuple(ir_type(p.type) for p in kernel.params), ()),
        entry=True,
        hints=hints,
        loc=ir.DILoc(lw.scope, lw.scope.file.name, lw.scope.line, 1),
    )
    for mine, theirs in zip(kernel.params, fn.params, strict=False):
        lw.values[mine.id] = theirs
    b = ir.Builder(fn.body)
    lw.block(b, kernel.body)
    if typed.abi.waits_prior_grid:  # the ABI lets the launcher start it early: prove every access waits first
        check_entry_wait(fn)
    return LoweredKernel(kernel.name, ir.Module([fn]), typed.abi)
