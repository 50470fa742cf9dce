"""Bytecode reader: Tile IR bytecode 13.1-13.5 into the `tile.ir` data model.

`read_bytecode(data)` validates as it goes and raises `BytecodeError(offset, reason)` for malformed input,
never another exception (an unexpected internal failure is reported as a `BytecodeError` at the last known
offset) and never loops without consuming input. The returned module carries a `Layout`, so writing it back
at the file's version reproduces the input bytes when the input was written canonically (minimal varints,
0xCB padding, one location run per function in order).
"""

from __future__ import annotations

from typing import TypeVar

from tile.ir._attrs import ArrayAttr, DenseElementsAttr, OptimizationHints
from tile.ir._decoding import ByteReader, split_table
from tile.ir._encoding import MAGIC
from tile.ir._enums import SymbolVisibility
from tile.ir._errors import BytecodeError
from tile.ir._ir import Function, Global, Module
from tile.ir._layout import SECTION_IDS, Layout
from tile.ir._reader_debug import DebugInfo
from tile.ir._reader_ops import BodyReader
from tile.ir._reader_tables import ReadTables
from tile.ir._types import FunctionType
from tile.ir._version import SUPPORTED_VERSIONS, V13_3, V13_5, Version

__all__ = ["read_bytecode", "read_version"]

_A = TypeVar("_A", ArrayAttr, OptimizationHints)

_REQUIRED_ALIGNMENT = {1: 4, 2: 8, 3: 8, 4: 8, 5: 4}
_SECTION_NAMES = {v: k for k, v in SECTION_IDS.items()}


def read_version(data: bytes) -> Version:
    """Return the bytecode version in the header of `data` (checking magic, version and preview tag)."""
    r = ByteReader(bytes(data))
    if r.remaining < 12 or r.take(8, "magic") != MAGIC:
        raise BytecodeError(0, "input does not correspond to Tile IR bytecode (bad magic number)")
    major, minor, tag = r.byte(), r.byte(), r.fixed(2, "version tag")
    version = Version(major, minor)
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise BytecodeError(8, f"unsupported Tile IR bytecode version {major}.{minor}; supported: {supported}")
    if tag:
        raise BytecodeError(10, f"public-preview bytecode (tag {tag}) is not supported; write tag 0")
    return version


