"""Hand-built synchronisation kernels for the race detector's tests: `K` builds one kernel over i32 pointers, one
op at a time (plain and ordered loads and stores, read-modify-writes, compare-and-swaps, spins, per-block roles)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy.typing as npt

from tile.ir import (
    AtomicRMWMode,
    Builder,
    FileLoc,
    Function,
    FunctionType,
    MemoryOrdering,
    MemoryScope,
    Module,
    TokenType,
    Value,
    i32,
    interp,
    ptr,
    scalar,
)

I32 = scalar(i32)
Arr = npt.NDArray[Any]
DATA_STORE = FileLoc("sync.py", 10, 5)
DATA_LOAD = FileLoc("sync.py", 20, 9)
Ordering = MemoryOrdering
DEVICE, TL_BLK = MemoryScope.DEVICE, MemoryScope.TL_BLK


class K:
    """Builds one kernel over i32 pointer parameters, one op at a time, threading a token chain."""

    def __init__(self, n_ptrs: int) -> None:
        self.fn = Function("sync", FunctionType((scalar(ptr(i32)),) * n_ptrs))
        self.b = Builder(self.fn.body)
        self.ptrs = list(self.fn.params)
        self.bx, _, _ = self.b.get_tile_block_id()

    def c(self, value: int) -> Value:
        return self.b.constant(value, I32)

    def at(self, p: int, index: int = 0) -> Value:
        return self.b.offset(self.ptrs[p], self.c(index)) if index else self.ptrs[p]

    @staticmethod
    def _ordering(sem: Any, scope: Any) -> dict[str, Any]:
        """Attributes of a load/store: an ordered one gets `scope` (device when omitted)."""
        if sem == Ordering.WEAK:
            return {"memory_ordering_semantics": sem}
        return {"memory_ordering_semantics": sem, "memory_scope": DEVICE if scope is None else scope}

    def store(self, p: int, value: Value | int, tok: Value | None, sem: Any = Ordering.WEAK, *, scope: Any = None,
              loc: FileLoc | None = None, index: int = 0) -> Value:  # fmt: skip
        v = self.c(value) if isinstance(value, int) else value
        attrs = self._ordering(sem, scope)
        return self.b.call("store_ptr_tko", self.at(p, index), v, None, tok, loc=loc, **attrs).results[0]

    def load(self, p: int, tok: Value | None, sem: Any = Ordering.WEAK, *, scope: Any = None,
             loc: FileLoc | None = None, index: int = 0) -> tuple[Value, Value]:  # fmt: skip
        return self.b.load_ptr_tko(self.at(p, index), token=tok, loc=loc, **self._ordering(sem, scope))

    def rmw(self, p: int, mode: Any, value: int, tok: Value | None, sem: Any, *, scope: Any = DEVICE,
            index: int = 0) -> tuple[Value, Value]:  # fmt: skip
        return self.b.atomic_rmw_tko(self.at(p, index), self.c(value), token=tok, mode=mode,
                                     memory_ordering_semantics=sem, memory_scope=scope)  # fmt: skip

    def cas(self, p: int, cmp: int, val: int, tok: Value | None, sem: Any, *,
            scope: Any = DEVICE, index: int = 0) -> tuple[Value, Value]:  # fmt: skip
        return self.b.atomic_cas_tko(self.at(p, index), self.c(cmp), self.c(val), token=tok,
                                     memory_ordering_semantics=sem, memory_scope=scope)  # fmt: skip

    def spin_until(self, p: int, expected: int, sem: Any, *, rmw: bool = False) -> Value:
        """Loop until element 0 of pointer `p` holds `expected` (an atomic add of 0 when `rmw`); returns the token."""
        with self.b.loop([self.b.make_token()], [TokenType()]) as spin:
            if rmw:
                seen, got = self.rmw(p, AtomicRMWMode.ADD, 0, spin.args[0], sem)
            else:
                seen, got = self.load(p, spin.args[0], sem)
            self._exit_if(self.eq(seen, expected), got)
        return spin.results[0]

    def eq(self, value: Value, expected: int | Value) -> Value:
        other = self.c(expected) if isinstance(expected, int) else expected
        return self.b.cmpi(value, other, comparison_predicate="equal", signedness="signed")

    def _exit_if(self, cond: Value, tok: Value) -> None:
        with self.b.if_(cond) as br:
            with br.then_():
                self.b.break_([tok])
            with br.else_():
                self.b.yield_()
        self.b.continue_([tok])

    def when(self, block: int, role: Callable[[], object]) -> None:
        """Run `role` in tile block `block` only."""
        with self.b.if_(self.eq(self.bx, block)) as br, br.then_():
            role()
            self.b.yield_()

    def module(self) -> Module:
        self.b.return_()
        return Module([self.fn])


def launch(kernel: Module, grid: int, *arrays: Arr) -> None:
    """Run `kernel` on the interpreter over a 1-D grid of `grid` blocks, the race check on."""
    interp.launch(kernel, grid, list(arrays))
