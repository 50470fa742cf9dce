"""Turn a Tile IR function into a tree of Python closures, once per launch.

Every SSA value gets a slot in a flat per-block environment list; every op becomes a `Step` that reads its
operand slots and writes its result slots. A block of steps runs in order until a terminator step returns a
`Signal` (``yield``/``continue``/``break``/``return`` with the values it carries), which structured ops
(`if`, `for`, `loop`, `reduce`) consume and everything else passes outwards. Op semantics live in the family
modules, each contributing a table from op name to a step factory; an op without an entry is an
`UnsupportedOpError` naming it and its location, raised when the kernel is prepared, before any block runs.

Invariants: constants and other block-invariant values are computed once at compile time into the template
environment; a step never keeps per-block state in its closure (state lives in `State`, reset per block).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TextIO

from tile.ir._errors import TileError
from tile.ir._format_text import render_format_text
from tile.ir._ir import Block, Function, Module, Operation, Value
from tile.ir._location import CallSite, DILoc, FileLoc, Location
from tile.ir.ops import CATALOG

from ._errors import BlockId, InterpError, UnsupportedOpError
from ._memory import Memory
from ._races import RaceDetector
from ._tokens import TokenFlow

__all__ = ["BlockProgram", "Compiler", "Signal", "State", "Step", "location_text"]

Signal = tuple[str, list[Any]]
"""A terminator's effect: its kind (``yield``, ``continue``, ``break``, ``return``) and carried values."""

Env = list[Any]
Step = Callable[[Env], "Signal | None"]
StepFactory = Callable[[Operation, "Compiler"], Step]


@dataclass
class State:
    """What steps may read or change while a launch runs (one per launch, updated per block)."""

    memory: Memory
    grid: BlockId
    races: RaceDetector | None
    tokens: TokenFlow
    stdout: TextIO | None
    block: BlockId = (0, 0, 0)
    block_values: tuple[Any, Any, Any] = (0, 0, 0)
    globals: dict[str, int] = field(default_factory=dict)


class BlockProgram:
    """The compiled steps of one IR block plus the slots of its arguments."""

    def __init__(self, arg_slots: list[int], steps: list[Step], where: dict[Step, str]) -> None:
        self.arg_slots = arg_slots
        self.steps = steps
        self.where = where

    def run(self, env: Env, args: Sequence[Any] = ()) -> Signal | None:
        """Bind `args` to the block arguments and run the steps; return the terminator's signal."""
        for slot, value in zip(self.arg_slots, args, strict=False):
            env[slot] = value
        step = None
        try:
            for step in self.steps:
                signal = step(env)
                if signal is not None:
                    return signal
        except InterpError as err:
            if not err.location and step is not None:
                raise type(err)(err.message, err.block, self.where[step]) from err
            raise
        except (ArithmeticError, ValueError, TypeError, LookupError, AttributeError) as err:
            where = self.where[step] if step is not None else ""
            raise InterpError(f"the interpreter failed on this op: {err}", None, where) from err
        return None


class Compiler:
    """Compiles one function against one launch `State` (see the module docstring)."""

    def __init__(self, function: Function, module: Module | None, state: State, table: dict[str, StepFactory]) -> None:
        self.function = function
        self.module = module
        self.state = state
        self._table = table
        self._slots: dict[int, int] = {}
        self.template: Env = []
        self.prologue = BlockProgram([], [], {})
        self._op_index = 0
        self._locations: dict[int, str] = {}

    def slot(self, value: Value) -> int:
        """Return the environment slot of `value`, allocating it on first use."""
        key = id(value)
        found = self._slots.get(key)
        if found is None:
            found = len(self.template)
            self._slots[key] = found
            self.template.append(None)
        return found

    def slots(self, values: Sequence[Value]) -> list[int]:
        """Slots of several values."""
        return [self.slot(v) for v in values]

    def block(self, block: Block, hoistable: frozenset[str] = frozenset()) -> BlockProgram:
        """Compile `block` (its ops, recursively) into a `BlockProgram`.

        Ops named in `hoistable` whose operands are all block arguments or results of hoisted ops are moved
        to `prologue` instead: they compute the same value in every tile block, so the launcher runs them once.
        """
        arg_slots = self.slots(block.args)
        invariant = {id(a) for a in block.args}
        steps: list[Step] = []
        where: dict[Step, str] = {}
        for op in block.ops:
            self._op_index += 1
            text = location_text(op.loc, printf=op.name == "assert")
            loc = self._locations[id(op)] = text or f"@{self.function.name}/op {self._op_index} ({op.name})"
            factory = self._table.get(op.name)
            if factory is None:
                raise UnsupportedOpError(
                    f"the interpreter has no semantics for op '{op.name}'; it cannot run this kernel", None, loc
                )
            step = self._prepare(factory, op, loc)
            if op.name in hoistable and all(id(v) in invariant for v in op.operands):
                invariant.update(id(r) for r in op.results)
                self.prologue.steps.append(step)
                self.prologue.where[step] = loc
                continue
            steps.append(step)
            where[step] = loc
        return BlockProgram(arg_slots, steps, where)

    def _prepare(self, factory: StepFactory, op: Operation, loc: str) -> Step:
        """Run `op`'s step factory; an unverified op it cannot read is an `InterpError` naming the op and `loc`."""
        try:
            return factory(op, self)
        except InterpError as err:
            if err.location:
                raise
            raise type(err)(err.message, err.block, loc) from err
        except TileError:
            raise
        except Exception as err:  # a malformed op (wrong operand count, types, attributes) the verifier would refuse
            raise InterpError(
                f"the interpreter cannot prepare op '{op.name}' ({type(err).__name__}: {err}); "
                "the module is not valid Tile IR: run tile.ir.verify on it to see why",
                None,
                loc,
            ) from err

    def location(self, op: Operation) -> str:
        """Text of `op`'s location: the source position when known, else its position in the function."""
        return self._locations.get(id(op)) or location_text(op.loc) or f"@{self.function.name} ({op.name})"


def location_text(loc: Location | None, printf: bool = False) -> str:
    """Render a location as ``file:line:col`` (an inlined helper adds ``(inlined at file:line:col)``).

    ``printf``: `DILoc` file names are format text, as an ``assert``'s are on the device (``%%`` prints ``%``).
    """
    if isinstance(loc, (DILoc, FileLoc)):
        name = render_format_text(loc.filename) if printf and isinstance(loc, DILoc) else loc.filename
        return f"{name}:{loc.line}:{loc.column}"
    if isinstance(loc, CallSite):
        inner, outer = location_text(loc.callee, printf), location_text(loc.caller, printf)
        return f"{inner} (inlined at {outer})" if inner and outer else inner or outer
    return ""


def operands(op: Operation, name: str) -> list[Value]:
    """The operands of group `name` of `op` (per its catalog entry)."""
    return op.operands_named(name)


def operand(op: Operation, name: str) -> Value | None:
    """The single operand of group `name`, or None when the optional group is absent."""
    group = operands(op, name)
    return group[0] if group else None


def attr(op: Operation, name: str, default: Any = None) -> Any:
    """The attribute `name` of `op`: enums as their lowercase keyword, else the stored value or default."""
    value = op.attributes.get(name)
    if value is None:
        spec = next((a for a in CATALOG[op.name].attrs if a.name == name), None)
        value = spec.default if spec is not None and spec.default is not None else default
    if isinstance(value, IntEnum):
        return str(value)
    return value
