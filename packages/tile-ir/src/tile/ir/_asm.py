"""Assemble Tile IR text (the syntax `tileirdisasm` prints) into a `Module`.

`parse_module` accepts what `print_module` and ``tileirdisasm`` print: globals and ``entry`` functions whose
ops use each op's format (`tile.ir._asm_formats`, interpreted here in reverse) or hand-written syntax
(`tile.ir._asm_custom`). Value names are resolved in nested scopes (a region sees its parents' names);
every error is an `AsmSyntaxError` at the offending line and column. Text printed with ``-g`` keeps its
locations (`tile.ir._asm_locs`). Write the result with ``write_bytecode(module, version)``.
"""

from __future__ import annotations

import re
from enum import IntEnum

from tile.ir._asm_attrs import parse_dense, parse_hints
from tile.ir._asm_custom import custom_ops, parse_custom
from tile.ir._asm_formats import format_of
from tile.ir._asm_locs import Locations, alias_section_start
from tile.ir._asm_parse_ops import parse_declarative
from tile.ir._asm_types import parse_type, type_text
from tile.ir._attrs import OptimizationHints
from tile.ir._builder_core import BuilderBase
from tile.ir._enums import SymbolVisibility
from tile.ir._errors import TileError
from tile.ir._ir import MAX_NESTING, Block, Function, Global, Module, Operation, Value
from tile.ir._lexer import AsmSyntaxError, Lexer
from tile.ir._types import FunctionType, Type
from tile.ir.ops import CATALOG

__all__ = ["parse_module"]

_PRODUCER = re.compile(r"\s*// Producer: ([^\n]*)")

_TYPE_WORDS = frozenset(
    ["tile", "ptr", "token", "tensor_view", "partition_view", "strided_view", "gather_scatter_view"]
)
_ALIASES = {"fpowf": "pow"}


def parse_module(text: str, filename: str = "<input>") -> Module:
    """Parse Tile IR assembly `text` into a `Module` (raises `AsmSyntaxError` with line:col and a caret)."""
    lex = Lexer(text, filename)
    try:
        end = alias_section_start(text)
        lex = Lexer(text[:end], filename)
        return _Parser(lex, Locations(text, filename)).module()
    except RecursionError:  # nested attributes or locations; regions are capped at MAX_NESTING before this
        raise lex.error("nested too deeply to parse (arrays, locations or types)", lex.pos) from None


