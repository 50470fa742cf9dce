"""Decoding of function bodies into `Operation`s, driven by the op catalog (inverse of `_writer_ops`)."""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._attrs import ArrayAttr, DenseElementsAttr
from tile.ir._decoding import ByteReader
from tile.ir._errors import BytecodeError
from tile.ir._ir import MAX_NESTING, Block, Operation, Value
from tile.ir._location import Location
from tile.ir._reader_debug import DebugInfo
from tile.ir._reader_tables import ReadTables
from tile.ir._types import TileType, TokenType, Type
from tile.ir._verify_types import dense_size_problems
from tile.ir.ops import BY_OPCODE, AttrKind, AttrSpec, OpDef, OperandKind, OperandLayout

__all__ = ["BodyReader"]


class BodyReader:
    """Reads the ops of one function body; `values` is the live value table (ids are list indices)."""

    def __init__(self, tables: ReadTables, debug: DebugInfo, run: list[int], params: list[Value]) -> None:
        self.tables = tables
        self.version = tables.version
        self.debug = debug
        self.run = run
        self.loc_cursor = 1
        self.values: list[Value] = list(params)
        self.depth = 0

    def ops_until(self, r: ByteReader, block: Block) -> None:
        """Read ops into `block` until the reader's end."""
        while r.remaining:
            block.append(self.op(r))

    def op(self, r: ByteReader) -> Operation:
        """Read one op (and its regions); its results join the value table."""
        start = r.pos
        opcode = r.varint("opcode")
        opdef = BY_OPCODE.get(opcode)
        if opdef is None or opdef.since > self.version:
            raise r.fail(f"unsupported opcode {opcode} for bytecode version {self.version}", start)
        loc = self._next_loc(start)
        result_types = self._result_types(r, opdef)
        # Results newer than this bytecode are not encoded; NVIDIA's reader supplies them (tokens) and so do we,
        # outside the value table: nothing in this file can refer to them.
        supplied = 0 if opdef.variadic_results else len(opdef.results) - len(opdef.results_at(self.version))
        result_types += [TokenType()] * supplied
        flag_bits = r.varint("flags") if opdef.flags_since is not None and self.version >= opdef.flags_since else 0
        flags = {name for i, name in enumerate(opdef.flags) if flag_bits >> i & 1}
        if flag_bits >> len(opdef.flags):
            raise r.fail(f"'{opdef.name}': unknown flag bits {flag_bits:#x}", start)
        attrs: dict[str, object] = {}
        for spec in opdef.attrs:
            self._attr(r, opdef, spec, flags=flags, out=attrs, results=result_types)
        operands, segments = self._operands(r, opdef, flags)
        if attrs.get("inbounds") == ():
            attrs["inbounds"] = (False,) * segments[opdef.operand_index("index")]
        op = Operation(
            opdef.name, operands, result_types, attributes=attrs, num_regions=opdef.regions, segments=segments, loc=loc
        )
        if opdef.regions:
            self._regions(r, op, opdef)
        self.values.extend(op.results[: len(result_types) - supplied])
        return op

    def _next_loc(self, offset: int) -> Location | None:
        if not self.run:
            return None
        if self.loc_cursor >= len(self.run):
            raise BytecodeError(offset, "debug info has fewer locations than the function has ops")
        attr_id = self.run[self.loc_cursor]
        self.loc_cursor += 1
        return self.debug.location(attr_id, offset)

    def _result_types(self, r: ByteReader, opdef: OpDef) -> list[Type]:
        start = r.pos
        n = r.count("result count") if opdef.counted_results else len(opdef.results_at(self.version))
        if not opdef.variadic_results and n != len(opdef.results_at(self.version)):
            raise r.fail(f"'{opdef.name}' must have {len(opdef.results_at(self.version))} results, got {n}", start)
        return [self.tables.value_type_ref(r, f"result type {i} of '{opdef.name}'") for i in range(n)]

    def _attr(
        self,
        r: ByteReader,
        opdef: OpDef,
        spec: AttrSpec,
        *,
        flags: set[str],
        out: dict[str, object],
        results: list[Type],
    ) -> None:
        if spec.kind is AttrKind.UNIT:
            if spec.name in flags:
                out[spec.name] = True
            return
        if spec.optional and spec.name not in flags:
            return
        if spec.since > self.version:
            if spec.default is not None:
                out[spec.name] = spec.default
            return
        out[spec.name] = self._attr_value(r, opdef, spec, results)

    def _attr_value(self, r: ByteReader, opdef: OpDef, spec: AttrSpec, results: list[Type]) -> object:
        what = f"attribute '{spec.name}' of '{opdef.name}'"
        start = r.pos
        if spec.kind is AttrKind.ENUM:
            assert spec.enum is not None
            value = r.varint(what)
            if value not in spec.enum._value2member_map_:
                raise r.fail(f"invalid integer value for enum type: {value} ({what})", start)
            return spec.enum(value)
        if spec.kind is AttrKind.DENSE:
            if len(results) != 1 or not isinstance(results[0], TileType):
                raise r.fail(f"{what}: a dense constant needs one tile result", start)
            data = self.tables.constant(r, what)
            if problems := dense_size_problems(results[0], data):
                raise r.fail(f"{what}: {problems[0]}", start)
            return DenseElementsAttr(results[0], data)
        return _INLINE[spec.kind](self.tables, r, what)

    def _value(self, r: ByteReader, opdef: OpDef, index: int) -> Value:
        start = r.pos
        vid = r.varint("operand id")
        if vid >= len(self.values):
            raise r.fail(
                f"operand index {vid} out of bounds (size={len(self.values)}) for operand {index} of '{opdef.name}'",
                start,
            )
        return self.values[vid]

    def _operands(self, r: ByteReader, opdef: OpDef, flags: set[str]) -> tuple[list[Value], list[int]]:
        start = r.pos
        if opdef.layout is OperandLayout.SEGMENTED:
            return self._segmented(r, opdef, flags)
        fixed = sum(1 for g in opdef.operands if g.kind is OperandKind.SINGLE)
        total = r.count("operand count") if opdef.layout is OperandLayout.TOTAL else fixed
        segments = []
        for g in opdef.operands:
            n = 1 if g.kind is OperandKind.SINGLE else total - fixed
            if n < 0 or (g.kind is OperandKind.OPTIONAL and n > 1):
                raise r.fail(f"'{opdef.name}' cannot take {total} operands", start)
            segments.append(n)
        return [self._value(r, opdef, i) for i in range(total)], segments

    def _segmented(self, r: ByteReader, opdef: OpDef, flags: set[str]) -> tuple[list[Value], list[int]]:
        values: list[Value] = []
        segments = []
        for g in opdef.operands:
            if g.kind is OperandKind.SINGLE:
                n = 1
            elif g.kind is OperandKind.OPTIONAL:
                n = int(g.name in flags)
            else:
                n = r.count(f"size of operand group '{g.name}'")
            values += [self._value(r, opdef, len(values)) for _ in range(n)]
            segments.append(n)
        return values, segments

    def _regions(self, r: ByteReader, op: Operation, opdef: OpDef) -> None:
        start = r.pos
        n = r.varint("region count")
        if n != opdef.regions:
            raise r.fail(f"'{opdef.name}' must have {opdef.regions} regions, got {n}", start)
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise r.fail(f"regions nested more than {MAX_NESTING} deep", start)
        for index, region in enumerate(op.regions):
            at = r.pos
            blocks = r.count("block count")
            # Every region holds one block; only an `if` without results may leave its else region empty.
            if blocks != 1 and not (blocks == 0 and op.name == "if" and index == 1 and not op.results):
                raise r.fail(f"region {index} of '{opdef.name}' must hold exactly one block, holds {blocks}", at)
            for _ in range(blocks):
                self._block(r, region.add_block())
        self.depth -= 1

    def _block(self, r: ByteReader, block: Block) -> None:
        live = len(self.values)
        for _ in range(r.count("block argument count")):
            block.add_arg(self.tables.value_type_ref(r, "block argument type"))
        self.values.extend(block.args)
        for _ in range(r.count("block op count")):
            block.append(self.op(r))
        del self.values[live:]


_INLINE: dict[AttrKind, Callable[[ReadTables, ByteReader, str], object]] = {
    AttrKind.INT: lambda t, r, what: r.varint(what),
    AttrKind.BOOL: lambda t, r, what: bool(r.byte(what)),
    AttrKind.STRING: lambda t, r, what: t.string(r, what),
    AttrKind.TYPE: lambda t, r, what: t.type_ref(r, what),
    AttrKind.I32_LIST: lambda t, r, what: r.int_list(4, what),
    AttrKind.BOOL_LIST: lambda t, r, what: r.bool_list(what),
    AttrKind.ARRAY: lambda t, r, what: ArrayAttr(tuple(t.attr(r, what) for _ in range(r.count(what)))),
    AttrKind.HINTS: lambda t, r, what: t.hints(r),
    AttrKind.TAGGED: lambda t, r, what: t.attr(r, what),
}
