"""Kernel-language rules for memory, grid queries, atomics and debugging ops (elementwise math: ``_typecheck_math``).

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

from tile.compiler._guards import Bound, HostGuard
from tile.compiler._kir import Block, Value
from tile.compiler._printf import escape, format_problem
from tile.compiler._store_scope import StoreScope
from tile.compiler._typecheck_arith import F32, I1, I32, is_const, signedness
from tile.compiler._typecheck_math import MathMixin
from tile.compiler._typecheck_values import PartitionV, TensorV, TileIndex, TileIter
from tile.compiler._types import (
    DTYPES,
    PADDINGS,
    DType,
    PartitionViewType,
    PtrType,
    TileType,
    TokenType,
    broadcast_shapes,
)
from tile.compiler.lang._ops import OPS, LangOp

__all__ = ["RAW_TOKEN", "MemoryMixin", "TileDim", "token_key"]

RAW_TOKEN = "$tok:$raw"
TileDim = tuple[str, tuple[int, ...], int]  # (tensor parameter, partition tile shape, dim)
ENTRY_TOKEN = "$tok:$entry"
_ATOMIC_MODES = {
    "add": ("add", "add", "addf"),
    "max": ("max", "umax", ""),
    "min": ("min", "umin", ""),
    "xchg": ("xchg", "xchg", "xchg"),
    "and": ("and", "and", ""),
    "or": ("or", "or", ""),
    "xor": ("xor", "xor", ""),
}
# Inside the first page, which CUDA never maps: a store there always faults (see MemoryMixin._fault_unless).
_FAULT_ADDRESS = 16
I64 = DTYPES["i64"]
_PRINTF = {"b": "%d", "i": "%d", "u": "%u", "f": "%f"}


def token_key(t: TensorV) -> str:
    """The environment key of the token chain that orders accesses to ``t``."""
    return f"$tok:{t.name}" if t.mut else ENTRY_TOKEN


class MemoryMixin(MathMixin):
    """Views, loads, stores, grid queries, raw pointers, atomics, print and assert."""

    env: dict[str, object]
    unchecked: bool
    arch: str
    assert_guards: bool
    own_grid: bool  # one block per output tile (`Specialization.own_grid`): a tiles() walk runs once per block
    # Facts for bounds: values known to lie in [0, tile count) of (tensor, tile shape, dim), or below another value
    # (tile counts themselves are `host_values`). An access whose index is not covered gets a guard (safe kernels).
    grid_values: dict[str, tuple[Value, ...]]
    in_range: dict[int, tuple[TileDim | None, Value | None]]  # value -> (the dim it indexes, a bound above it)
    host_guards: dict[HostGuard, None]  # guards left to the launcher (their subject is host-known); an ordered set
    owned_tiles: dict[tuple[int, ...], TensorV]  # value ids of the coordinates of a `TileIndex` -> its output

    def op_cdiv(self, op: LangOp, a: dict[str, Any]) -> object:
        x, y = a["a"], a["b"]
        if type(x) is int and type(y) is int:
            return -(-x // y)
        vx, vy = self.coerce(x, y, "tile.cdiv")
        if not self.tile_of(vx).dtype.is_int:
            self.fail("tile.cdiv needs integers")
        t = self.tile_of(vx)
        return self.em.one("divi", [vx, vy], t, signedness=signedness(t.dtype), rounding="positive_inf")

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

    def _wide_index(self, v: Value) -> Value:
        """A narrow or unsigned index (u8 200, u32 3e9) as the signed 64-bit index it means.

        Tile IR reads index operands as signed, so a u8 200 would be -56; and a guard in the index's own dtype would
        compare against a tile count truncated to it (300 tiles as a u8 are 44). i32 and i64 indices stay as they are
        (the facts that prove them are keyed by their values).
        """
        return v if self.tile_of(v).dtype in (I32, I64) else self.convert(v, I64)

    def guard_indices(self, p: PartitionV, idx: list[Value]) -> None:
        """Check that every index lies in the partition's index space, which Tile IR requires.

        Indices proven in range (loop variables over ``range(p.num_tiles[d])``, tiles from ``out.tiles()``) need no
        check; indices below a host-known bound (block ids, loops up to a tile count or constant, constants) get a
        `HostGuard` the launcher checks; any other index is checked in the kernel. Unchecked kernels get none.
        """
        if self.unchecked:
            return
        em = self.em
        by_depth: dict[int, list[tuple[int, Value, bool]]] = {}
        for d, v in enumerate(idx):
            key, bound = self.in_range.get(v.id, (None, None))
            tile, dim = p.tensor_dim(d)
            if key == (p.tensor.name, tile, dim):
                continue
            host = self.index_bounds.get(v.id)
            if host is not None:  # the launcher checks it: no branch in the kernel
                where = f" at {self.em.loc}" if self.em.loc else ""
                guard = HostGuard(host, p.tensor.name, tile, dim, where)
                if host != guard.count:  # below this very partition's tile count: nothing to check
                    self.host_guards[guard] = None
                continue
            # A loop variable in [0, count of another partition) only needs "that count <= this one", which is
            # loop-invariant; any other coordinate is checked as is. Invariant checks move before the loops.
            subject, is_bound = (bound, True) if bound is not None else (v, False)
            depth = max(em.birth.get(p.view.id, 0), em.birth.get(subject.id, 0))
            by_depth.setdefault(depth, []).append((d, subject, is_bound))
        for depth, checks in sorted(by_depth.items()):
            self.at_depth(depth, lambda: self._emit_guard(p, checks))  # noqa: B023 - called at once

    def _emit_guard(self, p: PartitionV, checks: list[tuple[int, Value, bool]]) -> None:
        counts = self.em.emit("get_index_space_shape", [p.view], [TileType(I32)] * len(p.tile))
        ok: Value | None = None
        for d, v, is_bound in checks:
            dt = self.tile_of(v).dtype
            count = self.convert(counts[d], dt)
            if is_bound:
                inside = self.compare_tiles(ast.LtE, v, count)
            else:
                low = self.compare_tiles(ast.GtE, v, self.materialize(0, dt))
                inside = self.em.one("andi", [low, self.compare_tiles(ast.Lt, v, count)], TileType(I1))
            ok = inside if ok is None else self.em.one("andi", [ok, inside], TileType(I1))
        where = f" at {self.em.loc}" if self.em.loc else ""
        message = f"tile index out of range for {p.tensor.name}.partition({p.tile}){where}"
        assert ok is not None  # guard_indices passes at least one check
        if self.assert_guards:  # the CPU interpreter (an assert costs nothing there), or CompileOptions.debug_guards
            self.em.emit("assert", [ok], [], {"message": message})
        else:
            self._fault_unless(ok)

    def _fault_unless(self, ok: Value) -> None:
        """Stop the kernel with a memory fault unless ``ok``: a store to an address that is never mapped.

        On a GPU ``assert`` lowers to a ``vprintf`` call, and the call alone (wherever it sits) changes how ptxas
        compiles the whole kernel: a Hopper GEMM ran 1.5x slower with its two index guards hoisted before the K
        loop. A plain store in a branch costs nothing measurable. A failed guard still ends the launch with a sticky
        error (CUDA's "illegal memory access" instead of "device-side assert"), but prints no message. The fault is
        raised asynchronously, so the block may still issue the loads after the guard; view loads only read inside
        their tensor, so that can read no memory outside the kernel's arguments.
        """
        em, fail, fine = self.em, Block(), Block()
        with self.in_block(fine):
            em.emit("yield", [[]], [])
        with self.in_block(fail):
            address = em.constant(_FAULT_ADDRESS, TileType(I64))
            pointer = em.one("int_to_ptr", [address], TileType(PtrType(I32)))
            token = em.emit("make_token", [], [TokenType()])[0]
            em.emit("store_ptr_tko", [pointer, em.constant(0, TileType(I32)), None, token], [TokenType()],
                    {"memory_ordering_semantics": "weak"})  # fmt: skip
            em.emit("yield", [[]], [])
        em.emit("if", [ok], [], {}, [fine, fail])

    def method_partition_load(self, recv: PartitionV, args: list[object], kw: dict[str, object]) -> object:
        a = self.bind_simple("load", ("index", "latency", "allow_tma"), (None, None), args, kw)
        index = a["index"] if isinstance(a["index"], tuple) else (a["index"],)
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
        if group is not None and (type(group) is not int or group <= 0 or recv.rank != 2):
            self.fail("group= takes a positive compile-time int, for rank-2 outputs (grouped tile order)")
        self._set_mode(recv, "tiles")  # a walk, even an idle one, frees the grid: no own-tile access too
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

    # -- raw pointers (unchecked kernels) -------------------------------------------------------------------
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

    # -- debugging --------------------------------------------------------------------------------------------
    def _print(self, fmt: str, values: list[Value]) -> None:
        self.em.emit("print_tko", [values, None], [TokenType()], {"str": fmt})

    def op_print(self, op: LangOp, a: dict[str, Any]) -> object:
        parts: list[str] = []
        values: list[Value] = []
        for arg in a["args"]:
            if isinstance(arg, str) or is_const(arg) or arg is None:
                parts.append(escape(str(arg)))
                continue
            t = self.tile_of(arg, "printed value")
            if not isinstance(t.elem, DType):
                self.fail("pointer tiles cannot be printed")
            wide = t.elem.is_float and t.elem.name not in ("f32", "f64")
            parts.append("%ld" if t.elem.bits == 64 and t.elem.is_int else _PRINTF[t.elem.kind])
            values.append(self.convert(arg, F32) if wide else arg)
        # sep and end are literal text too: a '%' in them would be a conversion vprintf honours (see _printf)
        self._print(escape(str(a["sep"])).join(parts) + escape(str(a["end"])), values)
        return None

    def op_printf(self, op: LangOp, a: dict[str, Any]) -> object:
        if not isinstance(a["fmt"], str):
            self.fail("the format of tile.printf must be a string literal")
        values = []
        for v in a["args"]:
            val = self.as_tile(v, what="printf argument")
            t = self.tile_of(val)
            if not isinstance(t.elem, DType):
                self.fail("pointer tiles cannot be printed")
            wide = t.elem.is_float and t.elem.name not in ("f32", "f64")  # as tile.print does
            values.append(self.convert(val, F32) if wide else val)
        problem = format_problem(a["fmt"], [self.tile_of(v).dtype for v in values])
        if problem is not None:
            self.fail(f"tile.printf: {problem}")
        self._print(a["fmt"], values)
        return None

    def op_assert(self, op: LangOp, a: dict[str, Any]) -> object:
        if not isinstance(a["msg"], str):
            self.fail("the message of tile.assert_ must be a string literal")
        cond = self.as_tile(a["cond"], I1 if is_const(a["cond"]) else None, "assert condition")
        if self.tile_of(cond).elem != I1:
            self.fail("the condition of tile.assert_ must be a bool (a comparison)")
        self.em.emit("assert", [cond], [], {"message": a["msg"]})
        return None

    def op_static_assert(self, op: LangOp, a: dict[str, Any]) -> object:
        if not is_const(a["cond"]):
            self.fail("tile.static_assert needs a compile-time condition; use tile.assert_ for run-time checks")
        if not a["cond"]:
            self.fail(f"static assertion failed{': ' + str(a['msg']) if a['msg'] else ''}")
        return None

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