class _Parser:
    """Recursive-descent parser; implements the `OpParser` protocol used by format and custom parsers."""

    def __init__(self, lex: Lexer, locations: Locations) -> None:
        self.lex = lex
        self.locations = locations
        self.scopes: list[dict[str, list[Value]]] = []
        self.block_stack: list[Block] = []

    # --- module structure ---------------------------------------------------------------------------

    def module(self) -> Module:
        module = Module()
        # tileirdisasm shows the producer section as a leading comment, which the lexer would skip
        producer = _PRODUCER.match(self.lex.text)
        if producer is not None:
            module.producer = producer.group(1)
        if self.lex.accept("cuda_tile.module") or self.lex.accept("module"):
            self.lex.symbol()
            self.lex.expect("{")
            self._items(module, closing="}")
        else:
            self._items(module, closing=None)
        return module

    def _items(self, module: Module, closing: str | None) -> None:
        while not (self.lex.at_end() if closing is None else self.lex.accept(closing)):
            start = self.lex.pos
            word = self.lex.keyword("'entry' or 'global'")
            if word == "entry":
                module.functions.append(self.function())
            elif word == "global":
                module.globals.append(self.global_())
            else:
                raise self.lex.error(f"expected 'entry' or 'global' at module level, found '{word}'", start)

    def global_(self) -> Global:
        lex = self.lex
        visibility = SymbolVisibility.PRIVATE if lex.accept("private") else SymbolVisibility.PUBLIC
        lex.accept("public")
        constant = lex.accept("constant")
        name = lex.symbol()
        alignment = 0
        if lex.accept("alignment"):
            lex.expect("=")
            alignment = lex.integer()
        value = parse_dense(lex)
        self.locations.optional(lex)  # globals carry no location in bytecode (tileirdisasm -g shows unknown)
        return Global(name, value, alignment, constant, visibility)

    def function(self) -> Function:
        lex = self.lex
        name = lex.symbol()
        lex.expect("(")
        names: list[tuple[str, int]] = []
        types: list[Type] = []
        while not lex.accept(")"):
            if names:
                lex.expect(",", "between parameters")
            names.append(self.arg_name())
            lex.expect(":")
            types.append(self.read_type())
        hints: OptimizationHints | None = None
        if lex.accept("optimization_hints"):
            lex.expect("=")
            hints = parse_hints(lex)
        fn = Function(name, FunctionType(tuple(types)), hints=hints)
        self.region(fn.body, names, None)
        fn.loc = self.locations.optional(lex)
        return fn

    # --- regions and ops ----------------------------------------------------------------------------

    def region(self, block: Block, arg_names: list[tuple[str, int]], implicit: str | None) -> None:
        """Parse ``{ ops }`` into `block`, whose arguments get `arg_names`; add a bare `implicit` terminator."""
        if len(self.block_stack) > MAX_NESTING:  # the entry's body is not an op's region
            raise self.lex.error(f"regions nested more than {MAX_NESTING} deep")
        self.lex.expect("{")
        scope: dict[str, list[Value]] = {}
        if len(arg_names) != len(block.args):
            raise self.lex.error(f"expected {len(block.args)} block argument names, found {len(arg_names)}")
        for (name, pos), arg in zip(arg_names, block.args, strict=True):
            self._define(scope, name, [arg], pos)
        self.scopes.append(scope)
        self.block_stack.append(block)
        try:
            while not self.lex.accept("}"):
                if self.lex.at_end():
                    raise self.lex.error("expected '}' to close the region")
                self.operation()
        finally:
            self.scopes.pop()
            self.block_stack.pop()
        last = block.terminator
        if implicit is not None and (last is None or not CATALOG[last.name].terminator):
            BuilderBase(block).create(implicit, [[]], {}, [])

    def _define(self, scope: dict[str, list[Value]], name: str, values: list[Value], pos: int) -> None:
        if name in scope:
            raise self.lex.error(f"redefinition of value '%{name}'", pos)
        scope[name] = values

    def operation(self) -> None:
        lex = self.lex
        results: list[tuple[str, int, int]] = []
        if lex.at_value():
            while True:
                name, count, pos = self._result_name()
                results.append((name, count, pos))
                if not lex.accept(","):
                    break
            lex.expect("=", "after the result names")
        start = lex.pos
        lex.skip()
        start = lex.pos
        word = lex.keyword("an op name")
        name = _ALIASES.get(word.removeprefix("cuda_tile."), word.removeprefix("cuda_tile."))
        if name not in CATALOG or name in ("entry", "global", "module"):
            raise lex.error(f"unknown op '{word}'", start)
        try:
            op = parse_custom(name, self) if name in custom_ops() else self._declarative(name, start)
        except TileError as exc:
            if isinstance(exc, AsmSyntaxError):
                raise
            raise lex.error(f"invalid '{word}': {exc}", start) from None
        self._bind_results(op, results, start)
        op.loc = self.locations.optional(lex)

    def _declarative(self, name: str, start: int) -> Operation:
        fmt = format_of(name)
        if fmt is None:
            raise self.lex.error(f"op '{name}' has no text syntax", start)
        return parse_declarative(self, name, fmt)

    def _result_name(self) -> tuple[str, int, int]:
        name, index, pos = self.lex.value()
        if index is not None:
            raise self.lex.error("a result name cannot carry '#'", pos)
        count = 1
        if self.lex.text.startswith(":", self.lex.pos) and self.lex.text[self.lex.pos + 1 : self.lex.pos + 2].isdigit():
            self.lex.pos += 1
            count = self.lex.integer()
        return name, count, pos

    def _bind_results(self, op: Operation, results: list[tuple[str, int, int]], start: int) -> None:
        total = sum(count for _, count, _ in results)
        if total != len(op.results):
            raise self.lex.error(f"'{op.name}' produces {len(op.results)} results but {total} names are given", start)
        offset = 0
        for name, count, pos in results:
            self._define(self.scopes[-1], name, op.results[offset : offset + count], pos)
            offset += count

    def make(self, name: str, groups: list[object], attrs: dict[str, object], result_types: list[Type]) -> Operation:
        """Create op `name` at the end of the current block (attribute defaults filled in by the builder)."""
        builder = BuilderBase(self.block_stack[-1])
        return builder.create(name, groups, attrs, result_types)  # type: ignore[arg-type]  # groups are Value | list | None

    # --- pieces used by op parsers ------------------------------------------------------------------

    def arg_name(self) -> tuple[str, int]:
        """A block-argument name being defined (``%iterArg0``)."""
        name, index, pos = self.lex.value()
        if index is not None:
            raise self.lex.error("an argument name cannot carry '#'", pos)
        return name, pos

    def value(self) -> Value:
        """A use of a defined value (``%name`` or ``%name#k``)."""
        name, index, pos = self.lex.value()
        for scope in reversed(self.scopes):
            if name in scope:
                group = scope[name]
                k = index or 0
                if k >= len(group) or (index is not None and len(group) == 1):
                    raise self.lex.error(f"'%{name}' has no result #{k}", pos)
                return group[k]
        raise self.lex.error(f"use of undefined value '%{name}'", pos)

    def value_list(self) -> list[Value]:
        """One or more comma-separated values."""
        values = [self.value()]
        while self._comma_then(self.lex.at_value):
            values.append(self.value())
        return values

    def read_type(self) -> Type:
        """One type."""
        return parse_type(self.lex)

    def read_types(self) -> list[Type]:
        """One or more comma-separated types."""
        types = [self.read_type()]
        while self._comma_then(
            lambda: self.lex.peek_keyword() in _TYPE_WORDS or self.lex.peek_keyword() in _SCALAR_WORDS
        ):
            types.append(self.read_type())
        return types

    def _comma_then(self, check: object) -> bool:
        saved = self.lex.pos
        if self.lex.accept(","):
            assert callable(check)
            if check():
                return True
        self.lex.pos = saved
        return False

    def keyword_bool(self) -> bool:
        """``true`` or ``false``."""
        start = self.lex.pos
        word = self.lex.keyword("true or false")
        if word not in ("true", "false"):
            raise self.lex.error(f"expected true or false, found '{word}'", start)
        return word == "true"

    def keyword_enum(self, enum: type[IntEnum], what: str) -> IntEnum:
        """A bare keyword naming a member of `enum`."""
        start = self.lex.pos
        word = self.lex.keyword(what)
        members = {str(m): m for m in enum}
        if word not in members:
            raise self.lex.error(f"expected {what} (one of {', '.join(members)}), found '{word}'", start)
        return members[word]

    def check_type(self, value: Value, pos: int) -> None:
        """Raise unless the type just parsed from `pos` matches `value`'s type."""
        self.lex.pos = pos
        parsed = self.read_type()
        if parsed != value.type:
            raise self.lex.error(f"type mismatch: value has type {type_text(value.type)}", pos)


_SCALAR_WORDS = frozenset(
    [
        "i1",
        "i4",
        "i8",
        "i16",
        "i32",
        "i64",
        "f16",
        "bf16",
        "f32",
        "tf32",
        "f64",
        "f8E4M3FN",
        "f8E5M2",
        "f8E8M0FNU",
        "f4E2M1FN",
    ]
)
