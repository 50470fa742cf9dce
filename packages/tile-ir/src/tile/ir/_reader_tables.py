"""Reader-side tables: strings, types (decoded lazily with cycle detection), constants, debug attributes,
and self-contained attributes.

Invariant: every lookup validates its index and every decoded entry must consume its bytes exactly;
failures raise `BytecodeError` at the offending absolute offset.
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
from tile.ir._decoding import ByteReader
from tile.ir._encoding import INT64_MIN
from tile.ir._errors import BytecodeError
from tile.ir._types import (
    SCALARS,
    FunctionType,
    GatherScatterViewType,
    Padding,
    PartitionViewType,
    PointerAttr,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    Type,
    token,
)
from tile.ir._version import V13_3, V13_4, Version

__all__ = ["ReadTables"]

_SCALAR_BY_TAG = {s.tag: s for s in SCALARS}
_MAX_DEPTH = 64


class ReadTables:
    """Decoded tables of one file."""

    def __init__(self, data: bytes, version: Version) -> None:
        self.data = data
        self.version = version
        self.string_spans: list[tuple[int, int]] = []
        self.type_spans: list[tuple[int, int]] = []
        self.constant_spans: list[tuple[int, int]] = []
        self.debug_spans: list[tuple[int, int]] = []
        self._types: dict[int, Type] = {}
        self._in_progress: set[int] = set()

    def raw(self, spans: list[tuple[int, int]]) -> tuple[bytes, ...]:
        """The raw bytes of table entries."""
        return tuple(self.data[a:b] for a, b in spans)

    def string(self, r: ByteReader, what: str) -> str:
        """Read a string reference."""
        start = r.pos
        index = r.varint(what)
        if index >= len(self.string_spans):
            raise r.fail(f"{what}: string index {index} out of range ({len(self.string_spans)} strings)", start)
        a, b = self.string_spans[index]
        try:
            return self.data[a:b].decode("utf-8")
        except UnicodeDecodeError:
            raise BytecodeError(a, f"{what}: string {index} is not valid UTF-8") from None

    def constant(self, r: ByteReader, what: str) -> bytes:
        """Read a constant reference; returns the dense buffer."""
        start = r.pos
        index = r.varint(what)
        if index >= len(self.constant_spans):
            raise r.fail(f"{what}: constant index {index} out of range ({len(self.constant_spans)} constants)", start)
        a, b = self.constant_spans[index]
        entry = ByteReader(self.data, a, b)
        data = entry.take(entry.count("constant length"), "constant data")
        entry.expect_end("constant entry")
        if not data:
            raise BytecodeError(a, f"constant {index} is empty")
        return data

    def type_ref(self, r: ByteReader, what: str) -> Type:
        """Read a type reference."""
        start = r.pos
        index = r.varint(what)
        return self.type_at(index, start, what)

    def value_type_ref(self, r: ByteReader, what: str) -> Type:
        """Read a reference to the type of a value (an op result, block argument or parameter): not a function type,
        which no value of Tile IR has."""
        start = r.pos
        found = self.type_ref(r, what)
        if isinstance(found, FunctionType):
            raise BytecodeError(start, f"{what}: a value cannot have the function type {found}")
        return found

    def type_at(self, index: int, offset: int, what: str) -> Type:
        """Return type `index`, decoding it on first use."""
        found = self._types.get(index)
        if found is not None:
            return found
        if index >= len(self.type_spans):
            raise BytecodeError(offset, f"{what}: type index {index} out of range ({len(self.type_spans)} types)")
        if index in self._in_progress or len(self._in_progress) > _MAX_DEPTH:
            raise BytecodeError(offset, f"{what}: type {index} refers to itself")
        self._in_progress.add(index)
        a, b = self.type_spans[index]
        r = ByteReader(self.data, a, b)
        t = self._decode_type(r, index)
        r.expect_end(f"type {index}")
        self._in_progress.discard(index)
        self._types[index] = t
        return t

    def tile_ref(self, r: ByteReader, what: str) -> TileType:
        """Read a type reference that must be a tile type."""
        start = r.pos
        t = self.type_ref(r, what)
        if not isinstance(t, TileType):
            raise r.fail(f"{what}: expected a tile type, got {t}", start)
        return t

    def _scalar_ref(self, r: ByteReader, what: str) -> ScalarType:
        start = r.pos
        t = self.type_ref(r, what)
        if not isinstance(t, ScalarType):
            raise r.fail(f"{what}: expected a scalar element type, got {t}", start)
        return t

    def _decode_type(self, r: ByteReader, index: int) -> Type:
        start = r.pos
        tag = r.varint("type tag")
        scalar = _SCALAR_BY_TAG.get(tag)
        if scalar is not None:
            if scalar.since > self.version:
                raise r.fail(f"type {scalar} needs bytecode {scalar.since}+", start)
            return scalar
        decoder = _COMPOSITE.get(tag)
        if decoder is None or (tag in (20, 21) and self.version < V13_3):
            raise r.fail(f"unknown type tag {tag} for bytecode version {self.version}", start)
        return decoder(self, r)

    def _pointer(self, r: ByteReader) -> Type:
        flags = r.varint("pointer flags") if self.version >= V13_4 else 0
        pointee = self._scalar_ref(r, "pointee type")
        return PointerType(pointee, self._ptr_attr(r, flags))

    @staticmethod
    def _ptr_attr(r: ByteReader, flags: int) -> PointerAttr | None:
        if not flags & 1:
            return None
        start = r.pos
        value = r.byte("ptr attribute")
        if value not in PointerAttr._value2member_map_:
            raise r.fail(f"invalid integer value for enum type: {value} (pointer attribute)", start)
        return PointerAttr(value)

    def _tile(self, r: ByteReader) -> Type:
        start = r.pos
        elem = self.type_ref(r, "tile element type")
        if not isinstance(elem, (ScalarType, PointerType)):
            raise r.fail(f"tile element must be a number or pointer type, got {elem}", start)
        shape = r.int_list(8, "tile shape")
        if any(d <= 0 or d & (d - 1) for d in shape):
            raise r.fail(f"tile dimensions must be powers of two, got {list(shape)}", start)
        return TileType(shape, elem)

    def _tensor_view(self, r: ByteReader) -> Type:
        flags = r.varint("tensor_view flags") if self.version >= V13_4 else 0
        elem = self._scalar_ref(r, "tensor_view element type")
        shape = tuple(None if d == INT64_MIN else d for d in r.int_list(8, "tensor_view shape"))
        strides = tuple(None if s == INT64_MIN else s for s in r.int_list(8, "tensor_view strides"))
        if len(shape) != len(strides):
            raise r.fail(f"tensor_view has {len(shape)} dims but {len(strides)} strides")
        return TensorViewType(elem, shape, strides, self._ptr_attr(r, flags))

    def _tv_ref(self, r: ByteReader) -> TensorViewType:
        start = r.pos
        t = self.type_ref(r, "view tensor_view type")
        if not isinstance(t, TensorViewType):
            raise r.fail(f"a view needs a tensor_view type, got {t}", start)
        return t

    def _padding(self, r: ByteReader, present: bool) -> Padding | None:
        if not present:
            return None
        start = r.pos
        value = r.varint("padding value")
        if value not in Padding._value2member_map_:
            raise r.fail(f"invalid integer value for enum type: {value} (padding value)", start)
        return Padding(value)

    def _partition(self, r: ByteReader) -> Type:
        unified = self.version >= V13_3
        flags = r.varint("partition_view flags") if unified else 0
        tile_shape = r.int_list(4, "partition tile shape")
        tv = self._tv_ref(r)
        dim_map = r.int_list(4, "partition dim_map")
        if not unified:
            flags = r.varint("partition padding flag")
        return PartitionViewType(tile_shape, tv, dim_map, self._padding(r, bool(flags & 1)))

    def _strided(self, r: ByteReader) -> Type:
        flags = r.varint("strided_view flags")
        tile_shape = r.int_list(4, "strided tile shape")
        steps = r.int_list(4, "traversal strides")
        tv = self._tv_ref(r)
        dim_map = r.int_list(4, "strided dim_map")
        return StridedViewType(tile_shape, steps, tv, dim_map, self._padding(r, bool(flags & 1)))

    def _gather(self, r: ByteReader) -> Type:
        flags = r.varint("gather_scatter_view flags")
        tile_shape = r.int_list(4, "gather tile shape")
        tv = self._tv_ref(r)
        sparse = r.varint("sparse_dim")
        return GatherScatterViewType(tile_shape, tv, sparse, self._padding(r, bool(flags & 1)))

    def _function(self, r: ByteReader) -> Type:
        ins = tuple(self.value_type_ref(r, "parameter type") for _ in range(r.count("parameter count")))
        outs = tuple(self.value_type_ref(r, "result type") for _ in range(r.count("result count")))
        return FunctionType(ins, outs)

    def attr(self, r: ByteReader, what: str, depth: int = 0) -> Attr:
        """Read a self-contained (tagged) attribute."""
        start = r.pos
        tag = r.varint(f"{what} tag")
        if depth > _MAX_DEPTH:
            raise r.fail(f"{what}: attributes nested too deeply", start)
        decoder = _ATTRS.get(tag)
        if decoder is None:
            raise r.fail(f"unsupported AttributeTag {tag} for self-contained attribute ({what})", start)
        attr: Attr = decoder(self, r, depth)
        return attr

    def dictionary(self, r: ByteReader, depth: int) -> tuple[tuple[str, Attr], ...]:
        """Read an untagged dictionary: count then (key, tagged value) pairs."""
        items = []
        for _ in range(r.count("dictionary size", 2)):
            key = self.string(r, "dictionary key")
            items.append((key, self.attr(r, f"value of {key!r}", depth + 1)))
        return tuple(items)

    def hints(self, r: ByteReader, depth: int = 0) -> OptimizationHints:
        """Read untagged optimization hints (arch key -> dictionary)."""
        start = r.pos
        by_arch = []
        for key, value in self.dictionary(r, depth):
            if not isinstance(value, DictAttr):
                raise r.fail(f"optimization hints for {key!r} must be a dictionary", start)
            by_arch.append((key, value))
        return OptimizationHints(tuple(by_arch))

    def _integer(self, r: ByteReader, depth: int) -> Attr:
        t = self._scalar_ref(r, "integer attribute type")
        return IntegerAttr(t, r.varint("integer attribute value"))

    def _float(self, r: ByteReader, depth: int) -> Attr:
        start = r.pos
        t = self._scalar_ref(r, "float attribute type")
        if not t.is_float:
            raise r.fail(f"float attribute with non-float type {t}", start)
        width = 19 if t.name == "tf32" else t.bits
        bits = r.byte("float bits") if width <= 8 else r.svarint("float bits") & ((1 << width) - 1)
        return FloatAttr(t, bits)

    def _dense(self, r: ByteReader, depth: int) -> Attr:
        return DenseElementsAttr(self.tile_ref(r, "dense elements type"), self.constant(r, "dense elements"))

    def _div_by(self, r: ByteReader, depth: int) -> Attr:
        divisor = r.varint("div_by divisor")
        flags = r.byte("div_by flags")
        every = r.svarint("div_by every") if flags & 1 else None
        along = r.svarint("div_by along") if flags & 2 else None
        return DivBy(divisor, every, along)

    def _bounded(self, r: ByteReader, depth: int) -> Attr:
        flags = r.byte("bounded flags")
        lb = r.svarint("bounded lb") if flags & 1 else None
        ub = r.svarint("bounded ub") if flags & 2 else None
        return Bounded(lb, ub)

    def _array(self, r: ByteReader, depth: int) -> Attr:
        return ArrayAttr(tuple(self.attr(r, "array element", depth + 1) for _ in range(r.count("array size"))))


_COMPOSITE = {
    12: ReadTables._pointer,
    13: ReadTables._tile,
    14: ReadTables._tensor_view,
    15: ReadTables._partition,
    16: ReadTables._function,
    17: lambda self, r: token,
    20: ReadTables._gather,
    21: ReadTables._strided,
}
_ATTRS = {
    1: ReadTables._integer,
    2: ReadTables._float,
    3: lambda self, r, depth: BoolAttr(bool(r.byte("bool attribute"))),
    4: lambda self, r, depth: TypeAttr(self.type_ref(r, "type attribute")),
    5: lambda self, r, depth: StringAttr(self.string(r, "string attribute")),
    6: ReadTables._array,
    7: ReadTables._dense,
    8: ReadTables._div_by,
    9: lambda self, r, depth: SameElements(r.int_list(8, "same_elements values")),
    10: lambda self, r, depth: DictAttr(self.dictionary(r, depth)),
    11: lambda self, r, depth: self.hints(r, depth),
    12: ReadTables._bounded,
}
