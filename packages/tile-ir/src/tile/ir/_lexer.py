"""A scanner over Tile IR assembly text, and the error it raises.

The assembler is scannerless: it asks the `Lexer` for the next piece it expects (a literal, a keyword, a
``%value``, a number, a string) at the current position, after skipping blanks and ``//`` comments. Every
failure is an `AsmSyntaxError` carrying the 1-based line and column and rendering the offending line with a
caret under the column.
"""

from __future__ import annotations

import re

from tile.ir._errors import TileError

__all__ = ["AsmSyntaxError", "Lexer"]

_BLANK = re.compile(r"(?:\s+|//[^\n]*)+")
_BLANK_STARTS = frozenset(" \t\r\n\f\v/")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_VALUE = re.compile(r"%([A-Za-z0-9_$.-]+)(?:#(\d+))?")
_SYMBOL = re.compile(r"@([A-Za-z_][A-Za-z0-9_$.]*)")
_NUMBER = re.compile(r"[-+]?(?:0x[0-9A-Fa-f]+|(?:\d+\.\d*|\d+)(?:[eE][-+]?\d+)?|inf|nan)")
_INT = re.compile(r"[-+]?\d+")


class AsmSyntaxError(TileError, ValueError):
    """A syntax or semantic error in Tile IR assembly text, at `line`:`col` of `filename`.

    ``str(err)`` is ``file:line:col: error: message`` followed by the source line and a caret.
    """

    def __init__(self, message: str, filename: str, line: int, col: int, source_line: str) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.col = col
        self.source_line = source_line
        caret = " " * (col - 1) + "^"
        super().__init__(f"{filename}:{line}:{col}: error: {message}\n{source_line}\n{caret}")

    def __reduce__(self) -> tuple[type[AsmSyntaxError], tuple[str, str, int, int, str]]:
        return (type(self), (self.message, self.filename, self.line, self.col, self.source_line))


class Lexer:
    """A position in `text` with helpers that each consume one expected piece or raise `AsmSyntaxError`."""

    def __init__(self, text: str, filename: str = "<input>") -> None:
        self.text = text
        self.filename = filename
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> AsmSyntaxError:
        """Return (not raise) an error at `pos` (default: the current position after blanks)."""
        if pos is None:
            self.skip()
            pos = self.pos
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        line = self.text.count("\n", 0, pos) + 1
        return AsmSyntaxError(
            message, self.filename, line, pos - start + 1, self.text[start : end if end >= 0 else None]
        )

    def skip(self) -> None:
        """Skip blanks and comments."""
        if self.text[self.pos : self.pos + 1] not in _BLANK_STARTS:
            return
        m = _BLANK.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        """True when only blanks remain."""
        self.skip()
        return self.pos >= len(self.text)

    def at(self, literal: str) -> bool:
        """True if `literal` (a keyword must end at a word boundary) comes next."""
        self.skip()
        if not self.text.startswith(literal, self.pos):
            return False
        end = self.pos + len(literal)
        is_word = literal[-1:].isalnum() or literal[-1:] == "_"
        return not (is_word and end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_$."))

    def accept(self, literal: str) -> bool:
        """Consume `literal` if it comes next."""
        if self.at(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, context: str = "") -> None:
        """Consume `literal` or raise."""
        if not self.accept(literal):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{literal}'{where}, found {self.describe()}")

    def describe(self) -> str:
        """A short quote of what comes next, for messages."""
        self.skip()
        if self.pos >= len(self.text):
            return "end of input"
        m = _WORD.match(self.text, self.pos) or _VALUE.match(self.text, self.pos)
        return f"'{m.group(0)}'" if m else f"'{self.text[self.pos]}'"

    def _match(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected {what}, found {self.describe()}")
        self.pos = m.end()
        return m

    def keyword(self, what: str = "a keyword") -> str:
        """Consume an identifier-like word."""
        return self._match(_WORD, what).group(0)

    def peek_keyword(self) -> str | None:
        """The identifier-like word that comes next, without consuming it."""
        self.skip()
        m = _WORD.match(self.text, self.pos)
        return m.group(0) if m else None

    def value(self) -> tuple[str, int | None, int]:
        """Consume ``%name`` or ``%name#N``; return (name, N or None, start position)."""
        self.skip()
        start = self.pos
        m = self._match(_VALUE, "an SSA value such as %0")
        return m.group(1), int(m.group(2)) if m.group(2) is not None else None, start

    def at_value(self) -> bool:
        """True if a ``%value`` comes next."""
        self.skip()
        return self.text.startswith("%", self.pos)

    def symbol(self) -> str:
        """Consume ``@name`` or ``@"quoted name"``."""
        self.skip()
        if self.text.startswith('@"', self.pos):
            self.pos += 1
            return self.string()
        return self._match(_SYMBOL, "a symbol such as @kernel").group(1)

    def integer(self) -> int:
        """Consume a decimal integer (optionally signed)."""
        return int(self._match(_INT, "an integer").group(0))

    def number(self) -> str:
        """Consume an integer, float or ``0x`` hex literal and return its text."""
        return self._match(_NUMBER, "a number").group(0)

    def string(self) -> str:
        """Consume a double-quoted string with MLIR escapes (``\\XX`` hex, ``\\\\``, ``\\"``, ``\\n``, ``\\t``)."""
        self.skip()
        if not self.text.startswith('"', self.pos):
            raise self.error(f"expected a string literal, found {self.describe()}")
        out = bytearray()
        i = self.pos + 1
        while i < len(self.text) and self.text[i] != '"':
            ch = self.text[i]
            if ch == "\\":
                nxt = self.text[i + 1 : i + 3]
                if len(nxt) == 2 and all(c in "0123456789abcdefABCDEF" for c in nxt):
                    out.append(int(nxt, 16))
                    i += 3
                    continue
                simple = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}.get(nxt[:1])
                if simple is None:
                    raise self.error("unknown escape in string literal", i)
                out += simple.encode()
                i += 2
                continue
            out += ch.encode()
            i += 1
        if i >= len(self.text):
            raise self.error("unterminated string literal", self.pos)
        self.pos = i + 1
        return out.decode("utf-8", errors="surrogateescape")
