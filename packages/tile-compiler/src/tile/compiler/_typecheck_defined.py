"""Integer and conversion ops made defined for every input, as the CPU interpreter defines them.

Tile IR (and the LLVM under tileiras) may leave some inputs undefined: a shift by the bit width or more, a division or
remainder by zero or of the minimum by -1, ``ftoi`` of an infinity. A compiler may then fold away a bounds check that
reads such a result, and the GPU would access memory the interpreter showed in bounds. The lowering here gives those
inputs the interpreter's meaning (a ``select`` around a run-time amount or divisor, a clamp before ``ftoi``) and makes
a constant one outside the defined range a compile error at the user's line.
"""

from __future__ import annotations

import ast
import math
import struct
from typing import Any, NoReturn

from tile.compiler._kir import Value
from tile.compiler._typecheck_values import Emitter
from tile.compiler._types import DTYPES, DType, TileType

__all__ = ["DefinedMixin"]

I1 = DTYPES["i1"]
F32 = DTYPES["f32"]


def _float_at_most(n: int, single: bool) -> float:
    """The largest f32 (``single``) or f64 value that is at most the integer ``n`` (``n`` well inside their range)."""
    if not single:
        top = float(n)
        return math.nextafter(top, 0.0) if int(top) > n else top
    (top,) = struct.unpack("<f", struct.pack("<f", float(n)))  # rounded to the nearest f32
    if int(top) > n:  # rounded up past n: the next f32 toward zero (positive n: one step down in its bits)
        (bits,) = struct.unpack("<I", struct.pack("<f", top))
        (top,) = struct.unpack("<f", struct.pack("<I", bits - 1))
    return float(top)


def _signedness(dt: DType) -> str:
    return "signed" if dt.kind == "i" else "unsigned"


