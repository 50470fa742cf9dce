"""Location aliases as ``tileirdisasm -g`` prints them (``loc(#loc7)`` after each op, definitions at the end).

MLIR gives every location and debug attribute an alias, in this order: visit the globals, then each function
(its own location first, then its ops in pre-order, skipping terminators the printer leaves implicit); a
value's alias depth is one more than the deepest alias it refers to (``di_file`` 0, ``di_compile_unit`` 1,
``di_subprogram`` 2, ``di_loc`` 3, ``callsite`` one above its parts). Aliases are sorted by (depth, name),
ties kept in visit order, and numbered per name: ``#loc``, ``#loc1``, ... across depths.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tile.ir._asm_attrs import escape
from tile.ir._ir import Function, Module, Operation
from tile.ir._location import CallSite, DICompileUnit, DIFile, DILexicalBlock, DILoc, DISubprogram, FileLoc

__all__ = ["LocationAliases", "elided"]

_PREFIXES = {
    DIFile: "di_file",
    DICompileUnit: "di_compile_unit",
    DISubprogram: "di_subprogram",
    DILexicalBlock: "di_lexical_block",
}
_IMPLICIT = {"yield": ("if",), "continue": ("for", "loop")}


def elided(op: Operation) -> bool:
    """True for a bare ``yield``/``continue`` that the printer leaves implicit in its region."""
    owners = _IMPLICIT.get(op.name)
    if owners is None or op.operands or op.parent is None or op.parent.parent is None:
        return False
    owner = op.parent.parent.parent
    return owner is not None and owner.name in owners


def _children(value: object) -> tuple[object, ...]:
    if isinstance(value, DICompileUnit):
        return (value.file,)
    if isinstance(value, DISubprogram):
        return (value.file, value.compile_unit)
    if isinstance(value, DILexicalBlock):
        return (value.scope, value.file)
    if isinstance(value, DILoc):
        return (FileLoc(value.filename, value.line, value.column), value.scope)
    if isinstance(value, CallSite):
        return (value.callee, value.caller)
    return ()


@dataclass
class _Alias:
    prefix: str
    depth: int = 0
    name: str = ""


class LocationAliases:
    """The aliases of one module's locations: collect, then `ref` and `definitions`."""

    def __init__(self, module: Module) -> None:
        self.aliases: dict[object, _Alias] = {}
        for _ in module.globals:
            self._visit(None)
        for fn in module.functions:
            for loc in _locations(fn):
                self._visit(loc)
        counts: dict[str, int] = {}
        for alias in sorted(self.aliases.values(), key=lambda a: (a.depth, a.prefix)):
            n = counts.get(alias.prefix, 0)
            counts[alias.prefix] = n + 1
            alias.name = "#" + alias.prefix + (str(n) if n else "")

    def _visit(self, value: object) -> int:
        known = self.aliases.get(value)
        if known is not None:
            return known.depth
        alias = _Alias(_PREFIXES.get(type(value), "loc"))
        self.aliases[value] = alias
        alias.depth = max((self._visit(child) + 1 for child in _children(value)), default=0)
        return alias.depth

    def ref(self, value: object) -> str:
        """``loc(#locN)`` for an op or function location."""
        return f"loc({self.aliases[value].name})"

    def definitions(self) -> str:
        """The ``#name = ...`` lines, in alias order."""
        ordered = sorted(self.aliases.items(), key=lambda kv: (kv[1].depth, kv[1].prefix))
        return "".join(f"{alias.name} = {self._text(value)}\n" for value, alias in ordered)

    def _name(self, value: object) -> str:
        return self.aliases[value].name

    def _text(self, value: object) -> str:  # noqa: PLR0911 - one return per attribute kind reads as a table
        if value is None:
            return "loc(unknown)"
        if isinstance(value, FileLoc):
            return f"loc({escape(value.filename)}:{value.line}:{value.column})"
        if isinstance(value, DIFile):
            return f"#cuda_tile.di_file<{escape(value.name)} in {escape(value.directory)}>"
        if isinstance(value, DICompileUnit):
            return f"#cuda_tile.di_compile_unit<file = {self._name(value.file)}>"
        if isinstance(value, DISubprogram):
            return (
                f"#cuda_tile.di_subprogram<file = {self._name(value.file)}, line = {value.line}, "
                f"name = {escape(value.name)}, linkageName = {escape(value.linkage_name)}, "
                f"compileUnit = {self._name(value.compile_unit)}, scopeLine = {value.scope_line}>"
            )
        if isinstance(value, DILexicalBlock):
            return (
                f"#cuda_tile.di_lexical_block<scope = {self._name(value.scope)}, file = {self._name(value.file)}, "
                f"line = {value.line}, column = {value.column}>"
            )
        if isinstance(value, DILoc):
            inner = FileLoc(value.filename, value.line, value.column)
            return f"#cuda_tile.di_loc<{self._name(inner)} in {self._name(value.scope)}>"
        assert isinstance(value, CallSite), value
        return f"loc(callsite({self._name(value.callee)} at {self._name(value.caller)}))"


def _locations(fn: Function) -> Iterator[object]:
    yield fn.loc
    for op in fn.walk():
        if not elided(op):
            yield op.loc
