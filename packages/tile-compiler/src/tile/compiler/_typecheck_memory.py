"""Kernel-language rules for memory views, loads, stores and grid queries. Beside them: index guards
(``_typecheck_guards``), raw pointers and atomics (``_typecheck_raw``), print and assert (``_typecheck_debug``),
elementwise math (``_typecheck_math``).

Memory safety lives here: a ``Mut`` output is stored only at this block's own tile (``store`` takes no index),
inputs are read through partition views whose out-of-bounds elements are padded, and raw pointers (``x.ptr()``,
gather/scatter, atomics) exist only in kernels marked unchecked. Token threading: reads of inputs use the entry
token; each access to an output or to raw memory chains through that output's (or raw memory's) token, which the
checker carries through loops and branches like a variable.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, cast

from tile.compiler._guards import Bound
from tile.compiler._kir import Value
from tile.compiler._store_scope import StoreScope
from tile.compiler._typecheck_arith import I32, I64, is_const, signedness
from tile.compiler._typecheck_guards import GuardMixin, TileDim
from tile.compiler._typecheck_raw import RAW_TOKEN
from tile.compiler._typecheck_values import PartitionV, TensorV, TileIndex, TileIter
from tile.compiler._types import (
    PADDINGS,
    DType,
    PartitionViewType,
    TileType,
    TokenType,
    broadcast_shapes,
)
from tile.compiler.lang._ops import OPS, LangOp

__all__ = ["RAW_TOKEN", "MemoryMixin", "TileDim", "token_key"]

ENTRY_TOKEN = "$tok:$entry"


def token_key(t: TensorV) -> str:
    """The environment key of the token chain that orders accesses to ``t``."""
    return f"$tok:{t.name}" if t.mut else ENTRY_TOKEN


class MemoryMixin(GuardMixin):
    """Views, loads, stores and grid queries (index guards: `GuardMixin`; raw pointers and atomics: `RawMixin`;
    print, assert: `DebugMixin`)."""

    env: dict[str, object]
    unchecked: bool
    arch: str
    own_grid: bool  # one block per output tile (`Specialization.own_grid`): a tiles() walk runs once per block
    grid_values: dict[str, tuple[Value, ...]]
    owned_tiles: dict[tuple[int, ...], TensorV]  # value ids of the coordinates of a `TileIndex` -> its output

    def op_cdiv(self, op: LangOp, a: dict[str, Any]) -> object:
        x, y = a["a"], a["b"]
        if type(y) is int and y == 0:
            self.fail("tile.cdiv by the constant 0")
        if type(x) is int and type(y) is int:
            return -(-x // y)
        vx, vy = self.coerce(x, y, "tile.cdiv")
        if not self.tile_of(vx).dtype.is_int:
            self.fail("tile.cdiv needs integers")
        t = self.tile_of(vx)
        attrs = {"signedness": signedness(t.dtype), "rounding": "positive_inf"}
        return self.defined_divide("divi", vx, vy, y if is_const(y) else None, attrs)

    # -- grid -------------------------------------------------------------------------------------------------
    def op_grid(self, op: LangOp, a: dict[str, Any]) -> object:
        return self.grid(op.ir[0])

    def grid(self, name: str) -> tuple[Value, ...]:
        """The block id or grid size, computed once at the kernel's entry (loop-invariant by construction)."""
        if name not in self.grid_values:
            values = self.at_entry(lambda: tuple(self.em.emit(name, [], [TileType(I32)] * 3)))
            facts = self.index_bounds if name == "get_tile_block_id" else self.host_values
            facts.update((v.id, Bound("grid", dim=axis)) for axis, v in enumerate(values))
            self.grid_values[name] = values
        return self.grid_values[name]

    # -- views, loads, stores -------------------------------------------------------------------------------
    def tensor_arg(self, v: object, what: str, *, mut: bool | None = None) -> TensorV:
        if not isinstance(v, TensorV) or (mut is not None and v.mut != mut):
            want = "a Mut output parameter" if mut else "a tensor parameter"
            self.fail(
                f"{what} must be {want}, got {v!r}"
                if not isinstance(v, Value)
                else f"{what} must be {want}, got a tile"
            )
        return v

    def partition(self, t: TensorV, shape: object, padding: object = None, order: object = None) -> PartitionV:
        tile = self.shape_arg(shape, "partition shape")
        if len(tile) != t.rank:
            self.fail(f"the partition shape {tile} must have one dim per tensor dim ({t.rank})")
        if padding is not None and padding not in PADDINGS:
            self.fail(f"padding must be one of {', '.join(PADDINGS)} (or None), got {padding!r}")
        dim_map = self.dim_order(t, order)
        ty = PartitionViewType(tile, t.view_type, padding, dim_map)
        return PartitionV(t, self.em.one("make_partition_view", [t.view], ty), ty)

    def dim_order(self, t: TensorV, order: object) -> tuple[int, ...] | None:
        """The ``dim_map`` of ``t.partition(shape, order=order)``: None for the identity (the plain view)."""
        if order is None:
            return None
        rank = t.rank
        if not isinstance(order, tuple) or any(type(d) is not int for d in order):
            self.fail(f"order= must be a compile-time tuple of ints (a permutation of 0..{rank - 1}), got {order!r}")
        if sorted(order) != list(range(rank)):
            self.fail(f"order={order} must be a permutation of the dims 0..{rank - 1} of '{t.name}' (each once)")
        if t.mut and order != tuple(range(rank)):
            self.fail(
                f"order= is for inputs; '{t.name}' is an output, read at its own tile: load it with "
                f"{t.name}.load() and reorder the tile with tile.permute"
            )
        return None if order == tuple(range(rank)) else order

    def method_partition(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("partition", ("shape", "padding", "order"), (None, None), args, kw)
        return self.partition(recv, a["shape"], a["padding"], a["order"])

    def _hints(self, latency: object, allow_tma: object) -> dict[str, Any]:
        inner: dict[str, Any] = {}
        if latency is not None:
            if type(latency) is not int or not 1 <= latency <= 10:
                self.fail(f"latency must be a compile-time int in 1..10, got {latency!r}")
            inner["latency"] = latency
        if allow_tma is not None:
            if not isinstance(allow_tma, bool):
                self.fail(f"allow_tma must be True or False, got {allow_tma!r}")
            inner["allow_tma"] = allow_tma
        return {"optimization_hints": {self.arch: inner}} if inner else {}

    def load_view(
        self, p: PartitionV, index: tuple[object, ...], hints: dict[str, Any], *, trusted: bool = False
    ) -> Value:
        if len(index) != len(p.tile):
            self.fail(f"the load index needs {len(p.tile)} coordinates (one per dim), got {len(index)}")
        idx = [self._wide_index(self.scalar_index(i, "tile index")) for i in index]
        if not trusted:
            self.guard_indices(p, idx)
        idx = self.one_index_type(idx)
        key = token_key(p.tensor)
        tok = cast(Value, self.env[key])
        tile, new = self.em.emit(
            "load_view_tko",
            [p.view, idx, tok],
            [
                TileType(p.tensor.dtype, p.tile),
                TokenType(),
            ],
            {"memory_ordering_semantics": "weak", **hints},
        )
        if p.tensor.mut:
            self.env[key] = new
        return tile

    def method_partition_load(self, recv: PartitionV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("load", ("index", "latency", "allow_tma"), (None, None), args, kw)
        index = a["index"] if isinstance(a["index"], tuple) else (a["index"],)
        if isinstance(a["index"], TileIndex):  # `p.load(idx)` in `for idx in z.tiles()`: idx's coordinates
            index = a["index"].coords
        if recv.tensor.mut:
            self._output_read(recv.tensor, recv.tile, index, f"'{recv.tensor.name}.partition({recv.tile}).load(...)'")
        return self.load_view(recv, index, self._hints(a["latency"], a["allow_tma"]))

    def block_index(self, rank: int) -> tuple[Value, ...]:
        if rank > 3:
            self.fail(f"a Mut output of rank {rank} cannot be indexed by the 3-D block grid; use rank <= 3")
        return self.grid("get_tile_block_id")[:rank]

    def op_load_tile_like(self, op: LangOp, a: dict[str, Any]) -> object:
        x = self.tensor_arg(a["x"], "the first argument of tile.load_tile_like")
        z = self.tensor_arg(a["z"], "the second argument of tile.load_tile_like", mut=True)
        if x.rank != z.rank:
            self.fail(f"tile.load_tile_like needs tensors of one rank, got {x.rank} and {z.rank}")
        index = self.block_index(z.rank)
        if x.mut:
            self._output_read(x, z.tile, index, f"'tile.load_tile_like({x.name}, {z.name})'")
        return self.load_view(self.partition(x, z.tile, "zero"), index, self._hints(a["latency"], a["allow_tma"]))

    def _output_read(self, t: TensorV, tile: tuple[int, ...], index: tuple[object, ...], what: str) -> None:
        """Allow a read of output ``t`` through a partition only at a tile this block owns (safe kernels).

        Any other tile of an output may be in flight in another block: reading it is an inter-block race. The tiles
        a block owns are its own tile (the block id, for a partition of the output's own tile shape) and the tiles
        ``t.tiles()`` gave it (the coordinates of one `TileIndex`, unchanged); every read path of an output (a
        partition view, ``tile.load_tile_like``, inside helpers, through aliases) comes here or to `_own_index`.
        """
        if self.unchecked:
            return
        values = [v for v in index if isinstance(v, Value)]
        ids = tuple(v.id for v in values) if len(values) == len(index) and tile == t.tile else ()
        mode = None
        if ids and t.rank <= 3 and ids == tuple(v.id for v in self.block_index(t.rank)):
            mode = "own"
        elif ids and self.owned_tiles.get(ids) is t:
            mode = "tiles"
        if mode is None:
            self.fail(
                f"{what} reads a tile of output '{t.name}' that other blocks may be writing (an inter-block race); "
                f"a safe kernel reads only the tiles it owns: use {t.name}.load() for its own tile, or "
                f"{t.name}.load(at=idx) in 'for idx in {t.name}.tiles()', and {t.name}.subtiles(shape).load(index) or "
                "tile.extract(...) for part of one; "
                "data other blocks produce is an input of a later launch"
            )
        self._set_mode(t, mode)

    def method_mut_load(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("load", ("at", "latency", "allow_tma"), (None, None, None), args, kw)
        return self.load_view(
            self.partition(recv, recv.tile, "zero"),
            tuple(self._own_index(recv, a["at"], "load")),
            self._hints(a["latency"], a["allow_tma"]),
            trusted=True,
        )

    def _own_index(self, recv: TensorV, at: object, verb: str) -> list[Value]:
        """Where an output access goes: this block's tile, or a tile ``out.tiles()`` gave this block."""
        mode = "own" if at is None else "tiles"
        if at is not None and not (isinstance(at, TileIndex) and at.tensor is recv):
            self.fail(
                f"the index of '{recv.name}.{verb}(..., at=idx)' must be the variable of a "
                f"'for idx in {recv.name}.tiles()' loop over this same output"
            )
        self._set_mode(recv, mode)
        return list(at.coords) if isinstance(at, TileIndex) else list(self.block_index(recv.rank))

    def _set_mode(self, recv: TensorV, mode: str) -> None:
        """Record how ``recv`` is addressed; one scheme per output (the launcher sizes the grid by it, see the ABI)."""
        if recv.mode and recv.mode != mode:
            self.fail(
                f"'{recv.name}' is accessed both at this block's own tile ({recv.name}.store(t)) and at tiles "
                f"from {recv.name}.tiles(); use one scheme per output, so that no two blocks share a tile"
            )
        recv.mode = mode

    def method_mut_tiles(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("tiles", ("group",), (None,), args, kw)
        group = a["group"]
        # At most 2**31 - 1: the schedule's group * (tile count of dim 1) must not wrap its 64 bits (a wrapped one
        # hands a tile to two blocks); a group past dim 0's tile count already walks whole columns.
        if group is not None and (type(group) is not int or not 0 < group < 2**31 or recv.rank != 2):
            self.fail("group= takes a compile-time int in 1..2**31 - 1, for rank-2 outputs (grouped tile order)")
        self._set_mode(recv, "tiles")  # a walk, even an idle one, frees the grid: no own-tile access too
        if recv.walk is not None and recv.walk != (group,):
            # Each order is a bijection from tiles to blocks, but two orders give one tile to two blocks.
            self.fail(
                f"'{recv.name}' is walked in two tile orders ({recv.name}.tiles(group={recv.walk[0]}) and "
                f"{recv.name}.tiles(group={group})): each order hands a tile to another block, so two blocks would "
                f"write one tile; walk it in one order per kernel"
            )
        recv.walk = (group,)
        return TileIter(recv, group)

    def tile_schedule(self, it: TileIter) -> tuple[tuple[object, object, object], Callable[[Value], object]]:
        """Bounds of the loop over the tiles this block owns, and how a tile number becomes a `TileIndex`.

        Tile numbers ``t`` run from the linear block id to the tile count in steps of the block count, so every
        tile goes to exactly one block whatever the grid (a bijection: no two blocks store one tile). The schedule is
        64-bit: the coordinates it yields are trusted in range, and in 32 bits the tile count (a product of counts),
        the linear block id or ``t + step`` could wrap around to a negative tile number.
        """
        z = it.tensor
        narrow = [self.op_cdiv(OPS["cdiv"], {"a": e, "b": t}) for e, t in zip(z.extents, z.tile, strict=True)]
        # A coordinate is below its tile count, so it fits the count's own type: index math on it stays that narrow.
        dt = I64 if any(isinstance(c, Value) and self.tile_of(c).elem == I64 for c in narrow) else I32
        counts = [self._wide(c) for c in narrow]
        total: object = counts[0]
        for c in counts[1:]:
            total = self.binary(ast.Mult(), total, c)
        bx, by, bz = (self._wide(v) for v in self.grid("get_tile_block_id"))
        gx, gy, gz = (self._wide(v) for v in self.grid("get_num_tile_blocks"))
        plane = self.binary(ast.Mult(), gx, gy)
        first = self.binary(
            ast.Add(), bx, self.binary(ast.Add(), self.binary(ast.Mult(), by, gx), self.binary(ast.Mult(), bz, plane))
        )
        step = self.binary(ast.Mult(), plane, gz)
        if self.own_grid and dt == I32 and it.group is None:
            # One block per tile, and an output of i32 extents: its tile number fits 31 bits, so the unravel divides
            # in 32 bits (tileiras expands a 64-bit division into a call of its division routine, per coordinate). A
            # walked output is partitioned, so injective (no two elements share memory) with non-negative strides:
            # it has at most reach + 1 <= 2**31 elements (i32 extents mean reach <= 2**31 - 1), so at most as many
            # tiles, and the block's tile number is below the tile count (the walk's `if`): t <= 2**31 - 1. Not the
            # grouped order: its group * (tile count of dim 1) can pass 2**31 when the group outnumbers dim 0's tiles.
            return (first, total, step), lambda t: TileIndex(z, self._unravel(it, self.convert(t, I32), narrow, dt))
        return (first, total, step), lambda t: TileIndex(z, self._unravel(it, t, counts, dt))

    def _wide(self, v: object) -> object:
        """``v`` as a 64-bit integer (a constant stays a constant)."""
        return self.convert(v, I64) if isinstance(v, Value) else v

    def _unravel(self, it: TileIter, t: Value, counts: list[object], dt: DType) -> tuple[Value, ...]:
        group = it.group

        def op(kind: ast.operator, a: object, b: object) -> object:
            if isinstance(kind, (ast.FloorDiv, ast.Mod)):
                return self._nonnegative_divide(kind, a, b)
            return self.binary(kind, a, b)

        if group is not None:
            num_m, num_n = counts
            per_group = op(ast.Mult(), group, num_n)
            first_m = op(ast.Mult(), op(ast.FloorDiv(), t, per_group), group)
            size_m = self.op_binary(OPS["minimum"], {"x": op(ast.Sub(), num_m, first_m), "y": group})
            within = op(ast.Mod(), t, per_group)
            coords = [op(ast.Add(), first_m, op(ast.Mod(), within, size_m)), op(ast.FloorDiv(), within, size_m)]
        else:
            coords, rest = [], cast(object, t)
            for c in reversed(counts[1:]):
                coords.insert(0, op(ast.Mod(), rest, c))
                rest = op(ast.FloorDiv(), rest, c)
            coords.insert(0, rest)  # t < the product of the counts, so what is left is below counts[0]
        out = tuple(self.convert(self.scalar_index(c, "tile index"), dt) for c in coords)
        self.owned_tiles[tuple(c.id for c in out)] = it.tensor
        for d, c in enumerate(out):
            # The output's tile count bounds the coordinate: z's own partition needs no check, and another one only
            # "z's count <= mine", which the launcher checks (host-known extents), so no guard sits in the tile loop.
            self.index_bounds[c.id] = Bound("count", it.tensor.name, it.tensor.tile, d)
        return out

    def _nonnegative_divide(self, kind: ast.operator, a: object, b: object) -> object:
        """``a // b`` or ``a % b`` for a tile number and a tile count (``a >= 0``, ``b >= 1``): unsigned division.

        The signed forms are floor division (a sign fix-up after the remainder), and tileiras expands a signed 64-bit
        division into more instructions than an unsigned one; on non-negative operands both give the same value.
        A count of 1 (a constant) divides to ``a`` and leaves the remainder 0 without an op.
        """
        if b == 1 and type(b) is int:
            return a if isinstance(kind, ast.FloorDiv) else 0
        va, vb = self.coerce(a, b, "//" if isinstance(kind, ast.FloorDiv) else "%")
        if isinstance(kind, ast.FloorDiv):
            return self.em.one("divi", [va, vb], self.tile_of(va), signedness="unsigned", rounding="zero")
        return self.em.one("remi", [va, vb], self.tile_of(va), signedness="unsigned")

    def value_to_store(self, value: object, z: TensorV, shape: tuple[int, ...], what: str) -> Value:
        """``value`` (a tile or a constant) as a tile of ``z``'s dtype and ``shape``, broadcast when it fits;
        ``what`` begins the shape error (``'z' stores tiles of shape``)."""
        if is_const(value):
            value = self.materialize(value, z.dtype, shape)
        t = self.tile_of(value, "stored value")
        if t.elem != z.dtype:
            self.fail(
                f"cannot store a {t.elem.name} tile into '{z.name}' of dtype {z.dtype.name}; "
                f"convert it with .astype(tile.{z.dtype.name})"
            )
        if t.shape != shape:
            if broadcast_shapes(t.shape, shape) != shape:
                self.fail(f"{what} {shape}, got a tile of shape {t.shape}")
            value = self.broadcast(cast(Value, value), shape)
        return cast(Value, value)

    def method_mut_store(self, recv: TensorV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("store", ("tile", "at", "latency", "allow_tma"), (None, None, None), args, kw)
        value = self.value_to_store(a["tile"], recv, recv.tile, f"'{recv.name}' stores tiles of shape")
        idx = self._own_index(recv, a["at"], "store")
        p = self.partition(recv, recv.tile)
        scope = self.store_scope()
        # The tile out.tiles() handed to this very iteration: a distinct tile each iteration.
        injective = a["at"] is not None and scope is not None and a["at"] is scope.bound
        self.emit_store(
            value,
            p.view,
            idx,
            token_key(recv),
            self._hints(a["latency"], a["allow_tma"]),
            injective=injective,
        )
        return None

    def store_scope(self) -> StoreScope | None:
        """The innermost loop's `StoreScope` (the loop checker overrides this; no loops, no scope)."""
        return None

    def emit_store(
        self, value: Value, view: Value, idx: list[Value], key: str, hints: dict[str, Any], *, injective: bool
    ) -> None:
        """A ``store_view_tko`` on chain ``key``: chained after the chain's last access, or, for a store at a tile
        distinct per iteration of the innermost loop (``injective``), after the loop's predecessor only (see
        `StoreScope`; its token then joins the carried chain)."""
        chained = cast(Value, self.env[key])
        scope = self.store_scope()
        early = scope.token_for(key, self.em.block, injective) if scope is not None else None
        attrs = {"memory_ordering_semantics": "weak", **hints}
        (tok,) = self.em.emit("store_view_tko", [value, view, idx, early or chained], [TokenType()], attrs)
        if scope is None or early is None:
            self.env[key] = tok
            return
        store = self.em.block.ops[-1]
        self.env[key] = join = self.em.one("join_tokens", [[chained, tok]], TokenType())
        scope.record(store, key, chained, join)
