"""Tile arithmetic for the type checker: constants, promotion, broadcasting, conversions and operators.

Invariants: every emitted elementwise op has operands of one tile type (the checker inserts conversions and
broadcasts first, following `tile.compiler._types.promote` and `broadcast_shapes`); Python constants fold exactly
and become splat constants of the other operand's type only when they meet a runtime tile.
"""

from __future__ import annotations

import ast
import operator
import sys
from collections.abc import Callable
from typing import Any, NoReturn, cast

from tile.compiler._kir import Value
from tile.compiler._typecheck_defined import DefinedMixin
from tile.compiler._typecheck_values import Emitter
from tile.compiler._types import DTYPES, DType, TileType, broadcast_shapes, promote

__all__ = ["ArithMixin", "is_const", "signedness"]

_FOLD: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
# operator -> (float op, int op); "" where the kind is not supported.
_BINARY: dict[type, tuple[str, str]] = {
    ast.Add: ("addf", "addi"),
    ast.Sub: ("subf", "subi"),
    ast.Mult: ("mulf", "muli"),
    ast.Div: ("divf", ""),
    ast.FloorDiv: ("divf", "divi"),
    ast.Mod: ("remf", "remi"),
    ast.Pow: ("pow", ""),
    ast.BitAnd: ("", "andi"),
    ast.BitOr: ("", "ori"),
    ast.BitXor: ("", "xori"),
    ast.LShift: ("", "shli"),
    ast.RShift: ("", "shri"),
}
_PREDICATE = {
    ast.Eq: "equal",
    ast.NotEq: "not_equal",
    ast.Lt: "less_than",
    ast.LtE: "less_than_or_equal",
    ast.Gt: "greater_than",
    ast.GtE: "greater_than_or_equal",
}
_DEFINED = {"shli", "shri", "divi", "remi"}  # integer ops with inputs Tile IR may leave undefined (`_defined`)
_SIGNED_ATTR = {"divi", "remi", "maxi", "mini", "shri", "cmpi", "exti", "itof", "ftoi"}
_ROUNDED = {"addf", "subf", "mulf", "divf", "fma"}
I1 = DTYPES["i1"]
I32 = DTYPES["i32"]
I64 = DTYPES["i64"]
F32 = DTYPES["f32"]


_MAX_F64_INT = int(sys.float_info.max)  # larger ints have no float value: float() raises OverflowError


_MAX_FOLD_BITS = 1 << 16  # a folded int larger than this is no kernel constant; computing it could take hours


def _too_large(op: type, a: object, b: object) -> bool:
    """An int ``a ** b`` or ``a << b`` whose result would pass `_MAX_FOLD_BITS` (checked before Python computes it:
    ``2 ** 10 ** 10`` hung the compiler). Other folds grow at most as their operands, which are bounded so."""
    if not (isinstance(a, int) and isinstance(b, int)) or b <= 0:
        return False
    a, b = int(a), int(b)
    if op is ast.Pow:
        return abs(a) > 1 and (abs(a).bit_length() - 1) * b > _MAX_FOLD_BITS
    return op is ast.LShift and a != 0 and a.bit_length() + b > _MAX_FOLD_BITS


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def _fits(c: int, dt: DType) -> bool:
    """``c`` is a value of ``dt`` or (signed dtypes) an unsigned bit pattern of its width, as in ``x & 0xFFFFFFFF``."""
    low = 0 if dt.kind == "u" else -(1 << (dt.bits - 1))
    return low <= c < (1 << dt.bits)


def is_const(v: object) -> bool:
    """True for Python number/bool constants."""
    return isinstance(v, (bool, int, float))


def signedness(dt: DType) -> str:
    """The Tile IR signedness keyword for integer dtype ``dt``."""
    return "signed" if dt.kind == "i" else "unsigned"


