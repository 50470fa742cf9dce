"""``x.gather(i0, i1, ..., padding=0, mask=None)``: a checked, element-wise indexed read of an input tensor (safe
kernels).

Each element of the result reads ``x[i0[e], i1[e], ...]`` (the index tiles broadcast together) or ``padding`` where
any index is outside ``0 <= i[d] < x.extents[d]`` (or where the caller's ``mask``, ANDed in, is false). It lowers
to a masked ``load_ptr_tko`` through the tensor's own base pointer and strides: ``base + sum(i[d] * stride[d])``
and the mask both computed in 64 bits, so no index (negative, past the end, near ``2**31``) can wrap into an
address inside the tensor that it does not name, and a masked-off element is never read. Why this is safe: the
mask keeps every read inside the tensor, and an input is read-only for the whole launch (the launcher refuses an
input that overlaps an output of the same launch), so no block can be writing what it reads. Outputs are refused:
other blocks may be writing any element of one.
"""

from __future__ import annotations

import ast
from typing import cast

from tile.compiler._kir import Value
from tile.compiler._typecheck_arith import I1, I64, is_const, type_name
from tile.compiler._typecheck_memory import ENTRY_TOKEN
from tile.compiler._typecheck_subtiles import SubtileMixin
from tile.compiler._typecheck_values import TensorV
from tile.compiler._types import DType, PtrType, TileType, TokenType, broadcast_shapes

__all__ = ["GatherMixin"]


