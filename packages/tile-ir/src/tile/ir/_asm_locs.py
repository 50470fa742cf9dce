"""Locations in assembly text: the ``loc(...)`` suffixes and ``#alias = ...`` lines of ``tileirdisasm -g``.

``tileirdisasm -g`` ends an op (and a function, after its closing brace) with ``loc(#locN)`` and defines the
aliases after the last function: ``#loc3 = loc("k.py":12:8)``, ``#di_file = #cuda_tile.di_file<"k.py" in
"/src">``, ``#di_subprogram = #cuda_tile.di_subprogram<file = ..., line = 3, name = "k", linkageName = "k",
compileUnit = ..., scopeLine = 3>``, ``#loc40 = #cuda_tile.di_loc<#loc3 in #di_subprogram>``, ``#loc75 =
loc(callsite(#loc41 at #loc40))``. `Locations` resolves these (in any order, each once) into the data model's
`DILoc` / `CallSite` / `FileLoc` and scopes; ``loc(unknown)`` is None.
"""

from __future__ import annotations

import re
from typing import TypeVar

from tile.ir._lexer import Lexer
from tile.ir._location import (
    CallSite,
    DICompileUnit,
    DIFile,
    DILexicalBlock,
    DILoc,
    DISubprogram,
    FileLoc,
    Location,
)

__all__ = ["Locations", "alias_section_start"]

_T = TypeVar("_T")

_ALIAS_LINE = re.compile(r"^#([A-Za-z_][A-Za-z0-9_$.]*)[ \t]*=[ \t]*", re.M)


def alias_section_start(text: str) -> int:
    """Offset of the first ``#alias = ...`` line (``len(text)`` when there is none)."""
    m = _ALIAS_LINE.search(text)
    return m.start() if m else len(text)


class Locations:
    """The alias definitions of one text, resolved on demand."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.defs = {m.group(1): m.end() for m in _ALIAS_LINE.finditer(text)}
        self.values: dict[str, object] = {}
        self.resolving: set[str] = set()

    # --- aliases ------------------------------------------------------------------------------------

    def alias(self, lex: Lexer) -> object:
        """Consume ``#name`` and return what it stands for."""
        start = lex.pos
        lex.expect("#")
        name = lex.keyword("an alias name")
        if name in self.values:
            return self.values[name]
        if name not in self.defs:
            raise lex.error(f"undefined alias '#{name}'", start)
        if name in self.resolving:
            raise lex.error(f"alias '#{name}' refers to itself", start)
        self.resolving.add(name)
        inner = Lexer(self.text, self.filename)
        inner.pos = self.defs[name]
        value = self.attribute(inner)
        self.resolving.discard(name)
        self.values[name] = value
        return value

    def attribute(self, lex: Lexer) -> object:
        """A location or debug attribute: ``loc(...)``, ``#cuda_tile.di_*<...>`` or ``#alias``."""
        lex.skip()
        if lex.at("loc"):
            return self.location(lex)
        if not lex.text.startswith("#cuda_tile.", lex.pos):
            return self.alias(lex)
        start = lex.pos
        lex.expect("#")
        kind = lex.keyword().removeprefix("cuda_tile.")
        lex.expect("<")
        if kind == "di_loc":
            where = self.attribute(lex)
            lex.expect("in")
            scope = self.attribute(lex)
            lex.expect(">")
            if not isinstance(where, FileLoc) or not isinstance(scope, (DISubprogram, DILexicalBlock)):
                raise lex.error("di_loc needs a file location in a subprogram or lexical block", start)
            return DILoc(scope, where.filename, where.line, where.column)
        if kind == "di_file":
            name = lex.string()
            lex.expect("in")
            directory = lex.string()
            lex.expect(">")
            return DIFile(name, directory)
        fields = self._fields(lex)
        return self._scope(kind, fields, lex, start)

    def _fields(self, lex: Lexer) -> dict[str, object]:
        fields: dict[str, object] = {}
        while not lex.accept(">"):
            if fields:
                lex.expect(",")
            key = lex.keyword("a field name")
            lex.expect("=")
            lex.skip()
            if lex.text.startswith('"', lex.pos):
                fields[key] = lex.string()
            elif lex.text.startswith("#", lex.pos):
                fields[key] = self.attribute(lex)
            else:
                fields[key] = lex.integer()
        return fields

    def _scope(self, kind: str, f: dict[str, object], lex: Lexer, start: int) -> object:
        def field(key: str, type_: type[_T]) -> _T:
            value = f.get(key)
            if not isinstance(value, type_):
                raise lex.error(f"'#cuda_tile.{kind}' needs field '{key}' ({type_.__name__})", start)
            return value

        if kind == "di_compile_unit":
            return DICompileUnit(field("file", DIFile))
        if kind == "di_subprogram":
            return DISubprogram(
                field("file", DIFile),
                field("line", int),
                field("name", str),
                field("linkageName", str),
                field("compileUnit", DICompileUnit),
                field("scopeLine", int),
                field("flags", int) if "flags" in f else 0,
            )
        if kind == "di_lexical_block":
            scope = f.get("scope")
            if not isinstance(scope, (DISubprogram, DILexicalBlock)):
                raise lex.error("'#cuda_tile.di_lexical_block' needs a 'scope'", start)
            return DILexicalBlock(scope, field("file", DIFile), field("line", int), field("column", int))
        raise lex.error(f"unknown debug attribute '#cuda_tile.{kind}'", start)

    # --- loc(...) -----------------------------------------------------------------------------------

    def location(self, lex: Lexer) -> object:
        """Consume ``loc(...)``; returns a location, a `FileLoc` or None (unknown)."""
        lex.expect("loc")
        lex.expect("(")
        value = self._inner(lex)
        lex.expect(")")
        return value

    def _inner(self, lex: Lexer) -> object:
        lex.skip()
        if lex.accept("unknown"):
            return None
        if lex.accept("callsite"):
            lex.expect("(")
            callee = self._inner(lex)
            lex.expect("at")
            caller = self._inner(lex)
            lex.expect(")")
            if not isinstance(callee, (DILoc, CallSite, FileLoc)) or not isinstance(caller, (DILoc, CallSite, FileLoc)):
                raise lex.error("callsite needs two known locations")
            return CallSite(callee, caller)
        if lex.text.startswith('"', lex.pos):
            filename = lex.string()
            lex.expect(":")
            line = lex.integer()
            lex.expect(":")
            return FileLoc(filename, line, lex.integer())
        return self.attribute(lex)

    def optional(self, lex: Lexer) -> Location | None:
        """A trailing ``loc(...)`` if one comes next, else None."""
        if not lex.at("loc"):
            return None
        start = lex.pos
        value = self.location(lex)
        if value is not None and not isinstance(value, (DILoc, CallSite, FileLoc)):
            raise lex.error("expected an op location (a file location, di_loc or callsite)", start)
        return value