def type_name(v: object) -> str:
    """How a value's type reads in a message."""
    if isinstance(v, Value):
        t = v.type
        if isinstance(t, TileType):
            return f"{t.elem.name} scalar" if not t.shape else f"{t.elem.name} tile of shape {t.shape}"
        return str(t)
    if is_const(v):
        return f"{type(v).__name__} constant"
    kinds = {
        "TensorV": "tensor parameter",
        "PartitionV": "partition",
        "SubtilesV": "sub-tile view",
        "BoundMethod": "method",
        "TileIndex": "tile index",
        "TileIter": "tile iterator",
        "LangOp": "tile function",
        "DType": "dtype",
        "tuple": "tuple",
        "NoneType": "None",
        "str": "string",
        "function": "function",
        "module": "module",
    }
    return kinds.get(type(v).__name__, "Python object")


class ArithMixin(DefinedMixin):
    """Constants, conversions, broadcasting and operators over runtime tiles and Python constants."""

    em: Emitter

    def fail(self, message: str, node: ast.AST | None = None) -> NoReturn:
        """Raise a CompileError at ``node`` (default: the node being checked)."""
        raise NotImplementedError

    def tile_of(self, v: object, what: str = "operand") -> TileType:
        """The tile type of runtime value ``v`` (a compile error for anything else)."""
        if isinstance(v, Value) and isinstance(v.type, TileType):
            return v.type
        return self.fail(f"expected a tile for the {what}, got {type_name(v)}")

    def const_dtype(self, c: object, other: DType | None) -> DType:
        """The dtype a Python constant takes next to a tile of dtype ``other`` (its own default when None)."""
        if isinstance(c, bool):
            return I1 if other is None or other.kind == "b" else other
        if isinstance(c, int):
            return other if other is not None and other.kind in "iuf" else I32
        if isinstance(c, float):
            if other is not None and other.kind in "iub":
                self.fail(
                    f"cannot combine the float constant {c!r} with a {other.name} tile; "
                    f"convert the tile first with .astype(tile.f32)"
                )
            return other if other is not None else F32
        return self.fail(f"expected a number, got {type_name(c)}")

    def materialize(self, c: object, dtype: DType | None = None, shape: tuple[int, ...] = ()) -> Value:
        """A splat constant tile for Python constant ``c`` (dtype defaults from the constant's kind)."""
        dt = dtype if dtype is not None else self.const_dtype(c, None)
        if isinstance(c, float) and dt.kind in "iub":
            self.fail(f"cannot convert the float constant {c!r} to {dt.name}")
        if dt.kind == "u" and isinstance(c, int) and c < 0:
            self.fail(f"the negative constant {c} does not fit the unsigned dtype {dt.name}")
        if dt.kind in "iu" and isinstance(c, int) and not isinstance(c, bool) and not _fits(int(c), dt):
            # The bytecode keeps the low bits only: 2**32 + 5 next to an i32 tile was silently 5.
            low = 0 if dt.kind == "u" else -(1 << (dt.bits - 1))
            self.fail(
                f"the constant {c} does not fit {dt.name} (its values and bit patterns span "
                f"[{low}, {(1 << dt.bits) - 1}]); use a wider dtype (.astype(tile.i64)) or a constant in range"
            )
        if dt.is_float and isinstance(c, int) and not isinstance(c, bool) and abs(int(c)) > _MAX_F64_INT:
            self.fail(f"the constant {c} is too large for any float dtype (beyond f64's range)")
        num = cast("int | float", c)
        value: int | float | bool = float(num) if dt.is_float else bool(num) if dt.kind == "b" else int(num)
        return self.em.constant(value, TileType(dt, shape))

    def as_tile(self, v: object, dtype: DType | None = None, what: str = "operand") -> Value:
        """``v`` as a runtime tile: constants are materialized, tiles pass through (converted to ``dtype``)."""
        if is_const(v):
            return self.materialize(v, dtype if dtype is not None else None)
        t = self.tile_of(v, what)
        val = cast(Value, v)
        return self.convert(val, dtype) if dtype is not None and t.elem != dtype else val

    def broadcast(self, v: Value, shape: tuple[int, ...]) -> Value:
        """Broadcast tile ``v`` to ``shape`` (reshape to equal rank, then broadcast)."""
        t = self.tile_of(v)
        if t.shape == shape:
            return v
        if broadcast_shapes(t.shape, shape) != shape:
            self.fail(f"cannot broadcast a tile of shape {t.shape} to shape {shape}")
        if len(t.shape) < len(shape):
            full = (1,) * (len(shape) - len(t.shape)) + t.shape
            v = self.em.one("reshape", [v], t.with_shape(full))
        return self.em.one("broadcast", [v], t.with_shape(shape))

    def convert(self, v: Value, dt: DType) -> Value:  # noqa: PLR0911  # one return per conversion kind
        """Convert tile ``v`` to element dtype ``dt`` (``astype``)."""
        src = self.tile_of(v)
        if isinstance(src.elem, DType) is False:
            self.fail("pointer tiles cannot be converted with astype")
        s = src.dtype
        out = src.with_elem(dt)
        if s == dt or (s.ir == dt.ir and s.kind in "iu" and dt.kind in "iu"):
            return v if s == dt else self.em.one("bitcast", [v], out)
        if dt.kind == "b":
            zero = self.materialize(0, s, src.shape) if s.kind != "f" else self.materialize(0.0, s, src.shape)
            return self.compare_tiles(ast.NotEq, v, zero)
        if s.is_float and dt.is_float:
            return self.em.one("ftof", [v], out, rounding_mode="nearest_even")
        if s.is_float:
            return self._float_to_int(v, dt)
        if dt.is_float:
            return self.em.one("itof", [v], out, signedness=signedness(s), rounding_mode="nearest_even")
        if dt.bits > s.bits:
            return self.em.one("exti", [v], out, signedness=signedness(s))
        return self.em.one("trunci", [v], out, overflow="none")

    def coerce(self, a: object, b: object, what: str) -> tuple[Value, Value]:
        """Two operands as tiles of one dtype and one (broadcast) shape."""
        if is_const(a) or is_const(b):
            tile, c, flip = (b, a, True) if is_const(a) else (a, b, False)
            t = self.tile_of(tile, what)
            if not isinstance(t.elem, DType):
                self.fail(f"{what} is not defined for pointer tiles")
            k = self.materialize(c, self.const_dtype(c, t.dtype), t.shape)
            return (k, tile) if flip else (tile, k)  # type: ignore[return-value]  # tile is a Value
        ta, tb = self.tile_of(a, what), self.tile_of(b, what)
        if not isinstance(ta.elem, DType) or not isinstance(tb.elem, DType):
            self.fail(f"{what} is not defined for pointer tiles; use ptr + offsets for pointer arithmetic")
        dt = promote(ta.dtype, tb.dtype)
        if dt is None:
            self.fail(
                f"{what} needs operands of one dtype, got {ta.elem.name} and {tb.elem.name}; "
                f"convert one with .astype(...)"
            )
        shape = broadcast_shapes(ta.shape, tb.shape)
        if shape is None:
            self.fail(f"{what}: shapes {ta.shape} and {tb.shape} do not broadcast")
        va = self.broadcast(self.convert(a, dt), shape)  # type: ignore[arg-type]  # checked tiles
        vb = self.broadcast(self.convert(b, dt), shape)  # type: ignore[arg-type]  # checked tiles
        return va, vb

    def binary(self, op: ast.operator, a: object, b: object) -> object:
        """``a <op> b`` for constants (folded) and tiles."""
        sym = _SYMBOL.get(type(op), type(op).__name__)
        if is_const(a) and is_const(b):
            if type(op) not in _FOLD:
                self.fail(f"operator '{sym}' needs tiles, got two constants")
            if _too_large(type(op), a, b):
                self.fail(f"constant expression '{sym}' of {_short(a)} and {_short(b)} is too large to compute")
            try:
                return _FOLD[type(op)](a, b)
            except (ArithmeticError, ValueError, TypeError) as exc:
                self.fail(f"constant expression failed: {exc}")
        if isinstance(op, ast.MatMult):
            return self.matmul(a, b)
        if isinstance(op, ast.Add) and isinstance(a, Value) and isinstance(self.tile_of(a).elem, DType) is False:
            return self.pointer_offset(a, b)
        va, vb = self.coerce(a, b, f"'{sym}'")
        return self.elementwise(type(op), va, vb, sym, known=b if is_const(b) else None)

    def elementwise(self, op: type, va: Value, vb: Value, sym: str, known: object = None) -> Value:
        """Emit the Tile IR op for binary operator ``op`` on two tiles of one type (``known``: the right operand's
        Python constant, when it was one)."""
        t = self.tile_of(va)
        dt = t.dtype
        fop, iop = _BINARY[op]
        name = fop if dt.is_float else iop
        if not name or (dt.kind == "b" and op not in (ast.BitAnd, ast.BitOr, ast.BitXor)):
            kind = "float" if dt.is_float else "bool" if dt.kind == "b" else "integer"
            hint = "; use // for integer division or convert with .astype(tile.f32)" if op is ast.Div else ""
            self.fail(f"operator '{sym}' is not defined for {kind} tiles{hint}")
        attrs: dict[str, Any] = {}
        if name in _SIGNED_ATTR:
            attrs["signedness"] = signedness(dt)
        if name == "divi":
            attrs["rounding"] = "negative_inf" if dt.kind == "i" else "zero"
        if name in ("addi", "subi", "muli", "shli"):
            attrs["overflow"] = "none"
        if name in _ROUNDED:
            attrs["rounding_mode"] = "nearest_even"
        if name in _DEFINED:
            return self._defined(name, va, vb, known, attrs)
        out = self.em.one(name, [va, vb], t, **attrs)
        if op is ast.FloorDiv and dt.is_float:
            out = self.em.one("floor", [out], t)
        if op is ast.Mod and dt.kind != "u":
            out = self._floor_mod(out, vb)
        return out

    def _floor_mod(self, rem: Value, divisor: Value) -> Value:
        """Python's ``%`` from a truncating remainder: add the divisor when the signs differ (so ``a == (a // b) * b
        + a % b`` holds with the flooring ``//``)."""
        t = self.tile_of(rem)
        zero = self.materialize(0.0 if t.dtype.is_float else 0, t.dtype, t.shape)
        nonzero = self.compare_tiles(ast.NotEq, rem, zero)
        signs_differ = self.compare_tiles(
            ast.NotEq, self.compare_tiles(ast.Lt, rem, zero), self.compare_tiles(ast.Lt, divisor, zero)
        )
        fix = self.em.one("andi", [nonzero, signs_differ], self.tile_of(nonzero))
        add = "addf" if t.dtype.is_float else "addi"
        extra = {"rounding_mode": "nearest_even"} if t.dtype.is_float else {"overflow": "none"}
        return self.em.one("select", [fix, self.em.one(add, [rem, divisor], t, **extra), rem], t)

    def compare(self, op: ast.cmpop, a: object, b: object) -> object:
        """``a <cmp> b``: folded for constants, an i1 tile otherwise."""
        if type(op) not in _PREDICATE:
            self.fail(f"comparison '{type(op).__name__}' is not supported in kernel code")
        if is_const(a) and is_const(b):
            return _FOLD[type(op)](a, b)
        va, vb = self.coerce(a, b, f"comparison '{_SYMBOL[type(op)]}'")
        return self.compare_tiles(type(op), va, vb)

    def compare_tiles(self, op: type[ast.cmpop], va: Value, vb: Value) -> Value:
        """Emit cmpf/cmpi on two tiles of one type."""
        t = self.tile_of(va)
        out = t.with_elem(I1)
        if t.dtype.is_float:
            ordering = "unordered" if op is ast.NotEq else "ordered"
            return self.em.one("cmpf", [va, vb], out, comparison_predicate=_PREDICATE[op], comparison_ordering=ordering)
        sign = "unsigned" if t.dtype.kind == "b" else signedness(t.dtype)
        return self.em.one("cmpi", [va, vb], out, comparison_predicate=_PREDICATE[op], signedness=sign)

    def matmul(self, a: object, b: object) -> Value:
        """``a @ b``: implemented by the mma family."""
        raise NotImplementedError

    def pointer_offset(self, ptrs: Value, offsets: object) -> Value:
        """``ptrs + offsets``: implemented by the memory family."""
        raise NotImplementedError
