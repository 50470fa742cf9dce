"""The op builder: ``b.addf(x, y)``, ``with b.for_(lb, ub, step, [acc]) as loop: ...``.

`Builder` = the generic, catalog-driven `BuilderBase` (any single-result op as a method, `create`, `call`)
plus explicit methods for ops with several results, no result, or regions.

Invariant: a structured op's ``with`` body appends to the op's region block and the builder returns to the
enclosing block afterwards. A body left without a terminator gets an empty one (``continue`` for ``for`` and
``loop``, ``yield`` for ``if``) only when the op carries no values; otherwise the caller must terminate it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tile.ir._attrs import Attr, DenseElementsAttr
from tile.ir._builder_core import BuilderBase
from tile.ir._errors import IRTypeError
from tile.ir._ir import Block, Operation, Value
from tile.ir._location import Location
from tile.ir._types import TileType, Type, scalar
from tile.ir._version import V13_2

__all__ = ["Builder", "IfBranches", "RegionOp"]


@dataclass
class RegionOp:
    """Handle on a structured op under construction (``for``, ``loop``, ``reduce``, ``scan``).

    `args` are the region block arguments (for ``for``: the carried values, with `iv` the induction
    variable); `results` are the op's results, usable after the ``with`` block.
    """

    op: Operation
    block: Block
    skip: int = 0

    @property
    def iv(self) -> Value:
        """The induction variable of a ``for`` loop."""
        return self.block.args[0]

    @property
    def args(self) -> list[Value]:
        """Region arguments other than the induction variable."""
        return self.block.args[self.skip :]

    @property
    def results(self) -> list[Value]:
        """The op's results."""
        return self.op.results


class IfBranches:
    """Handle on an ``if`` under construction: build each side in ``with br.then_():`` / ``with br.else_():``."""

    def __init__(self, builder: Builder, op: Operation) -> None:
        self._builder = builder
        self.op = op

    @property
    def results(self) -> list[Value]:
        """The op's results."""
        return self.op.results

    @contextmanager
    def then_(self) -> Iterator[Block]:
        """Build the then-region."""
        with self._branch(0) as block:
            yield block

    @contextmanager
    def else_(self) -> Iterator[Block]:
        """Build the else-region."""
        with self._branch(1) as block:
            yield block

    @contextmanager
    def _branch(self, index: int) -> Iterator[Block]:
        region = self.op.regions[index]
        if region.blocks:
            raise IRTypeError("each branch of an 'if' can be built only once")
        block = region.add_block()
        with self._builder.at(block):
            yield block
        self._builder._close(block, "yield", bool(self.op.results))


