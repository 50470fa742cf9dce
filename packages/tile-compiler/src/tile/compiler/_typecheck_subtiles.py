"""Kernel-language rules for sub-tiles of a block's own output tile: ``zs = z.subtiles(shape)``.

A block that owns an output tile may store and read it back in smaller pieces (a chunked row normalisation stores
a ``(BM, N)`` row block as ``(BM, BN)`` chunks). ``zs.store(t, (i, j))`` / ``zs.load((i, j))`` take indices
*relative to the owned tile*; the access goes to tile ``own * ratio + (i, j)`` of a partition of the output by the
sub-tile shape, where ``ratio = tile // sub``. Invariants:

* the sub-tile shape divides the owned tile's shape (both are powers of two, so "each dim is at most the tile's"),
  so no sub-tile straddles two blocks' tiles;
* an index reaches memory only inside ``[0, zs.num_tiles[d])``, the sub-tiles of the owned tile that touch the
  tensor: proven (a loop over ``range(zs.num_tiles[d])``, the constant 0), refused at compile time (a constant
  outside ``[0, ratio)``) or checked in the kernel like any other unproven index (an ``assert`` on the CPU
  interpreter, a fault on the GPU); an index that is only checked is also clamped into the range before the access,
  so even a store that runs after a failed (asynchronous) GPU check stays inside this block's own tile;
* accesses chain through the output's token (``token_key``) like ``z.store``/``z.load``; edge sub-tiles are masked
  by the partition view (padding on load, no write outside the tensor).
"""

from __future__ import annotations

import ast
from typing import cast

from tile.compiler._guards import Bound
from tile.compiler._kir import Value
from tile.compiler._typecheck_arith import I1, I32, I64
from tile.compiler._typecheck_memory import MemoryMixin, token_key
from tile.compiler._typecheck_values import SubtilesV, TensorV
from tile.compiler._types import TileType
from tile.compiler.lang._ops import OPS

__all__ = ["SubtileMixin"]


