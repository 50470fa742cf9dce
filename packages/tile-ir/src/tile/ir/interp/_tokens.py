"""Token ordering inside a tile block, and the check that conflicting accesses are ordered by it.

Tile IR does not order memory ops by program order: only token chains do, and the device may run two memory
ops of one block in either order unless one's result token reaches the other's input token (directly, through
``join_tokens`` or through loop-carried tokens). The interpreter runs ops in program order, which is one of the
allowed orders; `TokenFlow` records the token graph as it runs (one node per dynamic op instance, its
predecessors being the nodes of its input token) and, as each access happens, looks for an earlier access of the
same block to one of its elements, one of the two a plain write, that no chain orders: on the device their order,
and so the result, is undefined. Two atomics never conflict; reads never conflict with reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._dtypes import Array
from ._errors import BlockId, TokenOrderError
from ._memory import Access, Memory, Region

__all__ = ["EMPTY", "Clock", "TokenFlow", "join"]

Clock = dict[int, int]
"""Releases that happen before a point: linear block id -> bit mask of that block's releases (bit k: its k-th).

Clocks are shared between nodes and never mutated once made; `join` builds a new one when it must.
"""

EMPTY: Clock = {}


def join(a: Clock | None, b: Clock | None) -> Clock:
    """The least clock covering both (one of them, unchanged, when it already covers the other)."""
    if not b or a is b:
        return a or EMPTY
    if not a:
        return b
    out = dict(a)
    for block, mask in b.items():
        out[block] = out.get(block, 0) | mask
    return a if out == a else out


@dataclass
class _Access:
    node: int
    region: Region
    raw: Array
    kind: str
    location: str
    itemsize: int
    _sorted: Array | None = None

    @property
    def addresses(self) -> Array:
        """The touched addresses, sorted and unique (computed once, when first compared)."""
        if self._sorted is None:
            self._sorted = np.unique(self.raw)
        return self._sorted


class TokenFlow:
    """The token graph of one launch (see the module docstring).

    Accesses are checked as they happen, against the block's earlier accesses, newest first. An earlier plain
    write that is token-ordered before the new access *covers* the elements they share: everything before it
    on those elements was already checked against it, so by transitivity it is ordered before the new access
    too, and the scan stops once every element is covered. An in-place loop thus costs one check per access.
    """

    def __init__(self, memory: Memory, check: bool) -> None:
        self._memory = memory
        self._preds: list[tuple[int, ...]] = []
        self._all: list[_Access] = []
        self._writes: list[_Access] = []
        self._clocks: dict[int, Clock] = {}
        self.check = check
        self.current = -1
        self.block: BlockId = (0, 0, 0)

    def node(self, preds: Iterable[object] = ()) -> int:
        """A new token node ordered after the token values in `preds` (None entries are absent tokens)."""
        edges = tuple(p for p in preds if isinstance(p, int))
        self._preds.append(edges)
        n = len(self._preds) - 1
        if self._clocks:  # empty until some block acquires, so launches without synchronisation pay nothing here
            clock: Clock = EMPTY
            for p in edges:
                clock = join(clock, self._clocks.get(p))
            if clock:
                self._clocks[n] = clock
        return n

    @property
    def count(self) -> int:
        """How many nodes exist; the next node gets this id."""
        return len(self._preds)

    def clock(self, node: int) -> Clock:
        """The releases of other blocks that happen before `node`."""
        return self._clocks.get(node, EMPTY)

    def acquire(self, node: int, clock: Clock) -> None:
        """Widen `node`'s clock by an acquire that synchronised with `clock` (nodes made later inherit it)."""
        if clock:
            self._clocks[node] = join(self._clocks.get(node), clock)

    def reaching(self, start: int, marks: dict[int, int]) -> dict[int, int]:
        """For every node from `start` on: the OR of the `marks` of the nodes it reaches (itself included).

        One backward sweep in reverse creation order (a reverse topological order); nodes reaching no mark are left
        out of the result.
        """
        out = dict(marks)
        preds = self._preds
        for n in range(len(preds) - 1, start - 1, -1):
            mask = out.get(n)
            if mask:
                for p in preds[n]:
                    if p >= start:
                        out[p] = out.get(p, 0) | mask
        return out

    def begin_block(self, block: BlockId) -> None:
        """Forget the previous block's accesses (blocks are checked against each other by the race detector)."""
        self.block = block
        self._all, self._writes = [], []

    def recorder(self, kind: str, location: str) -> Access | None:
        """Callback checking and recording accesses of the op running as node `current` (None when not checking)."""
        if not self.check:
            return None

        def record(region: Region, addresses: Array, itemsize: int) -> None:
            access = _Access(self.current, region, addresses.reshape(-1), kind, location, itemsize)
            self._check(access)
            self._all.append(access)
            if kind == "write":
                self._writes.append(access)

        return record

    def _check(self, new: _Access) -> None:
        """Raise `TokenOrderError` if an earlier access conflicts with `new` and no token chain orders them."""
        pending: Array | None = None
        for old in reversed(self._all if new.kind == "write" else self._writes):
            if old.node == new.node or old.region is not new.region or (old.kind == new.kind == "atomic"):
                continue
            pending = new.addresses if pending is None else pending
            common = _common(old.addresses, pending)
            if common.size == 0:
                continue
            if not self._ordered(old.node, new.node):
                raise TokenOrderError(
                    self.block,
                    old.region.describe(int(common[0]), new.itemsize),
                    (old.location, old.kind),
                    (new.location, new.kind),
                )
            if old.kind == "write":
                pending = np.setdiff1d(pending, common, assume_unique=True)
                if pending.size == 0:
                    return

    def _ordered(self, a: int, b: int) -> bool:
        """True when one of the nodes is reachable from the other through predecessor edges."""
        low, high = min(a, b), max(a, b)
        stack, seen = [high], {high}
        while stack:
            for p in self._preds[stack.pop()]:
                if p == low:
                    return True
                if p > low and p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False


def _common(a: Array, b: Array) -> Array:
    """The sorted addresses in both sorted unique arrays."""
    if a.size == 0 or b.size == 0 or a[-1] < b[0] or b[-1] < a[0]:
        return a[:0]
    return np.intersect1d(a, b, assume_unique=True)
