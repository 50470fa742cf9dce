"""Writer-side tables: strings, types, constants and debug attributes, encoded for one bytecode version.

Invariants: every table dedupes by encoded bytes and assigns ids in first-use order (or in the order seeded
from a `Layout` when reproducing a file); a type's dependencies are interned before the type itself; a
type or attribute that the version cannot express raises `UnsupportedVersionError`.
"""

from __future__ import annotations

from tile.ir._attrs import (
    ArrayAttr,
    Attr,
    BoolAttr,
    Bounded,
    DenseElementsAttr,
    DictAttr,
    DivBy,
    FloatAttr,
    IntegerAttr,
    OptimizationHints,
    SameElements,
    StringAttr,
    TypeAttr,
)
from tile.ir._encoding import INT64_MIN, ByteWriter, Interner
from tile.ir._errors import UnsupportedVersionError
from tile.ir._location import CallSite, DICompileUnit, DIFile, DILexicalBlock, DILoc, DISubprogram, Location
from tile.ir._types import (
    FunctionType,
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
)
from tile.ir._version import V13_3, V13_4, V13_5, Version

__all__ = ["ATTR_TAGS", "TYPE_TAGS", "TableSet"]

TYPE_TAGS = {"ptr": 12, "tile": 13, "tensor_view": 14, "partition_view": 15, "function": 16, "token": 17}
TYPE_TAGS |= {"gather_scatter_view": 20, "strided_view": 21}
ATTR_TAGS = {IntegerAttr: 1, FloatAttr: 2, BoolAttr: 3, TypeAttr: 4, StringAttr: 5, ArrayAttr: 6}
ATTR_TAGS |= {DenseElementsAttr: 7, DivBy: 8, SameElements: 9, DictAttr: 10, OptimizationHints: 11, Bounded: 12}


def _float_width(t: ScalarType) -> int:
    return 19 if t.name == "tf32" else t.bits


