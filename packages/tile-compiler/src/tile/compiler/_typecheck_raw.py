"""Kernel-language rules for raw pointers and atomics, allowed only in kernels marked unchecked: ``x.ptr()``,
pointer arithmetic, gather/scatter and the atomics. Raw memory has one token chain (``RAW_TOKEN``); an atomic joins
every chain (its release half) and continues them all from its result (its acquire half).
"""

from __future__ import annotations

from typing import Any, cast

from tile.compiler._kir import Value
from tile.compiler._typecheck_arith import I1, I32, is_const
from tile.compiler._typecheck_math import MathMixin
from tile.compiler._typecheck_values import TensorV
from tile.compiler._types import DType, PtrType, TileType, TokenType, broadcast_shapes
from tile.compiler.lang._ops import LangOp

__all__ = ["RAW_TOKEN", "RawMixin"]

RAW_TOKEN = "$tok:$raw"
_ATOMIC_MODES = {
    "add": ("add", "add", "addf"),
    "max": ("max", "umax", ""),
    "min": ("min", "umin", ""),
    "xchg": ("xchg", "xchg", "xchg"),
    "and": ("and", "and", ""),
    "or": ("or", "or", ""),
    "xor": ("xor", "xor", ""),
}


class RawMixin(MathMixin):
    """``x.ptr()``, pointer offsets, gather, scatter and the atomics (unchecked kernels only)."""

    env: dict[str, object]
    unchecked: bool

    def require_unchecked(self, what: str) -> None:
        if not self.unchecked:
            self.fail(
                f"{what} is only allowed in kernels marked @tile.entry(unchecked=True): it bypasses the "
                "bounds and ownership checks"
            )

    def method_ptr(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        self.require_unchecked("x.ptr()")
        self.bind_simple("ptr", (), (), args, kw)
        assert recv.base is not None  # every tensor parameter has a base pointer
        return recv.base

    def pointer_offset(self, ptrs: Value, offsets: object) -> Value:
        pt = self.tile_of(ptrs)
        off = self.as_tile(offsets, I32 if is_const(offsets) else None, "pointer offset")
        ot = self.tile_of(off)
        if not isinstance(ot.elem, DType) or not ot.elem.is_int:
            self.fail(f"pointer offsets must be integers, got {ot.elem.name}")
        shape = broadcast_shapes(pt.shape, ot.shape)
        if shape is None:
            self.fail(f"pointer shape {pt.shape} and offset shape {ot.shape} do not broadcast")
        return self.em.one("offset", [self.broadcast(ptrs, shape), self.broadcast(off, shape)], pt.with_shape(shape))

    def _ptrs(self, v: object) -> tuple[TileType, DType]:
        self.require_unchecked("memory access through pointers")
        t = self.tile_of(v, "pointer tile")
        if not isinstance(t.elem, PtrType):
            self.fail(f"expected a tile of pointers (x.ptr() + offsets), got {t}")
        return t, t.elem.pointee

    def _mask(self, mask: object, shape: tuple[int, ...]) -> Value | None:
        if mask is None:
            return None
        m = self.as_tile(mask, what="mask")
        if self.tile_of(m).elem != I1:
            self.fail("the mask must be a bool tile (a comparison)")
        return self.broadcast(m, shape)

    def op_gather(self, op: LangOp, a: dict[str, Any]) -> object:
        if not self.unchecked:
            self.fail(
                "tile.gather(ptrs) through raw pointers is only allowed in kernels marked @tile.entry(unchecked=True); "
                "in a safe kernel, read an input at index tiles with the checked x.gather(i0, ..., padding=...)"
            )
        t, dt = self._ptrs(a["ptrs"])
        mask = self._mask(a["mask"], t.shape)
        pad = (
            self.broadcast(self.as_tile(a["padding"], dt if is_const(a["padding"]) else None), t.shape)
            if mask is not None
            else None
        )
        out, tok = self.em.emit(
            "load_ptr_tko",
            [a["ptrs"], mask, pad, self.env[RAW_TOKEN]],  # type: ignore[list-item]  # token
            [t.with_elem(dt), TokenType()],
            {"memory_ordering_semantics": "weak"},
        )
        self.env[RAW_TOKEN] = tok
        return out

    def _value_for(self, v: object, t: TileType, dt: DType) -> Value:
        val = self.as_tile(v, dt if is_const(v) else None, "stored value")
        if self.tile_of(val).elem != dt:
            self.fail(f"the value dtype {self.tile_of(val).elem.name} does not match the pointee dtype {dt.name}")
        return self.broadcast(val, t.shape)

    def op_scatter(self, op: LangOp, a: dict[str, Any]) -> object:
        t, dt = self._ptrs(a["ptrs"])
        val = self._value_for(a["value"], t, dt)
        (tok,) = self.em.emit(
            "store_ptr_tko",
            [a["ptrs"], val, self._mask(a["mask"], t.shape), self.env[RAW_TOKEN]],  # type: ignore[list-item]  # token
            [TokenType()],
            {"memory_ordering_semantics": "weak"},
        )
        self.env[RAW_TOKEN] = tok
        return None

    def op_atomic(self, op: LangOp, a: dict[str, Any]) -> object:
        t, dt = self._ptrs(a["ptrs"])
        signed_mode, unsigned_mode, float_mode = _ATOMIC_MODES[op.ir[0]]
        mode = float_mode if dt.is_float else unsigned_mode if dt.kind == "u" else signed_mode
        if not mode:
            self.fail(f"tile.{op.name} is not supported for {dt.name}")
        val = self._value_for(a["value"], t, dt)
        out, tok = self.em.emit(
            "atomic_rmw_tko",
            [a["ptrs"], val, self._mask(a["mask"], t.shape), self._release_token()],
            [t.with_elem(dt), TokenType()],
            {"memory_ordering_semantics": "acq_rel", "memory_scope": "device", "mode": mode},
        )
        self._acquired(tok)
        return out

    def op_atomic_cas(self, op: LangOp, a: dict[str, Any]) -> object:
        t, dt = self._ptrs(a["ptrs"])
        cmp, val = self._value_for(a["expected"], t, dt), self._value_for(a["value"], t, dt)
        out, tok = self.em.emit(
            "atomic_cas_tko",
            [a["ptrs"], cmp, val, self._mask(a["mask"], t.shape), self._release_token()],
            [t.with_elem(dt), TokenType()],
            {"memory_ordering_semantics": "acq_rel", "memory_scope": "device"},
        )
        self._acquired(tok)
        return out

    # Atomics are acq_rel at device scope, which orders a block's memory ops only along token chains: the release
    # half covers what its input token follows, the acquire half what follows its output token. One chain per
    # output (and one for raw pointers) would leave a partition store before a flag, or a load after it, unordered.
    def _release_token(self) -> Value:
        """A token after every memory op so far: the join of all chains (the release half of an atomic)."""
        chains = list({id(v): v for k, v in self.env.items() if k.startswith("$tok:")}.values())
        if len(chains) == 1:
            return cast(Value, chains[0])
        return self.em.one("join_tokens", [cast(list[Value], chains)], TokenType())

    def _acquired(self, token: Value) -> None:
        """Every chain continues from ``token`` (the acquire half: later memory ops stay after the atomic)."""
        for k in [k for k in self.env if k.startswith("$tok:")]:
            self.env[k] = token

    def bind_simple(
        self,
        name: str,
        params: tuple[str, ...],
        defaults: tuple[object, ...],
        args: list[object],
        kw: dict[str, object],
    ) -> dict[str, object]:
        """Bind a method's arguments (trailing ``defaults`` belong to the last parameters)."""
        raise NotImplementedError
