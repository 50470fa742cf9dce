"""The in-memory IR: modules, globals, functions, regions, blocks, values and operations.

Invariants:
- An `Operation` is generic: its `name` selects a catalog entry (`tile.ir.ops.CATALOG`) that says how its
  flat `operands` split into named groups (`segments` holds one count per group), which `attributes` it
  may carry and how many regions it owns. The builder and the reader fill these consistently; the
  verifier checks them.
- A `Value` is defined exactly once: as the `index`-th result of an op or the `index`-th argument of a
  block. Identity is object identity (values are not compared structurally).
- Entry functions take their parameters as the arguments of the body block and end with ``return``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tile.ir._attrs import ArrayAttr, DenseElementsAttr, OptimizationHints
from tile.ir._enums import SymbolVisibility
from tile.ir._errors import IRTypeError
from tile.ir._layout import Layout
from tile.ir._location import Location
from tile.ir._types import FunctionType, TileType, Type

__all__ = ["MAX_NESTING", "Block", "Function", "Global", "Module", "Operation", "Region", "Value"]

MAX_NESTING = 64
"""The deepest region nesting Tile IR accepts (an op's regions inside 63 enclosing ops'). The reader, the assembler
and the verifier refuse more with their typed errors, so the recursive printer, writer and interpreter never run out
of Python stack on input read from outside (a kernel's Python source cannot nest blocks even 21 deep)."""


class Value:
    """An SSA value: result `index` of an `Operation` or argument `index` of a `Block`."""

    __slots__ = ("index", "name_hint", "owner", "type")

    def __init__(self, type: Type, owner: Operation | Block, index: int, name_hint: str = "") -> None:
        self.type = type
        self.owner = owner
        self.index = index
        self.name_hint = name_hint

    @property
    def defining_op(self) -> Operation | None:
        """The op producing this value, or None for a block argument."""
        return self.owner if isinstance(self.owner, Operation) else None

    def __repr__(self) -> str:
        where = self.owner.name if isinstance(self.owner, Operation) else "block arg"
        return f"<Value {self.type} #{self.index} of {where}>"


class Operation:
    """One op: `name`, operands (flat, split by `segments`), results, attributes, regions, location."""

    def __init__(
        self,
        name: str,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        *,
        attributes: dict[str, object] | None = None,
        num_regions: int = 0,
        segments: Sequence[int] | None = None,
        loc: Location | None = None,
    ) -> None:
        self.name = name
        self.operands: list[Value] = list(operands)
        self.segments: tuple[int, ...] = tuple(segments) if segments is not None else (len(self.operands),)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, object] = dict(attributes or {})
        self.regions: list[Region] = [Region(self) for _ in range(num_regions)]
        self.loc = loc
        self.parent: Block | None = None

    @property
    def result(self) -> Value:
        """The single result (raises if the op has not exactly one)."""
        if len(self.results) != 1:
            raise IRTypeError(f"'{self.name}' has {len(self.results)} results; index .results instead")
        return self.results[0]

    def operand_group(self, index: int) -> list[Value]:
        """Return the operands of group `index` (catalog operand order)."""
        start = sum(self.segments[:index])
        return self.operands[start : start + self.segments[index]]

    def operands_named(self, name: str) -> list[Value]:
        """Return the operands of the group the op's catalog entry calls `name` (``"index"``, ``"view"``...)."""
        from tile.ir.ops import CATALOG  # the catalog describes ops built from this module: import it late

        return self.operand_group(CATALOG[self.name].operand_index(name))

    def walk(self) -> Iterator[Operation]:
        """Yield this op, then every nested op in pre-order (the order of the debug-info index)."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} ({len(self.operands)} operands, {len(self.results)} results)>"


class Block:
    """A straight-line list of ops with typed arguments; the last op must be a terminator."""

    def __init__(self, arg_types: Sequence[Type] = (), parent: Region | None = None) -> None:
        self.args: list[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: list[Operation] = []
        self.parent = parent

    def add_arg(self, type: Type) -> Value:
        """Append an argument of `type` and return it."""
        value = Value(type, self, len(self.args))
        self.args.append(value)
        return value

    def append(self, op: Operation) -> Operation:
        """Append `op` at the end of the block and return it."""
        op.parent = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> Operation | None:
        """The last op, or None when the block is empty."""
        return self.ops[-1] if self.ops else None


class Region:
    """A list of blocks owned by an op (Tile IR regions have one block, or none for an absent else)."""

    def __init__(self, parent: Operation | None = None) -> None:
        self.blocks: list[Block] = []
        self.parent = parent

    def add_block(self, arg_types: Sequence[Type] = ()) -> Block:
        """Append a new block with arguments of `arg_types` and return it."""
        block = Block(arg_types, self)
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The only block (raises if the region has none)."""
        if not self.blocks:
            raise IRTypeError("region has no block; add one with add_block()")
        return self.blocks[0]


class Function:
    """A function (entry kernel): name, signature, body block whose arguments are the parameters.

    Parameters
    ----------
    name
        Symbol name (becomes the cubin kernel symbol).
    type
        Signature; entries have no results.
    entry
        True for a kernel entry point (the only kind tileiras accepts outside preview mode).
    hints
        Per-architecture entry hints (``num_cta_in_cga``, ``occupancy``, ``num_worker_warps_per_cta``).
    arg_attrs
        Per-argument attribute array (13.5 writes one, empty by default).
    loc
        Location of the function itself.
    """

    def __init__(
        self,
        name: str,
        type: FunctionType,
        *,
        entry: bool = True,
        hints: OptimizationHints | None = None,
        arg_attrs: ArrayAttr | None = None,
        loc: Location | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.entry = entry
        self.hints = hints
        self.arg_attrs = arg_attrs
        self.loc = loc
        self.body = Block(type.inputs)

    @property
    def params(self) -> list[Value]:
        """The parameters (arguments of the body block)."""
        return self.body.args

    def walk(self) -> Iterator[Operation]:
        """Yield every op of the body in pre-order."""
        for op in self.body.ops:
            yield from op.walk()


@dataclass
class Global:
    """A module-level constant buffer referenced by ``get_global`` (yields ``tile<ptr<T>>``)."""

    name: str
    value: DenseElementsAttr
    alignment: int = 0
    constant: bool = False
    visibility: SymbolVisibility = SymbolVisibility.PUBLIC

    @property
    def type(self) -> TileType:
        """Tile type of the initializer."""
        return self.value.type


@dataclass
class Module:
    """A bytecode module: functions, globals and an optional producer string (13.3+).

    `layout` is filled by the reader with what it takes to reproduce the input bytes exactly (table order,
    section order); the writer honours it when present and otherwise uses its own canonical layout.
    """

    functions: list[Function] = field(default_factory=list)
    globals: list[Global] = field(default_factory=list)
    producer: str | None = None
    name: str = "kernels"
    layout: Layout | None = None

    def function(self, name: str) -> Function:
        """Return the function called `name` (KeyError if absent)."""
        for fn in self.functions:
            if fn.name == name:
                return fn
        raise KeyError(f"no function named {name!r} in module; it has {[f.name for f in self.functions]}")