class TableSet:
    """The interned tables of one module being written at `version`."""

    def __init__(self, version: Version) -> None:
        self.version = version
        self.strings = Interner()
        self.types = Interner()
        self.constants = Interner()
        self.debug = Interner(first_id=1)

    def string(self, text: str) -> int:
        """Id of `text` in the string table."""
        return self.strings.intern(text.encode())

    def constant(self, data: bytes) -> int:
        """Id of a dense-elements buffer in the constant table."""
        entry = ByteWriter()
        entry.varint(len(data))
        entry.raw(data)
        return self.constants.intern(bytes(entry.buf))

    def _need(self, since: Version, what: str) -> None:
        if self.version < since:
            raise UnsupportedVersionError(f"{what} needs bytecode {since}+, but the target is {self.version}")

    def type(self, t: Type) -> int:
        """Id of `t` in the type table (dependencies first)."""
        out = ByteWriter()
        if isinstance(t, ScalarType):
            self._need(t.since, f"type {t}")
            out.varint(t.tag)
        elif isinstance(t, TokenType):
            out.varint(TYPE_TAGS["token"])
        elif isinstance(t, TileType):
            elem = self.type(t.element)
            out.varint(TYPE_TAGS["tile"])
            out.varint(elem)
            out.int_list(t.shape, 8)
        elif isinstance(t, FunctionType):
            ins, outs = [self.type(x) for x in t.inputs], [self.type(x) for x in t.results]
            out.varint(TYPE_TAGS["function"])
            out.varints(ins)
            out.varints(outs)
        else:
            self._composite(t, out)
        return self.types.intern(bytes(out.buf))

    def _composite(self, t: Type, out: ByteWriter) -> None:
        if isinstance(t, (PointerType, TensorViewType)):
            self._pointer_like(t, out)
        elif isinstance(t, PartitionViewType):
            self._partition(t, out)
        elif isinstance(t, StridedViewType):
            self._need(V13_3, "strided_view")
            tv = self.type(t.tensor_view)
            out.varint(TYPE_TAGS["strided_view"])
            out.varint(int(t.padding is not None))
            out.int_list(t.tile_shape, 4)
            out.int_list(t.traversal_strides, 4)
            out.varint(tv)
            out.int_list(t.dim_map, 4)
            self._padding(t.padding, out)
        elif isinstance(t, GatherScatterViewType):
            self._need(V13_3, "gather_scatter_view")
            tv = self.type(t.tensor_view)
            out.varint(TYPE_TAGS["gather_scatter_view"])
            out.varint(int(t.padding is not None))
            out.int_list(t.tile_shape, 4)
            out.varint(tv)
            out.varint(t.sparse_dim)
            self._padding(t.padding, out)
        else:
            raise UnsupportedVersionError(f"cannot encode type {t!r}")

    @staticmethod
    def _padding(padding: object, out: ByteWriter) -> None:
        if padding is not None:
            assert isinstance(padding, int)
            out.varint(padding)

    def _pointer_like(self, t: PointerType | TensorViewType, out: ByteWriter) -> None:
        if t.ptr_attr is not None:
            self._need(V13_4, "ptr_attr on pointer/tensor_view types")
        elem = self.type(t.pointee if isinstance(t, PointerType) else t.element)
        out.varint(TYPE_TAGS["ptr" if isinstance(t, PointerType) else "tensor_view"])
        if self.version >= V13_4:
            out.varint(int(t.ptr_attr is not None))
        out.varint(elem)
        if isinstance(t, TensorViewType):
            out.int_list([INT64_MIN if d is None else d for d in t.shape], 8)
            out.int_list([INT64_MIN if s is None else s for s in t.strides], 8)
        if t.ptr_attr is not None:
            out.byte(t.ptr_attr)

    def _partition(self, t: PartitionViewType, out: ByteWriter) -> None:
        tv = self.type(t.tensor_view)
        out.varint(TYPE_TAGS["partition_view"])
        unified = self.version >= V13_3
        if unified:
            out.varint(int(t.padding is not None))
        out.int_list(t.tile_shape, 4)
        out.varint(tv)
        out.int_list(t.dim_map, 4)
        if not unified:
            out.varint(int(t.padding is not None))
        self._padding(t.padding, out)

    def attr(self, a: Attr, out: ByteWriter) -> None:
        """Append the self-contained (tagged) encoding of `a`."""
        out.varint(ATTR_TAGS[type(a)])
        self.attr_body(a, out)

    def attr_body(self, a: Attr, out: ByteWriter) -> None:
        """Append the payload of `a` without its tag."""
        if isinstance(a, IntegerAttr):
            out.varint(self.type(a.type))
            out.varint(a.value & ((1 << max(a.type.bits, 1)) - 1))
        elif isinstance(a, FloatAttr):
            out.varint(self.type(a.type))
            out.apint(a.bits, _float_width(a.type))
        elif isinstance(a, BoolAttr):
            out.byte(int(a.value))
        elif isinstance(a, TypeAttr):
            out.varint(self.type(a.value))
        elif isinstance(a, StringAttr):
            out.varint(self.string(a.value))
        elif isinstance(a, ArrayAttr):
            out.varint(len(a.elements))
            for e in a.elements:
                self.attr(e, out)
        elif isinstance(a, DenseElementsAttr):
            out.varint(self.type(a.type))
            out.varint(self.constant(a.data))
        elif isinstance(a, (DictAttr, OptimizationHints)):
            self.dictionary(a.items if isinstance(a, DictAttr) else a.by_arch, out)
        else:
            self._predicate(a, out)

    def dictionary(
        self, items: tuple[tuple[str, Attr], ...] | tuple[tuple[str, DictAttr], ...], out: ByteWriter
    ) -> None:
        """Append an untagged dictionary: count, then (key string, tagged value) pairs."""
        out.varint(len(items))
        for key, value in items:
            out.varint(self.string(key))
            self.attr(value, out)

    def _predicate(self, a: Attr, out: ByteWriter) -> None:
        if isinstance(a, DivBy):
            out.varint(a.divisor)
            out.byte(int(a.every is not None) | int(a.along is not None) << 1)
            for v in (a.every, a.along):
                if v is not None:
                    out.svarint(v)
        elif isinstance(a, SameElements):
            out.int_list(a.values, 8)
        elif isinstance(a, Bounded):
            out.byte(int(a.lb is not None) | int(a.ub is not None) << 1)
            for v in (a.lb, a.ub):
                if v is not None:
                    out.svarint(v)
        else:
            raise UnsupportedVersionError(f"cannot encode attribute {a!r}")

    def location(self, loc: Location | None) -> int:
        """Debug-table id of an op/function location (0 = unknown; bare file locations are unknown)."""
        if isinstance(loc, DILoc):
            scope = self._debug_entry(loc.scope)
            return self._debug_raw(4, scope, self.string(loc.filename), loc.line, loc.column)
        if isinstance(loc, CallSite):
            return self._debug_raw(6, self.location(loc.callee), self.location(loc.caller))
        return 0

    def _debug_entry(self, node: object) -> int:
        if isinstance(node, DIFile):
            return self._debug_raw(2, self.string(node.name), self.string(node.directory))
        if isinstance(node, DICompileUnit):
            return self._debug_raw(1, self._debug_entry(node.file))
        if isinstance(node, DILexicalBlock):
            scope, file = self._debug_entry(node.scope), self._debug_entry(node.file)
            return self._debug_raw(3, scope, file, node.line, node.column)
        if isinstance(node, DISubprogram):
            file, unit = self._debug_entry(node.file), self._debug_entry(node.compile_unit)
            fields = [file, node.line, self.string(node.name), self.string(node.linkage_name), unit, node.scope_line]
            return self._debug_raw(5, *fields, *([node.flags] if self.version >= V13_5 else []))
        raise UnsupportedVersionError(f"cannot encode debug scope {node!r}")

    def _debug_raw(self, tag: int, *fields: int) -> int:
        out = ByteWriter()
        out.varint(tag)
        for f in fields:
            out.varint(f)
        return self.debug.intern(bytes(out.buf))