class GatherMixin(SubtileMixin):
    """``x.gather(...)`` on an input tensor; on a ``Mut`` output, a compile error."""

    def method_mut_gather(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        self.fail(
            f"'{recv.name}' is a Mut output: other blocks may be writing any element of it, so a gather from it "
            f"would race; outputs are read and written only through their own tiles ({recv.name}.load(), "
            f"{recv.name}.store(t)); gather from an input tensor parameter instead"
        )

    def method_tensor_gather(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        if extra := sorted(set(kw) - {"padding", "mask"}):
            self.fail(
                f"{recv.name}.gather() takes the index tiles, padding= and mask=, got the keyword '{extra[0]}'; "
                f"call {recv.name}.gather(i0, ..., padding=0, mask=None)"
            )
        raw = args[0] if len(args) == 1 and isinstance(args[0], tuple) else tuple(args)
        if len(raw) != recv.rank:
            self.fail(
                f"{recv.name}.gather() takes one index tile per dim of '{recv.name}' ({recv.rank}), got {len(raw)}"
            )
        indices = [self._gather_index(recv, d, i) for d, i in enumerate(raw)]
        shape: tuple[int, ...] | None = ()
        for v in indices:
            shape = broadcast_shapes(cast(tuple[int, ...], shape), self.tile_of(v).shape)
            if shape is None:
                shapes = ", ".join(str(self.tile_of(i).shape) for i in indices)
                self.fail(f"the index tiles of {recv.name}.gather() must broadcast together, got shapes {shapes}")
        assert shape is not None  # every step above either broadcast or failed
        wide = [self.broadcast(self.convert(v, I64), shape) for v in indices]
        pad = self._gather_padding(recv, kw.get("padding", 0), shape)
        mask = self._inside(recv, wide, shape)
        if kw.get("mask") is not None:  # the caller's mask can only narrow the bounds mask
            user = cast(Value, self._mask(kw["mask"], shape))
            mask = user if mask is None else self.em.one("andi", [mask, user], TileType(I1, shape))
        assert recv.base is not None  # every tensor parameter has a base pointer
        ptrs = self.broadcast(recv.base, shape)
        if wide:
            ptrs = self.em.one("offset", [ptrs, self._element_offset(recv, wide)], TileType(PtrType(recv.dtype), shape))
        out, _ = self.em.emit(
            "load_ptr_tko",
            [ptrs, mask, pad if mask is not None else None, cast(Value, self.env[ENTRY_TOKEN])],
            [TileType(recv.dtype, shape), TokenType()],
            {"memory_ordering_semantics": "weak"},
        )
        return out

    def _gather_index(self, recv: TensorV, d: int, i: object) -> Value:
        """Index ``d`` as an integer tile (a Python int becomes an i64 scalar: any int is an index, in or out)."""
        if isinstance(i, bool) or not (isinstance(i, (int, Value))):
            self.fail(
                f"index {d} of {recv.name}.gather() must be an integer tile or int, got {type_name(i)}; "
                "index tiles come from tile.arange, arithmetic on block ids, or a loaded int tile"
            )
        v = self.as_tile(i, I64 if is_const(i) else None, f"index {d} of {recv.name}.gather()")
        elem = self.tile_of(v).elem
        if not isinstance(elem, DType) or not elem.is_int or elem == I1:
            self.fail(
                f"index {d} of {recv.name}.gather() must be an integer tile, got {type_name(v)}; "
                "convert it with .astype(tile.i32)"
            )
        return v

    def _gather_padding(self, recv: TensorV, pad: object, shape: tuple[int, ...]) -> Value:
        """The value read where an index is out of bounds: a constant or a tile of ``x``'s dtype."""
        dt = recv.dtype
        if is_const(pad):
            kind = "a bool" if dt.kind == "b" else "a float or int" if dt.is_float else "an int"
            ok = isinstance(pad, bool) if dt.kind == "b" else not isinstance(pad, bool)
            ok = ok and (dt.is_float or not isinstance(pad, float))
            if not ok:
                self.fail(
                    f"padding= of {recv.name}.gather() must be {kind} constant for a {dt.name} tensor, got {pad!r}"
                )
            return self.materialize(pad, dt, shape)
        if not isinstance(pad, Value) or self.tile_of(pad).elem != dt:
            self.fail(
                f"padding= of {recv.name}.gather() must be a constant or a {dt.name} tile (the tensor's dtype), "
                f"got {type_name(pad)}"
            )
        if broadcast_shapes(self.tile_of(pad).shape, shape) != shape:
            self.fail(f"padding= of shape {self.tile_of(pad).shape} does not broadcast to the gather shape {shape}")
        return self.broadcast(pad, shape)

    def _inside(self, recv: TensorV, wide: list[Value], shape: tuple[int, ...]) -> Value | None:
        """AND over the dims of ``0 <= i[d] < extent[d]`` (64-bit compares), or None for a rank-0 tensor."""
        mask: Value | None = None
        zero = self.materialize(0, I64, shape)
        for w, ext in zip(wide, recv.extents, strict=True):
            bound = self.materialize(ext, I64, shape) if isinstance(ext, int) else self._splat64(ext, shape)
            low = self.compare_tiles(ast.GtE, w, zero)
            high = self.compare_tiles(ast.Lt, w, bound)
            inside = self.em.one("andi", [low, high], TileType(I1, shape))
            mask = inside if mask is None else self.em.one("andi", [mask, inside], TileType(I1, shape))
        return mask

    def _element_offset(self, recv: TensorV, wide: list[Value]) -> Value:
        """``sum(i[d] * stride[d])`` in i64 elements. In-bounds lanes cannot wrap (the launcher admits only views
        whose every element is addressable in 64 bits); other lanes may, in wrapping arithmetic, and are masked off."""
        total: Value | None = None
        shape = self.tile_of(wide[0]).shape
        for w, stride in zip(wide, recv.strides, strict=True):
            if isinstance(stride, int) and stride == 1:
                term = w  # a unit-stride dim (the specialization says so): no multiply
            else:
                s = self.materialize(stride, I64, shape) if isinstance(stride, int) else self._splat64(stride, shape)
                term = self.elementwise(ast.Mult, w, s, "*")
            total = term if total is None else self.elementwise(ast.Add, total, term, "+")
        assert total is not None  # rank >= 1 here
        return total

    def _splat64(self, v: Value, shape: tuple[int, ...]) -> Value:
        return self.broadcast(self.convert(v, I64), shape)