def read_bytecode(data: bytes | bytearray | memoryview) -> Module:
    """Decode Tile IR bytecode into a `Module`.

    Parameters
    ----------
    data
        The whole file.

    Returns
    -------
    Module
        The decoded module; op locations come from the Debug section, and ``module.layout`` lets
        `write_bytecode` reproduce `data` at its own version.

    Raises
    ------
    BytecodeError
        The input is not well-formed bytecode of a supported version; ``offset`` and ``reason`` say where
        and what.
    """
    blob = bytes(data)
    reader = _Reader(blob)
    try:
        return reader.read()
    except BytecodeError:
        raise
    except (RecursionError, MemoryError, ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        raise BytecodeError(reader.last_offset, f"malformed input ({type(exc).__name__}: {exc})") from None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.last_offset = 0

    def read(self) -> Module:
        version = read_version(self.data)
        sections = self._sections()
        tables = ReadTables(self.data, version)
        self._tables(sections, tables)
        debug = DebugInfo(tables)
        if 3 in sections:
            debug.parse(*sections[3][:2])
        module = Module()
        if 7 in sections:
            module.producer = self._producer(sections[7], tables, version)
        if 6 in sections:
            module.globals = self._globals(sections[6], tables, version)
        if 2 not in sections:
            raise BytecodeError(12, "function section is mandatory")
        module.functions = self._functions(sections[2], tables, debug)
        module.layout = Layout(
            version,
            tuple((sid, align) for sid, (_, _, align) in sections.items()),
            tables.raw(tables.string_spans),
            tables.raw(tables.type_spans),
            tables.raw(tables.constant_spans),
            tables.raw(tables.debug_spans),
        )
        return module

    def _sections(self) -> dict[int, tuple[int, int, int | None]]:
        r = ByteReader(self.data, 12)
        sections: dict[int, tuple[int, int, int | None]] = {}
        while True:
            start = self.last_offset = r.pos
            head = r.byte("section header")
            sid = head & 0x7F
            if sid == 0:
                if r.remaining:
                    raise r.fail("end section is not the last section", start)
                break
            if sid not in _SECTION_NAMES:
                raise r.fail(f"unknown section ID: {sid}", start)
            if sid in sections:
                raise r.fail(f"duplicate section ID: {sid}", start)
            length = r.varint("section length")
            alignment = self._alignment(r, sid, head, start)
            if length > r.remaining:
                raise r.fail(f"section length {length} exceeds remaining data size {r.remaining}", start)
            sections[sid] = (r.pos, r.pos + length, alignment)
            r.pos += length
        if 1 not in sections:
            raise BytecodeError(len(self.data) - 1, "string section is mandatory")
        return sections

    @staticmethod
    def _alignment(r: ByteReader, sid: int, head: int, start: int) -> int | None:
        required = _REQUIRED_ALIGNMENT.get(sid)
        if not head & 0x80:
            if required:
                raise r.fail(f"section {sid} must have alignment that is a multiple of {required} bytes", start)
            return None
        alignment = r.varint("section alignment")
        if alignment == 0 or alignment & (alignment - 1) or alignment > 1 << 16:
            raise r.fail(f"section alignment {alignment} is not a power of two", start)
        if required and alignment % required:
            raise r.fail(f"section {sid} must have alignment that is a multiple of {required} bytes", start)
        r.skip_padding(alignment, 0)
        return alignment

    def _tables(self, sections: dict[int, tuple[int, int, int | None]], tables: ReadTables) -> None:
        spans = {1: (4, "string"), 5: (4, "type"), 4: (8, "constant")}
        for sid, (width, what) in spans.items():
            if sid in sections:
                start, end, _ = sections[sid]
                self.last_offset = start
                setattr(tables, f"{what}_spans", split_table(self.data, start, end, width, what))

    def _producer(self, span: tuple[int, int, int | None], tables: ReadTables, version: Version) -> str:
        r = ByteReader(self.data, span[0], span[1])
        if version < V13_3:
            raise r.fail(f"producer section needs bytecode 13.3+, file is {version}")
        producer = tables.string(r, "producer")
        r.expect_end("producer section")
        return producer

    def _globals(self, span: tuple[int, int, int | None], tables: ReadTables, version: Version) -> list[Global]:
        r = ByteReader(self.data, span[0], span[1])
        out = []
        for _ in range(r.count("global count", 4)):
            name = tables.string(r, "global name")
            gtype = tables.tile_ref(r, f"type of global {name!r}")
            value = DenseElementsAttr(gtype, tables.constant(r, f"value of global {name!r}"))
            alignment = r.varint("global alignment")
            visibility, constant = SymbolVisibility.PUBLIC, False
            if version >= V13_3:
                start = r.pos
                vis = r.varint("global visibility")
                if vis > 1:
                    raise r.fail(f"invalid integer value for enum type: {vis} (symbol visibility)", start)
                visibility, constant = SymbolVisibility(vis), bool(r.varint("global constant flag"))
            out.append(Global(name, value, alignment, constant, visibility))
        r.expect_end("global section")
        return out

    def _functions(self, span: tuple[int, int, int | None], tables: ReadTables, debug: DebugInfo) -> list[Function]:
        r = ByteReader(self.data, span[0], span[1])
        out = [self._function(r, tables, debug) for _ in range(r.count("function count", 4))]
        r.expect_end("function section")
        return out

    def _function(self, r: ByteReader, tables: ReadTables, debug: DebugInfo) -> Function:
        start = self.last_offset = r.pos
        name = tables.string(r, "function name")
        sig = tables.type_ref(r, f"signature of {name!r}")
        if not isinstance(sig, FunctionType) or sig.results:
            raise r.fail(f"function {name!r} needs a function type without results, got {sig}", start)
        flags = r.byte("function flags")
        if not flags & 0x02:
            raise r.fail(f"function {name!r} is not an entry (non-entry functions are a preview feature)", start)
        loc_offset = r.pos
        loc_index = r.varint("function location index")
        hints: OptimizationHints | None = None
        arg_attrs: ArrayAttr | None = None
        if tables.version >= V13_5:
            # 13.5 always writes both; empty ones mean "none", as in files of older versions
            hints, arg_attrs = self._typed(r, tables, OptimizationHints), self._typed(r, tables, ArrayAttr)
            hints = hints if hints.by_arch else None
            arg_attrs = arg_attrs if arg_attrs.elements else None
        elif flags & 0x04:
            hints = self._typed(r, tables, OptimizationHints)
        body_len = r.count("function body length")
        run = debug.run(loc_index, loc_offset, name)
        fn = Function(
            name, sig, hints=hints, arg_attrs=arg_attrs, loc=debug.location(run[0], loc_offset) if run else None
        )
        body = ByteReader(self.data, r.pos, r.pos + body_len)
        BodyReader(tables, debug, run, fn.params).ops_until(body, fn.body)
        if run and len(run) != 1 + sum(1 for _ in fn.walk()):
            raise r.fail(
                f"debug info of {name!r} has {len(run)} locations for {sum(1 for _ in fn.walk())} ops", loc_offset
            )
        r.pos += body_len
        return fn

    @staticmethod
    def _typed(r: ByteReader, tables: ReadTables, kind: type[_A]) -> _A:
        start = r.pos
        attr = tables.attr(r, "function attribute")
        if not isinstance(attr, kind):
            raise r.fail(f"expected {kind.__name__} in the function record, got {type(attr).__name__}", start)
        return attr