class Builder(BuilderBase):
    """Appends ops to a block; see the module docstring of `tile.ir` for the conventions."""

    def constant(self, value: float | bool | DenseElementsAttr, type: TileType | None = None) -> Value:
        """Return a constant tile: a splat of `value` over `type`, or the given `DenseElementsAttr`."""
        if not isinstance(value, DenseElementsAttr):
            if type is None:
                raise IRTypeError("constant needs a tile type for a Python scalar value")
            value = DenseElementsAttr.splat(type, value)
        return self.call("constant", value=value).results[0]

    def get_tile_block_id(self) -> tuple[Value, Value, Value]:
        """Return this tile block's (x, y, z) coordinates in the grid."""
        x, y, z = self.call("get_tile_block_id").results
        return x, y, z

    def get_num_tile_blocks(self) -> tuple[Value, Value, Value]:
        """Return the grid size (x, y, z)."""
        x, y, z = self.call("get_num_tile_blocks").results
        return x, y, z

    def load_view_tko(
        self, view: Value, index: Sequence[Value], token: Value | None = None, **attrs: Any
    ) -> tuple[Value, Value]:
        """Load the tile at `index` of `view`; returns (tile, result token)."""
        tile, tok = self.call("load_view_tko", view, index, token, **attrs).results
        return tile, tok

    def load_ptr_tko(
        self,
        source: Value,
        mask: Value | None = None,
        padding: Value | None = None,
        token: Value | None = None,
        **attrs: Any,
    ) -> tuple[Value, Value]:
        """Gather through a tile of pointers; returns (tile, result token)."""
        tile, tok = self.call("load_ptr_tko", source, mask, padding, token, **attrs).results
        return tile, tok

    def atomic_rmw_tko(
        self, pointers: Value, arg: Value, mask: Value | None = None, token: Value | None = None, **attrs: Any
    ) -> tuple[Value, Value]:
        """Atomic read-modify-write through a tile of pointers; returns (old values, result token)."""
        old, tok = self.call("atomic_rmw_tko", pointers, arg, mask, token, **attrs).results
        return old, tok

    def atomic_cas_tko(
        self,
        pointers: Value,
        cmp: Value,
        val: Value,
        mask: Value | None = None,
        token: Value | None = None,
        **attrs: Any,
    ) -> tuple[Value, Value]:
        """Atomic compare-and-swap; returns (old values, result token)."""
        old, tok = self.call("atomic_cas_tko", pointers, cmp, val, mask, token, **attrs).results
        return old, tok

    def multimem_load_reduce_view_tko(
        self, view: Value, index: Sequence[Value], token: Value | None = None, **attrs: Any
    ) -> tuple[Value, Value]:
        """13.5 multicast load-reduce; returns (reduced tile, result token)."""
        tile, tok = self.call("multimem_load_reduce_view_tko", view, index, token, **attrs).results
        return tile, tok

    def get_tensor_shape(self, view: Value, result_types: Sequence[Type]) -> list[Value]:
        """Return the (dynamic) sizes of a tensor view as scalar tiles of `result_types`."""
        return self.call("get_tensor_shape", view, result_types=result_types).results

    def get_index_space_shape(self, view: Value, result_types: Sequence[Type]) -> list[Value]:
        """Return the number of tiles of a partition view along each dim."""
        return self.call("get_index_space_shape", view, result_types=result_types).results

    def print_tko(
        self, fmt: str, args: Sequence[Value] = (), token: Value | None = None, loc: Location | None = None
    ) -> Value | None:
        """Print with a C-printf-style format; returns the result token (None before 13.2).

        The op has its result token at every version, as NVIDIA's IR does (``tileirdisasm`` prints it), but bytecode
        encodes it from 13.2 on only, so before 13.2 it cannot be used and is not returned.
        """
        op = self.call("print_tko", list(args), token, str=fmt, loc=loc)
        return op.results[0] if self.version >= V13_2 else None

    def assert_(self, condition: Value, message: str, loc: Location | None = None) -> Operation:
        """Abort the kernel with `message` if any element of `condition` is false."""
        return self.call("assert", condition, message=message, loc=loc)

    def return_(self, values: Sequence[Value] = (), loc: Location | None = None) -> Operation:
        """Terminate the function body."""
        return self.call("return", list(values), loc=loc)

    def yield_(self, values: Sequence[Value] = (), loc: Location | None = None) -> Operation:
        """Terminate an ``if`` branch or a ``reduce``/``scan`` body."""
        return self.call("yield", list(values), loc=loc)

    def continue_(self, values: Sequence[Value] = (), loc: Location | None = None) -> Operation:
        """Terminate a loop body, passing the next iteration's carried values."""
        return self.call("continue", list(values), loc=loc)

    def break_(self, values: Sequence[Value] = (), loc: Location | None = None) -> Operation:
        """Leave a ``loop``, producing its results."""
        return self.call("break", list(values), loc=loc)

    @contextmanager
    def for_(
        self,
        lower: Value,
        upper: Value,
        step: Value,
        iter_args: Sequence[Value] = (),
        *,
        unsigned_cmp: bool = False,
        loc: Location | None = None,
    ) -> Iterator[RegionOp]:
        """Build ``for iv in [lower, upper) step step`` carrying `iter_args`; end the body with `continue_`."""
        types = [v.type for v in iter_args]
        op = self.create("for", [lower, upper, step, list(iter_args)], {"unsignedCmp": unsigned_cmp}, types, loc)
        block = op.regions[0].add_block([lower.type, *types])
        with self.at(block):
            yield RegionOp(op, block, skip=1)
        self._close(block, "continue", bool(types))

    @contextmanager
    def loop(
        self, iter_args: Sequence[Value] = (), result_types: Sequence[Type] = (), *, loc: Location | None = None
    ) -> Iterator[RegionOp]:
        """Build an unbounded ``loop``; `continue_` starts the next iteration, `break_` leaves with results."""
        types = [v.type for v in iter_args]
        op = self.create("loop", [list(iter_args)], {}, list(result_types), loc)
        block = op.regions[0].add_block(types)
        with self.at(block):
            yield RegionOp(op, block)
        self._close(block, "continue", bool(types))

    @contextmanager
    def if_(
        self, condition: Value, result_types: Sequence[Type] = (), *, loc: Location | None = None
    ) -> Iterator[IfBranches]:
        """Build an ``if``; inside, use ``with br.then_():`` and ``with br.else_():``."""
        op = self.create("if", [condition], {}, list(result_types), loc)
        branches = IfBranches(self, op)
        yield branches
        for region in op.regions:
            if not region.blocks:
                if op.results:
                    raise IRTypeError("an 'if' with results needs both a then and an else branch")
                self._close(region.add_block(), "yield", False)

    @contextmanager
    def reduce(
        self,
        operands: Sequence[Value],
        dim: int,
        identities: Sequence[Attr],
        *,
        result_types: Sequence[Type] | None = None,
        loc: Location | None = None,
    ) -> Iterator[RegionOp]:
        """Build ``reduce`` along `dim`; the body gets (element_i, accumulator_i) pairs and must `yield_`."""
        types: list[Type] = (
            list(result_types) if result_types is not None else [_drop_dim(v.type, dim) for v in operands]
        )
        attrs = {"dim": dim, "identities": tuple(identities)}
        with self._combiner("reduce", operands, attrs, types, loc) as handle:
            yield handle

    @contextmanager
    def scan(
        self,
        operands: Sequence[Value],
        dim: int,
        identities: Sequence[Attr],
        *,
        reverse: bool = False,
        loc: Location | None = None,
    ) -> Iterator[RegionOp]:
        """Build an inclusive ``scan`` along `dim`; the body combines (element_i, accumulator_i) pairs."""
        attrs = {"dim": dim, "reverse": reverse, "identities": tuple(identities)}
        with self._combiner("scan", operands, attrs, [v.type for v in operands], loc) as handle:
            yield handle

    @contextmanager
    def _combiner(
        self, name: str, operands: Sequence[Value], attrs: dict[str, Any], types: list[Type], loc: Location | None
    ) -> Iterator[RegionOp]:
        op = self.create(name, [list(operands)], attrs, types, loc)
        arg_types: list[Type] = []
        for v in operands:
            elem = scalar(_tile(v.type).element)
            arg_types += [elem, elem]
        block = op.regions[0].add_block(arg_types)
        with self.at(block):
            yield RegionOp(op, block)
        if block.terminator is None or block.terminator.name != "yield":
            raise IRTypeError(f"the body of '{name}' must end with b.yield_(combined values)")

    def _close(self, block: Block, terminator: str, carries: bool) -> None:
        last = block.terminator
        if last is not None and last.name in {"yield", "continue", "break", "return"}:
            return
        if carries:
            raise IRTypeError(f"a region that carries values must end with an explicit '{terminator}'")
        with self.at(block):
            self.call(terminator, [])


def _tile(t: Type) -> TileType:
    if not isinstance(t, TileType):
        raise IRTypeError(f"expected a tile, got {t}")
    return t


def _drop_dim(t: Type, dim: int) -> TileType:
    tile = _tile(t)
    return tile.with_shape(tile.shape[:dim] + tile.shape[dim + 1 :])
