"""Reader for the Debug section: per-function location runs and the debug attribute table.

A run belongs to the function whose ``locIndex`` points at it (1-based): element 0 is the function's own
location, then one entry per op in pre-order. Attribute ids are 1-based; 0 means unknown.
"""

from __future__ import annotations

from tile.ir._decoding import ByteReader, split_table
from tile.ir._errors import BytecodeError
from tile.ir._location import CallSite, DICompileUnit, DIFile, DILexicalBlock, DILoc, DISubprogram, Location
from tile.ir._reader_tables import ReadTables
from tile.ir._version import V13_5

__all__ = ["DebugInfo"]


class DebugInfo:
    """The decoded Debug section (or an empty one)."""

    def __init__(self, tables: ReadTables) -> None:
        self.tables = tables
        self.runs: list[list[int]] = []
        self._cache: dict[int, object] = {}
        self._depth = 0

    def parse(self, start: int, end: int) -> None:
        """Parse the section payload ``data[start:end]``."""
        r = ByteReader(self.tables.data, start, end)
        n_funcs = r.count("debug function count", 4)
        r.skip_padding(4, start)
        firsts = [r.fixed(4, "debug function index") for _ in range(n_funcs)]
        n_ids = r.count("debug index count", 8)
        r.skip_padding(8, start)
        ids = [r.fixed(8, "debug attribute id") for _ in range(n_ids)]
        bounds = [*firsts, n_ids]
        for i in range(n_funcs):
            if not 0 <= bounds[i] <= bounds[i + 1] <= n_ids:
                raise r.fail(f"debug run {i} has invalid bounds {bounds[i]}..{bounds[i + 1]}", start)
        self.runs = [ids[bounds[i] : bounds[i + 1]] for i in range(n_funcs)]
        self.tables.debug_spans = split_table(self.tables.data, r.pos, end, 4, "debug attribute")

    def run(self, loc_index: int, offset: int, name: str) -> list[int]:
        """The location run of the function with `loc_index` (empty for 0)."""
        if loc_index == 0:
            return []
        if loc_index > len(self.runs):
            raise BytecodeError(offset, f"failed to read function location for {name!r} (index {loc_index})")
        return self.runs[loc_index - 1]

    def location(self, attr_id: int, offset: int) -> Location | None:
        """The location with debug attribute id `attr_id` (None for 0)."""
        if attr_id == 0:
            return None
        node = self._node(attr_id, offset)
        if not isinstance(node, (DILoc, CallSite)):
            raise BytecodeError(
                offset, f"failed to read operation location: debug attribute {attr_id} is not a location"
            )
        return node

    def _node(self, attr_id: int, offset: int) -> object:
        found = self._cache.get(attr_id)
        if found is not None:
            return found
        spans = self.tables.debug_spans
        if not 1 <= attr_id <= len(spans) or self._depth > 64:
            raise BytecodeError(offset, f"debug attribute id {attr_id} is out of range or cyclic")
        self._depth += 1
        a, b = spans[attr_id - 1]
        r = ByteReader(self.tables.data, a, b)
        node = self._decode(r)
        r.expect_end(f"debug attribute {attr_id}")
        self._depth -= 1
        self._cache[attr_id] = node
        return node

    def _ref(self, r: ByteReader, kind: type | tuple[type, ...], what: str) -> object:
        start = r.pos
        node = self._node(r.varint(what), start)
        if not isinstance(node, kind):
            raise r.fail(f"{what} refers to a {type(node).__name__}", start)
        return node

    def _decode(self, r: ByteReader) -> object:
        start = r.pos
        tag = r.varint("debug attribute tag")
        s = self.tables.string
        if tag == 1:
            return DICompileUnit(self._ref(r, DIFile, "compile unit file"))  # type: ignore[arg-type]  # checked by _ref
        if tag == 2:
            return DIFile(s(r, "file name"), s(r, "file directory"))
        if tag == 3:
            scope = self._ref(r, (DISubprogram, DILexicalBlock), "lexical block scope")
            file = self._ref(r, DIFile, "lexical block file")
            return DILexicalBlock(scope, file, r.varint("line"), r.varint("column"))  # type: ignore[arg-type]  # checked by _ref
        if tag == 4:
            scope = self._ref(r, (DISubprogram, DILexicalBlock), "location scope")
            return DILoc(scope, s(r, "location file"), r.varint("line"), r.varint("column"))  # type: ignore[arg-type]  # checked by _ref
        if tag == 5:
            return self._subprogram(r)
        if tag == 6:
            callee = self._ref(r, (DILoc, CallSite), "call site callee")
            caller = self._ref(r, (DILoc, CallSite), "call site caller")
            return CallSite(callee, caller)  # type: ignore[arg-type]  # checked by _ref
        raise r.fail(f"unknown debug attribute tag {tag}", start)

    def _subprogram(self, r: ByteReader) -> DISubprogram:
        file = self._ref(r, DIFile, "subprogram file")
        line = r.varint("line")
        name, linkage = self.tables.string(r, "subprogram name"), self.tables.string(r, "linkage name")
        unit = self._ref(r, DICompileUnit, "subprogram compile unit")
        scope_line = r.varint("scope line")
        flags = r.varint("subprogram flags") if self.tables.version >= V13_5 else 0
        return DISubprogram(file, line, name, linkage, unit, scope_line, flags)  # type: ignore[arg-type]  # checked by _ref
