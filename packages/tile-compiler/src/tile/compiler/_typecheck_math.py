"""Kernel-language rules for elementwise math: ``tile.exp``, ``tile.maximum``, ``tile.truediv``, ``tile.fma``, ...

Float ops take Tile IR's floating-point modes where the Tile IR op has them (``rounding=``, ``flush_to_zero=``; see
``tile.compiler._math_modes``, which reads the Tile IR op catalog). A mode given on a call is marked explicit, so
the kernel's defaults (``@tile.entry(flush_to_zero=True, approx=True)``) never override it.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from tile.compiler._kir import Value
from tile.compiler._math_modes import ModeError, mode_attrs
from tile.compiler._typecheck_arith import F32, is_const, signedness
from tile.compiler._typecheck_reduce import ReduceMixin
from tile.compiler._types import DType
from tile.compiler.lang._ops import OPS, LangOp

__all__ = ["MathMixin"]

_OPERATOR = {"add": ast.Add, "sub": ast.Sub, "mul": ast.Mult, "truediv": ast.Div}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}


class MathMixin(ReduceMixin):
    """Elementwise math families of the op catalog, with their floating-point modes."""

    # Values known to be at most a tile count ``(tensor, tile shape, dim)``: ``tile.minimum(x, p.num_tiles[d])``. A
    # loop ``range(0, v)`` over such a value stays inside that partition dim (see ``_typecheck_loops``).
    below_count: dict[int, tuple[str, tuple[int, ...], int]]
    nonnegative: set[int]  # ids of integer scalars known >= 0: tile.maximum(v, c) with a constant c >= 0

    def modes(self, op: LangOp, ir_op: str, dtype: DType, a: dict[str, Any]) -> dict[str, Any]:
        """The Tile IR mode attributes of call ``a`` to ``op`` (lowering to ``ir_op`` on ``dtype``)."""
        try:
            return mode_attrs(f"tile.{op.name}", ir_op, dtype, a.get("rounding"), a.get("flush_to_zero"))
        except ModeError as exc:
            return self.fail(str(exc))

    def op_unary_float(self, op: LangOp, a: dict[str, Any]) -> object:
        x = self.as_tile(a["x"], F32 if is_const(a["x"]) else None, f"tile.{op.name} input")
        t = self.tile_of(x)
        if not isinstance(t.elem, DType) or not t.elem.is_float:
            self.fail(f"tile.{op.name} needs a float tile, got {t.elem.name}; convert with .astype(tile.f32)")
        return self.em.one(op.ir[0], [x], t, **self.modes(op, op.ir[0], t.elem, a))

    def op_unary(self, op: LangOp, a: dict[str, Any]) -> object:
        if is_const(a["x"]):
            return abs(a["x"]) if op.name == "abs" else -a["x"]
        t = self.tile_of(a["x"])
        if t.dtype.kind in "ub" and op.name == "negative":
            self.fail(f"cannot negate an unsigned or bool tile ({t.elem.name})")
        if t.dtype.kind in "ub":
            return a["x"]
        return self.em.one(op.ir[0] if t.dtype.is_float else op.ir[1], [a["x"]], t)

    def op_binary(self, op: LangOp, a: dict[str, Any]) -> object:
        propagate = a.get("propagate_nan")
        if propagate is not None and not isinstance(propagate, bool):
            self.fail(f"propagate_nan= of tile.{op.name} must be True or False, got {propagate!r}")
        if is_const(a["x"]) and is_const(a["y"]):
            cx, cy = a["x"], a["y"]
            if math.isnan(cx) or math.isnan(cy):  # as maxf/minf: the other operand, NaN only with propagate_nan
                return math.nan if propagate or (math.isnan(cx) and math.isnan(cy)) else (cy if math.isnan(cx) else cx)
            return max(cx, cy) if op.name == "maximum" else min(cx, cy)
        x, y = self.coerce(a["x"], a["y"], f"tile.{op.name}")
        t = self.tile_of(x)
        if t.dtype.is_float:
            attrs = self.modes(op, op.ir[0], t.dtype, a)
            return self.em.one(op.ir[0], [x, y], t, **attrs, **({"propagate_nan": True} if propagate else {}))
        for name in ("flush_to_zero", "propagate_nan"):
            if a.get(name) is not None:
                self.fail(f"{name}= of tile.{op.name} applies to float tiles, got {t.elem.name}")
        out = self.em.one(op.ir[1], [x, y], t, signedness=signedness(t.dtype))
        dims = [d for d in (self.count_dim(a["x"]), self.count_dim(a["y"])) if d is not None]
        if op.name == "minimum" and dims and t.rank == 0:
            self.below_count[out.id] = dims[0]  # min(v, count) <= count, whatever v (exact: no rounding, no wrap)
        if op.name == "maximum" and t.rank == 0 and self._stays_nonnegative(t.dtype, (a["x"], a["y"])):
            self.nonnegative.add(out.id)  # max(v, c) >= c >= 0, whatever v: a loop may start there (see LoopMixin)
        return out

    @staticmethod
    def _stays_nonnegative(dt: DType, operands: tuple[object, object]) -> bool:
        """Whether ``tile.maximum`` of ``operands`` in ``dt`` stays >= 0 as a loop's (signed, at least 32-bit) variable.

        One operand must be a constant ``c >= 0`` that ``dt`` holds (200 as an i8 wraps to -56), and ``dt`` must be
        signed or an unsigned type narrower than 32 bits (zero-extended): a u32 or u64 maximum may be ``2**32 - 1``,
        which the loop variable reads as -1.
        """
        if dt.kind == "i":
            top = 2 ** (dt.bits - 1) - 1
        elif dt.kind == "u" and dt.bits < 32:
            top = 2**dt.bits - 1
        else:
            return False
        return any(type(c) is int and 0 <= c <= top for c in operands)

    def count_dim(self, v: object) -> tuple[str, tuple[int, ...], int] | None:
        """The partition dim whose tile count ``v`` is (``p.num_tiles[d]``) or is at most, else None."""
        if not isinstance(v, Value):
            return None
        count = self.host_values.get(v.id)
        if count is not None and count.kind == "count":
            return (count.param, count.tile, count.dim)
        return self.below_count.get(v.id)

    def op_arith(self, op: LangOp, a: dict[str, Any]) -> object:
        """``tile.add/sub/mul/truediv``: the operator, with the modes Tile IR has for its float op."""
        x, y = a["x"], a["y"]
        sym = _SYMBOL[op.name]
        if is_const(x) and is_const(y):
            self.fail(f"tile.{op.name} needs a tile operand; write {x!r} {sym} {y!r} for constants")
        if op.name == "truediv":
            x, y = self._floaty(x), self._floaty(y)
        vx, vy = self.coerce(x, y, f"tile.{op.name}")
        dt = self.tile_of(vx).dtype
        if not dt.is_float:
            if a["rounding"] is not None or a["flush_to_zero"] is not None:
                self.fail(f"rounding= and flush_to_zero= of tile.{op.name} apply to float tiles, got {dt.name}")
            return self.elementwise(_OPERATOR[op.name], vx, vy, sym)
        return self.em.one(op.ir[0], [vx, vy], self.tile_of(vx), **self._rounded(op, op.ir[0], dt, a))

    def _rounded(self, op: LangOp, ir_op: str, dt: DType, a: dict[str, Any]) -> dict[str, Any]:
        """The modes of a rounded op: ``nearest_even`` unless the call (or later the kernel default) says other."""
        return {"rounding_mode": "nearest_even", **self.modes(op, ir_op, dt, a)}

    def op_binary_float(self, op: LangOp, a: dict[str, Any]) -> object:
        x, y = self.coerce(self._floaty(a["x"]), self._floaty(a["y"]), f"tile.{op.name}")
        t = self.tile_of(x)
        if not t.dtype.is_float:
            self.fail(f"tile.{op.name} needs float tiles, got {t.elem.name}; convert with .astype(tile.f32)")
        return self.em.one(op.ir[0], [x, y], t)

    def _floaty(self, v: object) -> object:
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v

    def op_clamp(self, op: LangOp, a: dict[str, Any]) -> object:
        low = self.op_binary(OPS["maximum"], {"x": a["x"], "y": a["lo"]})
        return self.op_binary(OPS["minimum"], {"x": low, "y": a["hi"]})

    def op_isnan(self, op: LangOp, a: dict[str, Any]) -> object:
        x = self.as_tile(a["x"], F32 if is_const(a["x"]) else None, "tile.isnan input")
        if not self.tile_of(x).dtype.is_float:
            self.fail(f"tile.isnan needs a float tile, got {self.tile_of(x).elem.name}")
        return self.compare_tiles(ast.NotEq, x, x)

    def op_bitcast(self, op: LangOp, a: dict[str, Any]) -> object:
        t = self.tile_of(a["x"], "tile.bitcast input")
        dt = self.dtype_arg(a["dtype"])
        if not isinstance(t.elem, DType) or t.elem.bits != dt.bits or dt.kind == "b":
            self.fail(f"tile.bitcast needs dtypes of one width, got {t.elem.name} and {dt.name}")
        return self.em.one("bitcast", [a["x"]], t.with_elem(dt))

    def op_fma(self, op: LangOp, a: dict[str, Any]) -> object:
        x, y = self.coerce(self._floaty(a["x"]), self._floaty(a["y"]), "tile.fma")
        z, x = self.coerce(self._floaty(a["z"]), x, "tile.fma")
        y = self.broadcast(y, self.tile_of(x).shape)
        t = self.tile_of(x)
        if not t.dtype.is_float:
            self.fail(f"tile.fma needs float tiles, got {t.elem.name}")
        return self.em.one("fma", [x, y, z], t, **self._rounded(op, "fma", t.dtype, a))