class DefinedMixin:
    """The defined forms of ``shli``/``shri``/``divi``/``remi`` and float-to-int conversion (see the module)."""

    em: Emitter

    def fail(self, message: str, node: ast.AST | None = None) -> NoReturn:
        """Raise a CompileError at ``node`` (the arithmetic mixin's)."""
        raise NotImplementedError

    def tile_of(self, v: object, what: str = "operand") -> TileType:
        """The tile type of a runtime value (the arithmetic mixin's)."""
        raise NotImplementedError

    def materialize(self, c: object, dtype: DType | None = None, shape: tuple[int, ...] = ()) -> Value:
        """A splat constant tile (the arithmetic mixin's)."""
        raise NotImplementedError

    def compare_tiles(self, op: type[ast.cmpop], va: Value, vb: Value) -> Value:
        """``cmpf``/``cmpi`` of two tiles (the arithmetic mixin's)."""
        raise NotImplementedError

    def _floor_mod(self, rem: Value, divisor: Value) -> Value:
        """Python's ``%`` from a truncating remainder (the arithmetic mixin's)."""
        raise NotImplementedError

    def _defined(self, name: str, va: Value, vb: Value, known: object, attrs: dict[str, Any]) -> Value:
        """An integer shift or division whose every input is defined, as the interpreter defines it: Tile IR (and the
        LLVM under tileiras) may treat a shift by the bit width or more, or a division by zero, as undefined, and a
        compiler may then fold away a bounds check that reads the result. A constant amount or divisor outside the
        defined range is a compile error; a run-time one is made defined in the kernel: a shift by ``bits`` or more
        gives 0 (a signed right shift, the sign), a division or remainder by zero divides by 1 instead, and a signed
        one by -1 negates, wrapping (see `defined_divide`)."""
        t = self.tile_of(va)
        dt = t.dtype
        if name in ("divi", "remi"):
            out = self.defined_divide(name, va, vb, known, attrs)
        elif isinstance(known, (bool, int)):
            if not 0 <= int(known) < dt.bits:
                self.fail(f"a shift by {int(known)} is outside 0..{dt.bits - 1} for {dt.name} tiles")
            out = self.em.one(name, [va, vb], t, **attrs)
        else:
            bits = self.materialize(dt.bits, dt, t.shape)
            ok = self.em.one(
                "cmpi", [vb, bits], t.with_elem(I1), comparison_predicate="less_than", signedness="unsigned"
            )
            if name == "shri" and dt.kind == "i":  # all sign bits: the shift by bits - 1
                amount = self.em.one("select", [ok, vb, self.materialize(dt.bits - 1, dt, t.shape)], t)
                out = self.em.one(name, [va, amount], t, **attrs)
            else:
                shifted = self.em.one(name, [va, vb], t, **attrs)
                out = self.em.one("select", [ok, shifted, self.materialize(0, dt, t.shape)], t)
        return self._floor_mod(out, vb) if name == "remi" and dt.kind != "u" else out

    def defined_divide(self, name: str, va: Value, vb: Value, known: object, attrs: dict[str, Any]) -> Value:
        """``divi`` or ``remi`` of ``va`` by ``vb`` (``known``: its Python constant, if it was one), defined for every
        input as the interpreter defines it. Tile IR leaves a division by zero undefined, and a signed division of the
        minimum by -1 (it overflows; LLVM's ``sdiv``/``srem`` of it are undefined too), and a compiler may fold away a
        bounds check that reads an undefined quotient. A constant 0 is a compile error; a constant -1 (signed) is a
        negation (0 - x, wrapping: the minimum stays the minimum) or a remainder of 0, without the op; a run-time
        divisor of 0 (or, signed, -1) is replaced by 1 before the op, and a quotient by -1 is the negation."""
        t = self.tile_of(va)
        dt = t.dtype
        signed = dt.kind == "i"
        if isinstance(known, (bool, int)):
            if int(known) == 0:
                self.fail("integer division or remainder by the constant 0")
            if not (signed and int(known) == -1):
                return self.em.one(name, [va, vb], t, **attrs)
            if name == "remi":
                return self.materialize(0, dt, t.shape)
            return self.em.one("subi", [self.materialize(0, dt, t.shape), va], t, overflow="none")
        bad = self.compare_tiles(ast.Eq, vb, self.materialize(0, dt, t.shape))
        if signed:
            minus_one = self.compare_tiles(ast.Eq, vb, self.materialize(-1, dt, t.shape))
            bad = self.em.one("ori", [bad, minus_one], t.with_elem(I1))
        safe = self.em.one("select", [bad, self.materialize(1, dt, t.shape), vb], t)
        out = self.em.one(name, [va, safe], t, **attrs)
        if signed and name == "divi":  # the remainder by 1 is already the remainder by -1 (0)
            negated = self.em.one("subi", [self.materialize(0, dt, t.shape), va], t, overflow="none")
            out = self.em.one("select", [minus_one, negated, out], t)
        return out

    def next_index(self, iv: Value, ub: Value, step: Value) -> Value:
        """The value a ``range`` loop's variable ``iv`` (below ``ub``) takes next, ``iv + step`` (``step`` positive),
        without wrapping: ``ub`` itself once it would reach or pass ``ub``. Python's ``range`` stops there; a wrapping
        ``iv + step`` near the top of the type (``range(a, 2**63 - 1, 2**62)``) would be negative and still below
        ``ub``, and the loop would go on with a variable it never had. ``ub - iv`` is positive and below ``2**bits``,
        so its wrapping difference read unsigned is exact, and ``iv + step < ub`` exactly when it exceeds ``step``."""
        t = self.tile_of(iv)
        left = self.em.one("subi", [ub, iv], t, overflow="none")
        more = self.em.one(
            "cmpi", [left, step], t.with_elem(I1), comparison_predicate="greater_than", signedness="unsigned"
        )
        added = self.em.one("addi", [iv, step], t, overflow="none")
        return self.em.one("select", [more, added, ub], t)

    def _float_to_int(self, v: Value, dt: DType) -> Value:
        """``ftoi`` of a value clamped into ``dt``'s range first, NaN to 0 (truncating toward zero): Tile IR leaves an
        out-of-range or infinite input undefined (without the 13.4 ``saturating`` flag, which older bytecode lacks),
        and a compiler may then fold away a bounds check that reads the result. Narrow floats are widened to f32
        first (exactly); the bounds are the representable values nearest the integer range's ends, inside it."""
        if self.tile_of(v).dtype.name not in ("f32", "f64"):
            v = self.em.one("ftof", [v], self.tile_of(v).with_elem(F32), rounding_mode="nearest_even")
        t = self.tile_of(v)
        low, high = (0, 2**dt.bits - 1) if dt.kind == "u" else (-(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1)
        lo = self.materialize(float(low), t.dtype, t.shape)  # 0 or a power of two: exact in f32 and f64
        hi = self.materialize(_float_at_most(high, t.dtype.name == "f32"), t.dtype, t.shape)
        c = self.em.one("select", [self.compare_tiles(ast.Lt, v, lo), lo, v], t)
        c = self.em.one("select", [self.compare_tiles(ast.Gt, c, hi), hi, c], t)
        nan = self.compare_tiles(ast.NotEq, v, v)  # unordered: true only for NaN
        c = self.em.one("select", [nan, self.materialize(0.0, t.dtype, t.shape), c], t)
        out = t.with_elem(dt)
        return self.em.one("ftoi", [c], out, signedness=_signedness(dt), rounding_mode="nearest_int_to_zero")
