"""Encoding of function bodies: ops (driven by the catalog), regions and SSA value numbering.

Value numbering (what the reader reproduces): parameters are 0..n-1; a block's arguments take the next ids
when the block starts; an op's results take the next ids after its regions were written; every id created
inside a block is released when the block ends. Locations are collected in pre-order (an op before the ops
of its regions), the order of the Debug section's per-function index.
"""

from __future__ import annotations

from collections.abc import Sequence

from tile.ir._attrs import ArrayAttr, DenseElementsAttr, OptimizationHints
from tile.ir._encoding import ByteWriter
from tile.ir._errors import UnsupportedVersionError, VerifyError
from tile.ir._ir import Block, Operation, Value
from tile.ir._tables import TableSet
from tile.ir.ops import AttrKind, AttrSpec, OpDef, OperandKind, OperandLayout, lookup

__all__ = ["BodyWriter"]


class BodyWriter:
    """Writes the ops of one function body."""

    def __init__(self, tables: TableSet, function_name: str) -> None:
        self.tables = tables
        self.version = tables.version
        self.where = f"@{function_name}"
        self.ids: dict[Value, int] = {}
        self.order: list[Value] = []  # live values by id (ids are dense: a value's id is its position)
        self.locs: list[int] = []

    def body(self, block: Block) -> bytes:
        """Return the encoded ops of the entry block (its arguments are the parameters)."""
        out = ByteWriter()
        self._define(block.args)
        for op in block.ops:
            self.op(op, out)
        return bytes(out.buf)

    def _define(self, values: Sequence[Value]) -> None:
        for v in values:
            self.ids[v] = len(self.order)
            self.order.append(v)

    def _id(self, value: Value, op: Operation) -> int:
        found = self.ids.get(value)
        if found is None:
            raise VerifyError(f"operand {value!r} of '{op.name}' is not defined before its use", self.where)
        return found

    def op(self, op: Operation, out: ByteWriter) -> None:
        """Append the encoding of `op` (and of its regions)."""
        opdef = lookup(op.name)
        if opdef.since > self.version:
            raise UnsupportedVersionError(f"op '{op.name}' needs bytecode {opdef.since}+, target is {self.version}")
        self.locs.append(self.tables.location(op.loc))
        out.varint(opdef.opcode)
        self._results(opdef, op, out)
        self._flags(opdef, op, out)
        for spec in opdef.attrs:
            self._attr(opdef, spec, op, out)
        self._operands(opdef, op, out)
        if opdef.regions:
            self._regions(op, out)
        self._define(op.results if opdef.variadic_results else op.results[: len(opdef.results_at(self.version))])

    def _results(self, opdef: OpDef, op: Operation, out: ByteWriter) -> None:
        want = len(opdef.results_at(self.version))
        if not opdef.variadic_results and len(op.results) not in opdef.result_counts(self.version):
            raise UnsupportedVersionError(
                f"'{op.name}' has {len(op.results)} results but {want} in bytecode {self.version}", self.where
            )
        encoded = op.results if opdef.variadic_results else op.results[:want]  # newer results are not encoded
        types = [self.tables.type(r.type) for r in encoded]
        if opdef.counted_results:
            out.varint(len(types))
        for t in types:
            out.varint(t)

    def _present(self, opdef: OpDef, op: Operation, name: str) -> bool:
        if any(spec.name == name for spec in opdef.operands):
            return bool(op.segments[opdef.operand_index(name)])
        value = op.attributes.get(name)
        # identity, not equality: an enum member with code 0 (memory_scope tl_blk) equals False
        return value is not None and value is not False

    def _flags(self, opdef: OpDef, op: Operation, out: ByteWriter) -> None:
        if opdef.flags_since is None:
            return
        bits = 0
        for i, name in enumerate(opdef.flags):
            if self._present(opdef, op, name):
                spec = next((a for a in opdef.attrs if a.name == name), None)
                since = spec.since if spec is not None else opdef.flags_since
                if since > self.version:
                    raise UnsupportedVersionError(f"'{op.name}' {name} needs bytecode {since}+", self.where)
                bits |= 1 << i
        if self.version >= opdef.flags_since:
            out.varint(bits)

    def _attr(self, opdef: OpDef, spec: AttrSpec, op: Operation, out: ByteWriter) -> None:
        if spec.kind is AttrKind.UNIT or (spec.optional and spec.name not in op.attributes):
            return
        value = op.attributes.get(spec.name, spec.default)
        if spec.since > self.version:
            all_false = isinstance(value, tuple) and not any(value)
            same = type(value) is type(spec.default) and value == spec.default
            if not same and not (spec.kind is AttrKind.BOOL_LIST and all_false):
                raise UnsupportedVersionError(
                    f"'{op.name}' attribute {spec.name}={value!r} needs bytecode {spec.since}+", self.where
                )
            return
        if value is None:
            raise VerifyError(f"'{op.name}' is missing attribute '{spec.name}'", self.where)
        self._attr_value(spec, value, op, out)

    def _attr_value(self, spec: AttrSpec, value: object, op: Operation, out: ByteWriter) -> None:
        t = self.tables
        kind = spec.kind
        if kind in (AttrKind.ENUM, AttrKind.INT):
            out.varint(int(value))  # type: ignore[call-overload]  # enum members and ints
        elif kind is AttrKind.BOOL:
            out.byte(int(bool(value)))
        elif kind is AttrKind.STRING:
            out.varint(t.string(str(value)))
        elif kind is AttrKind.TYPE:
            out.varint(t.type(value))  # type: ignore[arg-type]  # normalized to a Type
        elif kind is AttrKind.I32_LIST:
            out.int_list(value, 4)  # type: ignore[arg-type]  # normalized to tuple[int, ...]
        elif kind is AttrKind.BOOL_LIST:
            assert isinstance(value, tuple)
            index_count = op.segments[lookup(op.name).operand_index("index")]
            out.bool_list(value or (False,) * index_count)
        elif kind is AttrKind.DENSE:
            assert isinstance(value, DenseElementsAttr)
            out.varint(t.constant(value.data))
        elif kind is AttrKind.ARRAY:
            assert isinstance(value, ArrayAttr)
            out.varint(len(value.elements))
            for e in value.elements:
                t.attr(e, out)
        elif kind is AttrKind.HINTS:
            assert isinstance(value, OptimizationHints)
            t.dictionary(value.by_arch, out)
        else:
            t.attr(value, out)  # type: ignore[arg-type]  # TAGGED values are attributes

    def _operands(self, opdef: OpDef, op: Operation, out: ByteWriter) -> None:
        if len(op.segments) != len(opdef.operands) or sum(op.segments) != len(op.operands):
            raise VerifyError(f"'{op.name}' operand segments {op.segments} do not match its catalog entry", self.where)
        ids = [self._id(v, op) for v in op.operands]
        if opdef.layout is OperandLayout.TOTAL:
            out.varint(len(ids))
        if opdef.layout is not OperandLayout.SEGMENTED:
            for i in ids:
                out.varint(i)
            return
        pos = 0
        for spec, count in zip(opdef.operands, op.segments, strict=True):
            if spec.kind is OperandKind.VARIADIC:
                out.varint(count)
            for i in ids[pos : pos + count]:
                out.varint(i)
            pos += count

    def _regions(self, op: Operation, out: ByteWriter) -> None:
        out.varint(len(op.regions))
        for region in op.regions:
            out.varint(len(region.blocks))
            for block in region.blocks:
                self._block(block, out)

    def _block(self, block: Block, out: ByteWriter) -> None:
        live = len(self.order)
        out.varints(self.tables.type(a.type) for a in block.args)
        self._define(block.args)
        out.varint(len(block.ops))
        for op in block.ops:
            self.op(op, out)
        for value in self.order[live:]:
            del self.ids[value]
        del self.order[live:]
