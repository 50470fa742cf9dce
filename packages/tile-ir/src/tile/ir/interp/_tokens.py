"""Token ordering inside a tile block, and the check that conflicting accesses are ordered by it.

Tile IR does not order memory ops by program order: only token chains do, and the device may run two memory
ops of one block in either order unless one's result token reaches the other's input token (directly, through
``join_tokens`` or through loop-carried tokens). The interpreter runs ops in program order, which is one of the
allowed orders; `TokenFlow` records the token graph as it runs (one node per dynamic op instance, its
predecessors being the nodes of its input token) and, as each access happens, looks for an earlier access of the
same block to one of its elements, one of the two a plain write, that no chain orders: on the device their order,
and so the result, is undefined. Two atomics never conflict; reads never conflict with reads.

The same graph carries happens-before between blocks (`_hb`): an acquire that reads what a release of another block
wrote gets a *synchronisation edge* from the release's node. Token order, not program order, is what a release or
acquire orders within its block (Tile IR's memory model), so happens-before is reachability over token and
synchronisation edges together (`reach`). Invariant: nodes are numbered in creation order and every edge goes
from an older node to a newer one, so increasing ids are a topological order (and the order the ops ran in).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._dtypes import Array
from ._errors import BlockId, TokenOrderError
from ._memory import Access, Memory, Region

__all__ = ["TokenFlow"]

_REACH_CHUNK = 1 << 14  # sources per forward sweep: bounds the width of the per-node bit masks


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
        self._synced: dict[int, tuple[int, ...]] = {}  # acquire node -> release nodes it synchronised with
        self.check = check
        self.current = -1
        self.block: BlockId = (0, 0, 0)

    def node(self, preds: Iterable[object] = ()) -> int:
        """A new token node ordered after the token values in `preds` (None entries are absent tokens)."""
        self._preds.append(tuple(p for p in preds if isinstance(p, int)))
        return len(self._preds) - 1

    @property
    def count(self) -> int:
        """How many nodes exist; the next node gets this id."""
        return len(self._preds)

    def synchronise(self, node: int, releases: Iterable[int]) -> None:
        """Record that the acquire running as `node` read what the ops at `releases` released."""
        new = tuple(r for r in releases if r != node)
        if new:
            self._synced[node] = self._synced.get(node, ()) + new

    def precedes(self, a: int, b: int) -> bool:
        """True when node `a` is token-ordered before node `b` (or is `b`)."""
        return a == b or (a < b and self._ordered(a, b))

    def reach(self, sources: Array, targets: Array) -> Array:
        """Per pair, whether a path of token and synchronisation edges leads from ``sources[i]`` to ``targets[i]``.

        A forward sweep in id order from the oldest source carries, per node, the bit mask of the sources reaching
        it, so the cost is one pass over the nodes in between whatever the number of pairs.
        """
        result = np.zeros(sources.size, dtype=bool)
        distinct = np.unique(sources)
        for start in range(0, distinct.size, _REACH_CHUNK):
            chunk = distinct[start : start + _REACH_CHUNK]
            picked = np.flatnonzero((sources >= chunk[0]) & (sources <= chunk[-1]))
            masks = self._sweep(chunk.tolist(), int(targets[picked].max()))
            bits = np.searchsorted(chunk, sources[picked]).tolist()
            ends = targets[picked].tolist()
            result[picked] = [masks.get(t, 0) >> b & 1 == 1 for t, b in zip(ends, bits, strict=True)]
        return result

    def _sweep(self, sources: list[int], last: int) -> dict[int, int]:
        """Bit mask of the `sources` (ascending) that reach each node up to `last` (nodes reaching none left out)."""
        masks = {n: 1 << i for i, n in enumerate(sources)}
        preds, synced = self._preds, self._synced
        for n in range(sources[0] + 1, last + 1):
            mask = masks.get(n, 0)
            for p in preds[n] + synced.get(n, ()):
                mask |= masks.get(p, 0)
            if mask:
                masks[n] = mask
        return masks

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
