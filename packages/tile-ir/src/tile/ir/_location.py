"""Source locations and debug info (the bytecode Debug section).

An op or function location is `None` (unknown), a `FileLoc` (file:line:col without a scope; written as
unknown, like NVIDIA's writer does), a `DILoc` (line in a scope) or a `CallSite` (an inlined helper's
location and where it was called). Scopes are `DISubprogram` / `DILexicalBlock`. All values are immutable
and compared structurally, so equal debug attributes are written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "CallSite",
    "DICompileUnit",
    "DIFile",
    "DILexicalBlock",
    "DILoc",
    "DIScope",
    "DISubprogram",
    "FileLoc",
    "Location",
]


@dataclass(frozen=True)
class DIFile:
    """A source file: `name` (base name) in `directory`."""

    name: str
    directory: str


@dataclass(frozen=True)
class DICompileUnit:
    """The compile unit rooted at `file`."""

    file: DIFile


@dataclass(frozen=True)
class DISubprogram:
    """A function scope; `flags` is written from 13.5 (always 0 today)."""

    file: DIFile
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnit
    scope_line: int
    flags: int = 0


@dataclass(frozen=True)
class DILexicalBlock:
    """A nested lexical scope."""

    scope: DIScope
    file: DIFile
    line: int
    column: int


DIScope: TypeAlias = "DISubprogram | DILexicalBlock"


@dataclass(frozen=True)
class DILoc:
    """A line and column of `filename` inside `scope`."""

    scope: DIScope
    filename: str
    line: int
    column: int


@dataclass(frozen=True)
class CallSite:
    """`callee` location inlined at `caller`."""

    callee: Location
    caller: Location


@dataclass(frozen=True)
class FileLoc:
    """A bare file:line:col location (kept in memory; bytecode cannot carry it without a scope)."""

    filename: str
    line: int
    column: int


Location: TypeAlias = "DILoc | CallSite | FileLoc"
