"""Diagnostics for kernel code: ``CompileError`` with the user's file:line:col and a caret under the culprit.

Invariants: a message names only things the user wrote (their identifiers, types in kernel-language spelling) and
never a compiler module, frame or internal class; the rendered text is self-contained (it carries the source line,
so it survives pickling into another process where the file may not exist); every error pickles.
"""

from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass

from tile.compiler._errors import TileError

__all__ = ["CompileError", "SourceLoc"]


@dataclass(frozen=True)
class SourceLoc:
    """A span in user code: 1-based line, 0-based columns (as Python's ``ast`` reports them)."""

    filename: str
    line: int
    col: int
    end_col: int | None = None
    function: str = ""
    source_line: str = ""

    @classmethod
    def of(cls, node: ast.AST, filename: str, line_offset: int, function: str = "") -> SourceLoc:
        """The location of ``node`` parsed from a snippet that starts ``line_offset`` lines into ``filename``."""
        line = getattr(node, "lineno", 1) + line_offset
        col = getattr(node, "col_offset", 0)
        end_line = getattr(node, "end_lineno", None)
        end_col = getattr(node, "end_col_offset", None)
        if end_line is not None and end_line + line_offset != line:
            end_col = None
        text = linecache.getline(filename, line).rstrip("\n")
        return cls(filename, line, col, end_col, function, text)

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col + 1}"

    def render(self) -> str:
        """The source line and a caret line under the span, each indented by four spaces."""
        if not self.source_line:
            return ""
        stripped = self.source_line.lstrip()
        indent = len(self.source_line) - len(stripped)
        start = max(self.col - indent, 0)
        end = self.end_col - indent if self.end_col is not None else len(stripped)
        width = max(end - start, 1)
        return f"    {stripped}\n    {' ' * start}{'^' * width}"


class CompileError(TileError, ValueError):
    """A kernel that cannot be compiled, reported at the user's source location.

    Parameters
    ----------
    message
        What is wrong and what to do, in the user's terms.
    loc
        Where (None when no source position applies, e.g. a missing specialization value).
    inlined_from
        The call sites of ``@tile.function`` helpers, innermost first, when the error is inside an inlined helper.
    """

    def __init__(self, message: str, loc: SourceLoc | None = None, inlined_from: tuple[SourceLoc, ...] = ()) -> None:
        self.message = message
        self.loc = loc
        self.inlined_from = inlined_from
        super().__init__(self._render())

    @property
    def filename(self) -> str | None:
        """File of the error location."""
        return self.loc.filename if self.loc else None

    @property
    def line(self) -> int | None:
        """1-based line of the error location."""
        return self.loc.line if self.loc else None

    @property
    def col(self) -> int | None:
        """1-based column of the error location."""
        return self.loc.col + 1 if self.loc else None

    def _render(self) -> str:
        if self.loc is None:
            return f"error: {self.message}"
        parts = [f"{self.loc}: error: {self.message}"]
        if caret := self.loc.render():
            parts.append(caret)
        for site in self.inlined_from:
            parts.append(f"{site}: note: in the helper called from here")
            if caret := site.render():
                parts.append(caret)
        return "\n".join(parts)

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[type[CompileError], tuple[str, SourceLoc | None, tuple[SourceLoc, ...]]]:
        return (type(self), (self.message, self.loc, self.inlined_from))
