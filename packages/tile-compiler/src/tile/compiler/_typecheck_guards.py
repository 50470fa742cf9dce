"""Kernel-language rules for index guards: every partition index lies in the partition's index space, which Tile IR
requires. Indices proven in range need nothing, indices below a host-known bound become a `HostGuard` the launcher
checks, and any other index is checked in the kernel (an assert on the interpreter, else a memory fault).
"""

from __future__ import annotations

import ast

from tile.compiler._guards import HostGuard
from tile.compiler._kir import Block, Value
from tile.compiler._typecheck_arith import I1, I32, I64
from tile.compiler._typecheck_debug import DebugMixin
from tile.compiler._typecheck_values import PartitionV
from tile.compiler._types import PtrType, TileType, TokenType

__all__ = ["GuardMixin", "TileDim"]

TileDim = tuple[str, tuple[int, ...], int]  # (tensor parameter, partition tile shape, dim)
# Inside the first page, which CUDA never maps: a store there always faults (see GuardMixin._fault_unless).
_FAULT_ADDRESS = 16


class GuardMixin(DebugMixin):
    """Bounds checks of partition indices: left to the launcher where it can, else in the kernel."""

    assert_guards: bool
    # Facts for bounds: values known to lie in [0, tile count) of (tensor, tile shape, dim), or below another value
    # (tile counts themselves are `host_values`). An access whose index is not covered gets a guard (safe kernels).
    in_range: dict[int, tuple[TileDim | None, Value | None]]  # value -> (the dim it indexes, a bound above it)
    host_guards: dict[HostGuard, None]  # guards left to the launcher (their subject is host-known); an ordered set

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