class SubtileMixin(MemoryMixin):
    """``z.subtiles(shape, at=None, padding="zero")`` and the ``load``/``store`` methods of its result."""

    def method_tensor_subtiles(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        self.fail(
            f"'{recv.name}' is an input: subtiles() cuts a tile this block owns of a Mut output; an input can be read "
            f"anywhere, with {recv.name}.partition(shape).load(index)"
        )

    def method_mut_subtiles(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("subtiles", ("shape", "at", "padding"), (None, "zero"), args, kw)
        sub = self.shape_arg(a["shape"], "sub-tile shape")
        if len(sub) != recv.rank:
            self.fail(f"the sub-tile shape {sub} must have one dim per output dim ({recv.rank})")
        if any(s > t for s, t in zip(sub, recv.tile, strict=True)):
            self.fail(
                f"the sub-tile shape {sub} must divide the tile {recv.tile} this block owns of '{recv.name}' (each "
                "dim at most the tile's, both powers of two): a larger sub-tile would reach other blocks' tiles"
            )
        own = self._own_index(recv, a["at"], "subtiles")
        view = self.partition(recv, sub, a["padding"])
        ratio = tuple(t // s for t, s in zip(recv.tile, sub, strict=True))
        totals = self.em.emit("get_index_space_shape", [view.view], [TileType(I32)] * len(sub))
        base: list[Value] = []
        counts: list[Value] = []
        for d, (o, r) in enumerate(zip(own, ratio, strict=True)):
            dt = self.tile_of(o).dtype
            b = o if r == 1 else cast(Value, self.binary(ast.Mult(), o, r))
            left = cast(Value, self.binary(ast.Sub(), self.convert(totals[d], dt), b))
            # At least 1: the owned tile starts inside the tensor (own < its tile count), so some sub-tile touches it.
            # At most the ratio, even when it is 1: the sub-tiles past it are other blocks' tiles.
            counts.append(cast(Value, self.op_binary(OPS["minimum"], {"x": left, "y": r})))
            base.append(b)
            # The count is at most cdiv(extent, sub), which the host knows: a loop up to it indexes another tensor's
            # partition with a launch-time check ("that bound <= its tile count") instead of one in the kernel.
            self.host_values[counts[-1].id] = Bound("count", recv.name, sub, d)
        return SubtilesV(recv, view, ratio, tuple(base), tuple(counts))

    def method_subtiles_store(self, recv: SubtilesV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("store", ("tile", "index", "latency", "allow_tma"), (None, None), args, kw)
        z = recv.tensor
        value = self.value_to_store(a["tile"], z, recv.tile, f"'{z.name}' sub-tiles have shape")
        idx, exact = self._subtile_index(recv, a["index"])
        scope = self.store_scope()
        # A coordinate that is the innermost loop's variable, used unclamped: a distinct sub-tile each iteration.
        injective = scope is not None and any(c is scope.bound for c in exact)
        hints = self._hints(a["latency"], a["allow_tma"])
        self.emit_store(value, recv.view.view, idx, token_key(z), hints, injective=injective)
        return None

    def method_subtiles_load(self, recv: SubtilesV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("load", ("index", "latency", "allow_tma"), (None, None), args, kw)
        idx, _ = self._subtile_index(recv, a["index"])
        return self.load_view(recv.view, tuple(idx), self._hints(a["latency"], a["allow_tma"]), trusted=True)

    def _subtile_index(self, zs: SubtilesV, index: object) -> tuple[list[Value], list[object]]:
        """The partition index of sub-tile ``index`` (relative to the owned tile), kept inside the owned tile.

        Per dim: a proven index (the constant 0, a loop variable of ``range(zs.num_tiles[d])``) is used as is; a
        constant outside ``[0, ratio)`` is a compile error (it names another block's tile); anything else is checked
        in the kernel (``0 <= j < zs.num_tiles[d]``) and clamped into that range, so no store leaves the own tile
        even where the check only faults asynchronously. Unchecked kernels get neither check nor clamp. Also returns
        the coordinates used exactly as given (neither converted nor clamped).
        """
        coords = index if isinstance(index, tuple) else (index,)
        z = zs.tensor
        if len(coords) != len(zs.tile):
            self.fail(f"the sub-tile index needs {len(zs.tile)} coordinates (one per dim), got {len(coords)}")
        out: list[Value] = []
        exact: list[object] = []
        checks: list[Value] = []
        for d, j in enumerate(coords):
            if type(j) is int and not 0 <= j < zs.ratio[d]:
                self.fail(
                    f"sub-tile index {j} along dim {d} is outside the tile this block owns of '{z.name}' "
                    f"({zs.ratio[d]} sub-tile(s) of {zs.tile[d]} along dim {d}): it would reach another block's tile"
                )
            v = self.scalar_index(j, "sub-tile index")
            if self.tile_of(v).dtype not in (I32, I64):  # narrow or unsigned: as a signed 64-bit index
                v = self.convert(v, I64)
            if not self.unchecked and not self._proven(zs, d, j, v):
                ok, v = self._checked(zs.counts[d], v)
                checks.append(ok)
            elif v is j:
                exact.append(j)
            out.append(cast(Value, self.binary(ast.Add(), zs.base[d], v)))
        if checks:
            self._sub_guard(zs, checks)
        return self.one_index_type(out), exact

    def _proven(self, zs: SubtilesV, d: int, j: object, v: Value) -> bool:
        """``j`` lies in ``[0, zs.num_tiles[d])`` by construction."""
        if type(j) is int and j == 0:
            return True  # every owned tile has a first sub-tile inside the tensor
        _, bound = self.in_range.get(v.id, (None, None))
        return bound is not None and bound.id == zs.counts[d].id

    def _checked(self, count: Value, v: Value) -> tuple[Value, Value]:
        """``0 <= v < count`` as a bool, and ``v`` clamped into ``[0, count)`` (``count >= 1``)."""
        dt = I64 if I64 in (self.tile_of(count).dtype, self.tile_of(v).dtype) else I32  # the wider: nothing wraps
        count, v = self.convert(count, dt), self.convert(v, dt)
        low = self.compare_tiles(ast.GtE, v, self.materialize(0, dt))
        ok = self.em.one("andi", [low, self.compare_tiles(ast.Lt, v, count)], TileType(I1))
        top = cast(Value, self.binary(ast.Sub(), count, 1))
        inside = self.op_binary(OPS["minimum"], {"x": self.op_binary(OPS["maximum"], {"x": v, "y": 0}), "y": top})
        return ok, cast(Value, inside)

    def _sub_guard(self, zs: SubtilesV, checks: list[Value]) -> None:
        ok = checks[0]
        for c in checks[1:]:
            ok = self.em.one("andi", [ok, c], TileType(I1))
        self._trap_unless(ok, f"sub-tile index out of range for {zs.tensor.name}.subtiles({zs.tile})")

    def _trap_unless(self, ok: Value, message: str) -> None:
        """Stop the kernel unless ``ok``: an ``assert`` naming the access (CPU interpreter, debug guards) or a fault."""
        if self.assert_guards:
            where = f" at {self.em.loc}" if self.em.loc else ""
            self.em.emit("assert", [ok], [], {"message": message + where})
        else:
            self._fault_unless(ok)

    def extract_index(self, v: Value, count: int) -> Value:
        """A run-time ``tile.extract`` index: checked in the kernel (``0 <= v < count``) and clamped into that range.

        Tile IR leaves an extract outside the tile undefined (on the GPU a register tile may be spilled to local
        memory, and the index would address past it); the clamp keeps the access inside even where the check only
        faults asynchronously. Narrow and unsigned indices are read as the signed 64-bit value they hold, and the
        result is an i32 (what Tile IR's extract takes). Unchecked kernels get neither check nor clamp.
        """
        if not self.unchecked:
            if self.tile_of(v).dtype not in (I32, I64):
                v = self.convert(v, I64)
            ok, v = self._checked(self.materialize(count, self.tile_of(v).dtype), v)
            self._trap_unless(ok, f"tile.extract index out of range (0 <= index < {count} along its dim)")
        return self.convert(v, I32)  # Tile IR's extract takes i32 indices; a checked one is below count
