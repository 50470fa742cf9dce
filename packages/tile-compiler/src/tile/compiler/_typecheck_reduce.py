"""``tile.reduce`` and ``tile.scan`` with a user combiner, over one tile or a tuple of tiles.

Tile IR's ``reduce``/``scan`` take several operands and one combiner region that sees an element and an
accumulator of each; ``tile.reduce((values, indices), axis, fn, identity=(inf, big))`` maps onto that directly, so
an arg-min keeps its value and index together. Invariants: the operands broadcast to one shape, the identity has one
compile-time number per operand that its dtype can hold, and the combiner returns one scalar per operand (converted
to that operand's dtype). The combination order is the hardware's (a tree), so only an associative and commutative
combiner gives one answer; ties must be broken inside it (e.g. by the smaller index) to be deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tile.compiler._kir import Value
from tile.compiler._typecheck_arith import is_const, type_name
from tile.compiler._typecheck_shape import ShapeMixin
from tile.compiler._types import DType, broadcast_shapes
from tile.compiler.lang._function import is_function
from tile.compiler.lang._ops import LangOp

__all__ = ["ReduceMixin"]

Combiner = Callable[[list[Value], list[Value]], list[Value]]


class ReduceMixin(ShapeMixin):
    """User-combiner reductions and scans, of one tile or a tuple of tiles."""

    def _operands(self, x: object, name: str) -> tuple[list[Value], bool]:
        """The input tiles (broadcast to one shape) and whether a tuple of them was given."""
        if not isinstance(x, tuple):
            return [self.as_tile(x, what=f"tile.{name} input")], False
        if not x:
            self.fail(f"tile.{name} needs at least one tile")
        values = [self.as_tile(v, what=f"tile.{name} input") for v in x]
        shapes = [self.tile_of(v).shape for v in values]
        shape: tuple[int, ...] | None = shapes[0]
        for other in shapes[1:]:
            shape = broadcast_shapes(shape, other) if shape is not None else None
        if shape is None:
            self.fail(f"the tiles of tile.{name} must broadcast to one shape, got shapes {', '.join(map(str, shapes))}")
        return [self.broadcast(v, shape) for v in values], True

    def _identities(self, identity: object, xs: list[Value], many: bool, name: str) -> list[int | float]:
        """One compile-time identity per operand, each a value of that operand's dtype."""
        if many and (not isinstance(identity, tuple) or len(identity) != len(xs)):
            self.fail(
                f"tile.{name} over {len(xs)} tiles needs an identity tuple of {len(xs)} compile-time numbers (one "
                f"per tile), got {identity!r}"
            )
        items = identity if isinstance(identity, tuple) and many else (identity,)
        out: list[int | float] = []
        for value, x in zip(items, xs, strict=True):
            dt = self.tile_of(x).dtype
            if not is_const(value):
                self.fail(f"the identity of tile.{name} must be a compile-time number, got {value!r}")
            if not dt.is_float and not _fits(value, dt):
                self.fail(f"the identity {value!r} of tile.{name} is not a value of {dt.name}")
            out.append(value)
        return out

    def _user_combiner(self, fn: object, name: str, many: bool) -> Combiner:
        if not is_function(fn):
            shape = "(elements, accumulators), each a tuple with one scalar per tile" if many else "(element, acc)"
            self.fail(f"the combiner of tile.{name} must be a @tile.function taking {shape}")

        def body(e: list[Value], acc: list[Value]) -> list[Value]:
            out = self.call_helper(fn, [tuple(e), tuple(acc)] if many else [e[0], acc[0]], {})
            results = out if many else (out,)
            if not isinstance(results, tuple) or len(results) != len(e):
                self.fail(
                    f"the combiner of tile.{name} over {len(e)} tiles must return a tuple of {len(e)} scalars (one "
                    f"per tile), got {type_name(out)}"
                )
            tiles = [self.as_tile(r, self.tile_of(x).dtype, "combiner result") for r, x in zip(results, e, strict=True)]
            if bad := [self.tile_of(t) for t in tiles if self.tile_of(t).shape]:
                self.fail(f"the combiner of tile.{name} must return scalars, got a {bad[0]}")
            return tiles

        return body

    def op_reduce_fn(self, op: LangOp, a: dict[str, Any]) -> object:
        xs, many = self._operands(a["x"], op.name)
        identities = self._identities(a["identity"], xs, many, op.name)
        flats = [self._flatten_for_axis(x, a["axis"]) for x in xs]
        axis = flats[0][1]
        ft = self.tile_of(flats[0][0])
        shape = ft.shape[:axis] + ft.shape[axis + 1 :]
        outs = self._region_op(
            "reduce",
            [f for f, _ in flats],
            axis,
            identities,
            body=self._user_combiner(a["fn"], op.name, many),
            out_shape=shape,
        )
        kept = [self._keep(o, self.tile_of(x), a["axis"], a["keepdims"]) for o, x in zip(outs, xs, strict=True)]
        return tuple(kept) if many else kept[0]

    def op_scan_fn(self, op: LangOp, a: dict[str, Any]) -> object:
        xs, many = self._operands(a["x"], op.name)
        identities = self._identities(a["identity"], xs, many, op.name)
        t = self.tile_of(xs[0])
        outs = self._region_op(
            "scan",
            xs,
            self.axis_arg(a["axis"], t.rank),
            identities,
            body=self._user_combiner(a["fn"], op.name, many),
            out_shape=t.shape,
            reverse=bool(a["reverse"]),
        )
        return tuple(outs) if many else outs[0]


def _fits(value: int | float, dt: DType) -> bool:
    """Whether the number ``value`` is exactly a value of the integer (or bool) dtype ``dt``."""
    if isinstance(value, float):
        return False  # an integer identity is written as an int (1, not 1.0, never inf)
    n = int(value)
    if dt.kind == "b":
        return n in (0, 1)
    lo, hi = (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.kind == "i" else (0, (1 << dt.bits) - 1)
    return lo <= n <= hi
