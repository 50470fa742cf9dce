"""Kernel-language rules for shape ops, factories, conversions, reductions, scans and ``mma``.

Each ``op_<family>`` method implements one family of `tile.compiler.lang.OPS` rows: it checks arguments (shapes
are compile-time ints, tile dims powers of two, axes in range) and emits the Tile IR ops. Reductions and scans
build their combiner region here, inlining a user ``@tile.function`` for ``tile.reduce``/``tile.scan``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from tile.compiler._guards import Bound
from tile.compiler._kir import Block, Value
from tile.compiler._typecheck_arith import F32, I1, I32, I64, ArithMixin, is_const, signedness
from tile.compiler._types import DTYPES, MAX_TILE_EXTENT, DType, TileType, broadcast_shapes, is_pow2
from tile.compiler.lang._ops import LangOp

__all__ = ["ShapeMixin"]

T = TypeVar("T")

_MMA_FLOAT: dict[str, tuple[str, ...]] = {
    "f16": ("f16", "f32"),
    "bf16": ("f32",),
    "tf32": ("f32",),
    "f32": ("f32",),
    "f64": ("f64",),
    "f8e4m3fn": ("f16", "f32"),
    "f8e5m2": ("f16", "f32"),
}


def _identity(kind: str, dt: DType) -> int | float:
    if kind in ("addf", "addi"):
        return 0.0 if dt.is_float else 0
    if kind in ("mulf", "muli"):
        return 1.0 if dt.is_float else 1
    big = math.inf if dt.is_float else (1 << (dt.bits - 1)) - 1 if dt.kind == "i" else (1 << dt.bits) - 1
    small = -math.inf if dt.is_float else -(1 << (dt.bits - 1)) if dt.kind == "i" else 0
    return small if kind in ("maxf", "maxi") else big


class ShapeMixin(ArithMixin):
    """Shape, factory, conversion, reduction, scan and matrix-multiply rules."""

    entry_block: Block
    index_constants: dict[int, Value]
    # Host-known facts for index guards (see `tile.compiler._guards`): values equal to a host-computable `Bound` (or,
    # for sub-tile counts, at most one: both are only used as a loop's upper bound), and non-negative index values
    # below one.
    host_values: dict[int, Bound]
    index_bounds: dict[int, Bound]

    def at_entry(self, build: Callable[[], T]) -> T:
        """Run ``build`` emitting at the end of the kernel's entry block (outside every loop and branch)."""
        em = self.em
        saved = em.depth
        em.depth = 0
        try:
            with self.in_block(self.entry_block):
                return build()
        finally:
            em.depth = saved

    def at_depth(self, depth: int, build: Callable[[], T]) -> T:
        """Run ``build`` emitting at loop depth ``depth`` (at most the current one), just before the loop it holds."""
        em = self.em
        if depth >= em.depth:
            return build()
        saved = em.depth
        em.depth = depth
        try:
            with self.in_block(em.hoist[depth]):
                return build()
        finally:
            em.depth = saved

    def call_helper(self, fn: Any, args: list[object], kwargs: dict[str, object]) -> object:
        """Inline a ``@tile.function`` (implemented by the checker)."""
        raise NotImplementedError

    @contextmanager
    def in_block(self, block: Block) -> Iterator[Block]:
        """Emit into ``block`` for the duration of the ``with``."""
        saved = self.em.block
        self.em.block = block
        try:
            yield block
        finally:
            self.em.block = saved

    # -- arguments --------------------------------------------------------------------------------------------
    def shape_arg(self, v: object, what: str = "shape") -> tuple[int, ...]:
        """A compile-time shape (an int or a tuple of ints) whose dims are powers of two."""
        items = v if isinstance(v, tuple) else (v,)
        if not all(type(d) is int for d in items):
            self.fail(f"the {what} must be compile-time ints (literals, Const parameters or const generics), got {v!r}")
        dims = cast("tuple[int, ...]", items)
        if bad := [d for d in dims if not is_pow2(d)]:
            self.fail(f"tile dimensions must be powers of two, got {bad[0]} in {what} {dims}")
        if big := [d for d in dims if d > MAX_TILE_EXTENT]:
            self.fail(f"tile dimensions must be at most 2**30 (what Tile IR can encode), got {big[0]} in {what} {dims}")
        return dims

    def axis_arg(self, axis: object, rank: int) -> int:
        """A compile-time axis in range for a tile of ``rank`` dims (negative counts from the end)."""
        if type(axis) is not int or not -rank <= axis < rank:
            self.fail(f"axis must be a compile-time int in [{-rank}, {rank}), got {axis!r}")
        return axis % rank

    def dtype_arg(self, v: object) -> DType:
        """A dtype argument (``tile.f32``...)."""
        if not isinstance(v, DType):
            self.fail(f"expected a dtype such as tile.f32, got {v!r}")
        return v

    def one_index_type(self, idx: list[Value]) -> list[Value]:
        """``idx`` in one integer type, as Tile IR's indexed ops require: all i64 when any is (a loop index widened so
        that its step cannot wrap), else as they are."""
        wide = DTYPES["i64"]
        if any(self.tile_of(v).elem == wide for v in idx):
            return [self.convert(v, wide) for v in idx]
        return idx

    def scalar_index(self, v: object, what: str = "index") -> Value:
        """An integer scalar (constant or runtime) as an i32 (or i64) rank-0 tile."""
        if isinstance(v, (bool, float)):
            self.fail(f"{what} must be an integer, got {v!r}")
        if isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                self.fail(f"{what} {v} does not fit a 64-bit index")
            if v not in self.index_constants:  # one definition at the entry, so guards using it can be hoisted
                dt = I32 if -(2**31) <= v < 2**31 else I64  # 2**32 as an i32 would be tile 0
                c = self.index_constants[v] = self.at_entry(lambda: self.materialize(v, dt))
                self.host_values[c.id] = Bound("const", value=v)
                if v >= 0:
                    self.index_bounds[c.id] = Bound("const", value=v + 1)
            return self.index_constants[v]
        t = self.tile_of(v, what)
        if t.shape or not isinstance(t.elem, DType) or not t.elem.is_int:
            self.fail(f"{what} must be an integer scalar, got a {t}")
        return v  # type: ignore[return-value]  # checked Value

    # -- factories, conversions, shapes ---------------------------------------------------------------------
    def op_full(self, op: LangOp, a: dict[str, Any]) -> object:
        shape = self.shape_arg(a["shape"])
        value = a.get("value", 0 if op.name == "zeros" else 1)
        dt = self.dtype_arg(a["dtype"]) if a["dtype"] is not None else None
        if is_const(value):
            dt = dt if dt is not None else (F32 if op.name != "full" else self.const_dtype(value, None))
            return self.materialize(value, dt, shape)
        v = self.as_tile(value, dt, "fill value")
        if self.tile_of(v).shape:
            self.fail("the fill value of tile.full must be a scalar")
        return self.broadcast(v, shape)

    def op_arange(self, op: LangOp, a: dict[str, Any]) -> object:
        if type(a["n"]) is not int:
            self.fail(f"tile.arange takes one compile-time int length, got {a['n']!r}")
        (n,) = self.shape_arg(a["n"], "length")
        out = self.em.one("iota", [], TileType(I32, (n,)))
        return self.convert(out, self.dtype_arg(a["dtype"])) if a["dtype"] is not None else out

    def op_astype(self, op: LangOp, a: dict[str, Any]) -> object:
        dt = self.dtype_arg(a["dtype"])
        if is_const(a["x"]):
            return (
                self.materialize(a["x"], dt)
                if not (isinstance(a["x"], float) and dt.kind in "iub")
                else self.convert(self.materialize(a["x"], F32), dt)
            )
        return self.convert(a["x"], dt)

    def op_reshape(self, op: LangOp, a: dict[str, Any]) -> object:
        t = self.tile_of(a["x"], "reshape source")
        shape = self.shape_arg(a["shape"])
        if math.prod(shape) != math.prod(t.shape):
            self.fail(f"cannot reshape a tile of shape {t.shape} ({math.prod(t.shape)} elements) to {shape}")
        return a["x"] if shape == t.shape else self.em.one("reshape", [a["x"]], t.with_shape(shape))

    def op_broadcast_to(self, op: LangOp, a: dict[str, Any]) -> object:
        shape = self.shape_arg(a["shape"])
        return self.broadcast(self.as_tile(a["x"]), shape)

    def op_expand_dims(self, op: LangOp, a: dict[str, Any]) -> object:
        t = self.tile_of(a["x"])
        axis = self.axis_arg(a["axis"], t.rank + 1)
        return self.em.one("reshape", [a["x"]], t.with_shape((*t.shape[:axis], 1, *t.shape[axis:])))

    def op_permute(self, op: LangOp, a: dict[str, Any]) -> object:
        t = self.tile_of(a["x"])
        axes = a.get("axes")
        perm = tuple(reversed(range(t.rank))) if axes is None else axes
        if not isinstance(perm, tuple) or sorted(perm) != list(range(t.rank)):
            self.fail(f"axes must be a permutation of {tuple(range(t.rank))}, got {perm!r}")
        shape = tuple(t.shape[i] for i in perm)
        return self.em.one("permute", [a["x"]], t.with_shape(shape), permutation=list(perm))

    op_transpose = op_permute

    def op_cat(self, op: LangOp, a: dict[str, Any]) -> object:
        x, y, axis_value = a["x"], a["y"], a["axis"]
        if isinstance(x, tuple):  # cuTile's spelling: tile.cat((x, y), axis)
            if axis_value is None:
                y, axis_value = None, y
            if y is not None or len(x) != 2:
                self.fail("tile.cat takes two tiles and an axis: tile.cat(x, y, axis) or tile.cat((x, y), axis)")
            x, y = x
        if y is None or axis_value is None:
            self.fail("tile.cat takes two tiles and an axis: tile.cat(x, y, axis) or tile.cat((x, y), axis)")
        tx, ty = self.tile_of(x), self.tile_of(y)
        axis = self.axis_arg(axis_value, tx.rank)
        same = tx.rank == ty.rank and all(i == axis or tx.shape[i] == ty.shape[i] for i in range(tx.rank))
        if tx.elem != ty.elem or not same or not is_pow2(tx.shape[axis] + ty.shape[axis]):
            self.fail(
                f"cannot concatenate tiles {tx} and {ty} along axis {axis}: element types and the other dims "
                "must match, and the result dim must be a power of two"
            )
        shape = tuple(d + ty.shape[axis] if i == axis else d for i, d in enumerate(tx.shape))
        return self.em.one("cat", [x, y], tx.with_shape(shape), dim=axis)

    def op_extract(self, op: LangOp, a: dict[str, Any]) -> object:
        t = self.tile_of(a["x"])
        shape = self.shape_arg(a["shape"])
        index = a["index"] if isinstance(a["index"], tuple) else (a["index"],)
        if (
            len(shape) != t.rank
            or len(index) != t.rank
            or any(s > d or d % s for s, d in zip(shape, t.shape, strict=False))
        ):
            self.fail(f"extract needs a shape and an index of rank {t.rank} with the shape dividing {t.shape}")
        # Tile IR leaves an index outside [0, dim // shape) undefined: a constant one is refused here, a run-time one
        # is checked in the kernel and clamped (see `extract_index`).
        idx = []
        for d, (i, s, dim) in enumerate(zip(index, shape, t.shape, strict=True)):
            if type(i) is int and not 0 <= i < dim // s:
                self.fail(
                    f"extract index {i} along dim {d} is outside the tile: a tile of shape {t.shape} has "
                    f"{dim // s} slice(s) of {s} along dim {d} (indices 0..{dim // s - 1})"
                )
            v = self.scalar_index(i, "extract index")
            idx.append(v if type(i) is int else self.extract_index(v, dim // s))
        return self.em.one("extract", [a["x"], idx], t.with_shape(shape))

    def extract_index(self, v: Value, count: int) -> Value:
        """A run-time ``tile.extract`` index checked to lie in ``[0, count)`` and clamped into it (the checker)."""
        raise NotImplementedError

    def op_where(self, op: LangOp, a: dict[str, Any]) -> object:
        cond = a["cond"]
        if is_const(cond):
            return a["x"] if cond else a["y"]
        ct = self.tile_of(cond, "condition")
        if ct.elem != I1:
            self.fail(f"the condition of tile.where must be a bool tile (a comparison), got {ct}")
        if is_const(a["x"]) and is_const(a["y"]):
            kinds = {type(a["x"]), type(a["y"])}
            dt = F32 if float in kinds else I32 if int in kinds else I1
            x, y = self.materialize(a["x"], dt), self.materialize(a["y"], dt)
        else:
            x, y = self.coerce(a["x"], a["y"], "tile.where")

        shape = broadcast_shapes(ct.shape, self.tile_of(x).shape)
        if shape is None:
            self.fail(f"tile.where: condition shape {ct.shape} does not broadcast with {self.tile_of(x).shape}")
        c, x, y = (self.broadcast(v, shape) for v in (cond, x, y))
        return self.em.one("select", [c, x, y], self.tile_of(x))

    # -- reductions and scans -------------------------------------------------------------------------------
    def _combiner_region(self, types: list[TileType], body: Callable[[list[Value], list[Value]], list[Value]]) -> Block:
        block = Block()
        pairs = [(self.em.value(t), self.em.value(t)) for t in types]
        block.args = [v for p in pairs for v in p]
        with self.in_block(block):
            out = body([p[0] for p in pairs], [p[1] for p in pairs])
            self.em.emit("yield", [out], [])
        return block

    def _region_op(
        self,
        name: str,
        xs: list[Value],
        axis: int,
        identities: list[int | float],
        *,
        body: Callable[[list[Value], list[Value]], list[Value]],
        out_shape: tuple[int, ...],
        **attrs: Any,
    ) -> list[Value]:
        types = [self.tile_of(x) for x in xs]
        region = self._combiner_region([TileType(t.elem, ()) for t in types], body)
        results = [t.with_shape(out_shape) for t in types]
        return self.em.emit(name, [xs], list(results), {"dim": axis, **attrs, "identities": identities}, [region])

    def _flatten_for_axis(self, x: Value, axis: object) -> tuple[Value, int]:
        t = self.tile_of(x)
        if axis is None:
            n = math.prod(t.shape)
            flat = x if t.rank == 1 else self.em.one("reshape", [x], t.with_shape((n,)))
            return flat, 0
        return x, self.axis_arg(axis, t.rank)

    def _keep(self, out: Value, t: TileType, axis: object, keepdims: object) -> Value:
        if not keepdims:
            return out
        keep = (1,) * t.rank if axis is None else tuple(1 if i == axis % t.rank else d for i, d in enumerate(t.shape))  # type: ignore[operator]  # axis checked
        return self.em.one("reshape", [out], t.with_shape(keep))

    def _elem_op(
        self, kind: str, dt: DType, propagate_nan: bool = False
    ) -> Callable[[list[Value], list[Value]], list[Value]]:
        attrs: dict[str, Any] = {"propagate_nan": True} if propagate_nan else {}
        if kind in ("maxi", "mini"):
            attrs["signedness"] = signedness(dt)
        if kind in ("addf", "mulf"):
            attrs["rounding_mode"] = "nearest_even"
        if kind in ("addi", "muli"):
            attrs["overflow"] = "none"
        return lambda e, acc: [self.em.one(kind, [e[0], acc[0]], self.tile_of(e[0]), **attrs)]

    def reduce_kind(self, op: LangOp, x: object, want: str = "reduction") -> tuple[Value, DType, str]:
        v = self.as_tile(x, what=f"tile.{op.name} input")
        dt = self.tile_of(v).dtype
        if dt.kind == "b":
            self.fail(f"tile.{op.name} is not defined for bool tiles; convert with .astype(tile.i32)")
        return v, dt, op.ir[0] if dt.is_float or len(op.ir) == 1 else op.ir[1]

    def op_reduce(self, op: LangOp, a: dict[str, Any]) -> object:
        x, dt, kind = self.reduce_kind(op, a["x"])
        propagate = a.get("propagate_nan")
        if propagate is not None and (not isinstance(propagate, bool) or not dt.is_float):
            self.fail(
                f"propagate_nan= of tile.{op.name} takes True or False, on float tiles (got {propagate!r}, {dt.name})"
            )
        t = self.tile_of(x)
        flat, axis = self._flatten_for_axis(x, a["axis"])
        ft = self.tile_of(flat)
        shape = ft.shape[:axis] + ft.shape[axis + 1 :]
        (out,) = self._region_op(
            "reduce",
            [flat],
            axis,
            [_identity(kind, dt)],
            body=self._elem_op(kind, dt, bool(propagate)),
            out_shape=shape,
        )
        return self._keep(out, t, a["axis"], a["keepdims"])

    def op_argreduce(self, op: LangOp, a: dict[str, Any]) -> object:
        x, dt, _ = self.reduce_kind(op, a["x"])
        t = self.tile_of(x)
        flat, axis = self._flatten_for_axis(x, a["axis"])
        ft = self.tile_of(flat)
        n = ft.shape[axis]
        idx = self.em.one("iota", [], TileType(I32, (n,)))
        if ft.rank > 1:
            idx = self.em.one("reshape", [idx], TileType(I32, tuple(n if i == axis else 1 for i in range(ft.rank))))
            idx = self.em.one("broadcast", [idx], TileType(I32, ft.shape))
        better = ast.Gt if op.name == "argmax" else ast.Lt
        worst = (
            _identity("maxf" if op.name == "argmax" else "minf", dt)
            if dt.is_float
            else _identity("maxi" if op.name == "argmax" else "mini", dt)
        )

        def pick(e: list[Value], acc: list[Value]) -> list[Value]:
            strictly = self.compare_tiles(better, e[0], acc[0])
            tie = self.compare_tiles(ast.Eq, e[0], acc[0])
            first = self.compare_tiles(ast.Lt, e[1], acc[1])
            take = self.em.one(
                "ori", [strictly, self.em.one("andi", [tie, first], self.tile_of(tie))], self.tile_of(tie)
            )
            return [self.em.one("select", [take, e[k], acc[k]], self.tile_of(e[k])) for k in (0, 1)]

        shape = ft.shape[:axis] + ft.shape[axis + 1 :]
        _, out = self._region_op("reduce", [flat, idx], axis, [worst, 2**31 - 1], body=pick, out_shape=shape)
        return self._keep(out, t.with_elem(I32), a["axis"], a["keepdims"])

    def op_scan(self, op: LangOp, a: dict[str, Any]) -> object:
        x, dt, kind = self.reduce_kind(op, a["x"])
        t = self.tile_of(x)
        axis = self.axis_arg(a["axis"], t.rank)
        (out,) = self._region_op(
            "scan",
            [x],
            axis,
            [_identity(kind, dt)],
            body=self._elem_op(kind, dt),
            out_shape=t.shape,
            reverse=bool(a["reverse"]),
        )
        return out

    # -- matrix multiply ------------------------------------------------------------------------------------
    def op_mma(self, op: LangOp, a: dict[str, Any]) -> object:
        tc = self.tile_of(a["acc"], "mma operand 'acc'")
        a = {**a, **dict(zip("ab", self._batched(a["a"], a["b"], tc.shape[:-2]), strict=True))}
        ta, tb = (self.tile_of(a[k]) for k in ("a", "b"))
        self._check_mma_shapes(ta, tb, tc)
        da, db, dc = ta.dtype, tb.dtype, tc.dtype
        if da.is_float:
            if da != db or dc.name not in _MMA_FLOAT.get(da.name, ()):
                self.fail(
                    f"mma of {da.name} x {db.name} into {dc.name} is not supported; supported: "
                    + ", ".join(f"{k}->{'/'.join(v)}" for k, v in _MMA_FLOAT.items())
                )
            return self.em.one("mmaf", [a["a"], a["b"], a["acc"]], tc)
        if da.bits != 8 or db.bits != 8 or not db.is_int or dc != DTYPES["i32"]:
            self.fail(f"integer mma takes i8/u8 operands and an i32 accumulator, got {da.name}, {db.name}, {dc.name}")
        return self.em.one(
            "mmai", [a["a"], a["b"], a["acc"]], tc, signedness_lhs=signedness(da), signedness_rhs=signedness(db)
        )

    def _batched(self, a: object, b: object, batch: tuple[int, ...] | None) -> tuple[Value, Value]:
        """``a`` and ``b`` with their batch dims broadcast like NumPy's matmul: to ``batch`` (the accumulator's) when
        given, else to each other's. Tile IR's mma takes one batch dim shared by all operands, so a broadcast batch
        (``(1, M, K) @ (B, K, N)``, ``(M, K) @ (B, K, N)``) is made explicit here."""
        ta, tb = self.tile_of(a, "mma operand 'a'"), self.tile_of(b, "mma operand 'b'")
        if not (2 <= ta.rank <= 3 and 2 <= tb.rank <= 3):
            self.fail(
                f"matrix multiply takes 2-D (M, K) or 3-D (batch, M, K) tiles, got a {ta.shape} and b {tb.shape}; "
                "reshape a vector to (1, K) or (K, 1) first"
            )
        want = broadcast_shapes(ta.shape[:-2], tb.shape[:-2])
        if want is not None and batch is not None:
            want = batch if broadcast_shapes(want, batch) == batch else None
        if want is None:
            into = f" into acc batch {batch}" if batch is not None else ""
            self.fail(
                f"the batch dims of a {ta.shape} and b {tb.shape} do not broadcast{into} "
                "(each batch dim must match or be 1)"
            )
        va, vb = cast(Value, a), cast(Value, b)
        if not want:
            return va, vb
        return self.broadcast(va, want + ta.shape[-2:]), self.broadcast(vb, want + tb.shape[-2:])

    def _check_mma_shapes(self, ta: TileType, tb: TileType, tc: TileType) -> None:
        ok = ta.rank == tb.rank == tc.rank and ta.rank in (2, 3)
        ok = ok and ta.shape[-1] == tb.shape[-2] and tc.shape[-2:] == (ta.shape[-2], tb.shape[-1])
        ok = ok and ta.shape[:-2] == tb.shape[:-2] == tc.shape[:-2]
        if not ok:
            self.fail(
                f"mma shapes do not line up: a {ta.shape} @ b {tb.shape} into acc {tc.shape} "
                "(want a (M, K), b (K, N), acc (M, N), optionally with a leading batch dim)"
            )

    def op_matmul(self, op: LangOp, a: dict[str, Any]) -> object:
        return self.matmul(a["a"], a["b"])

    def matmul(self, a: object, b: object) -> Value:
        a, b = self._batched(a, b, None)
        ta, tb = self.tile_of(a, "matmul operand"), self.tile_of(b, "matmul operand")
        dt = ta.dtype
        acc_dt = DTYPES["i32"] if dt.is_int else DTYPES["f64"] if dt.name == "f64" else F32
        shape = ta.shape[:-1] + tb.shape[-1:]
        acc = self.materialize(0 if dt.is_int else 0.0, acc_dt, shape)
        out = self.op_mma(op=_MMA_OP, a={"a": a, "b": b, "acc": acc})
        out = cast(Value, out)
        return self.convert(out, dt) if dt.is_float and dt.name != "tf32" else out


_MMA_OP = LangOp("mma", "mma", ())
