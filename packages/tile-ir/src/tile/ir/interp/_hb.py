"""Happens-before between tile blocks: release/acquire synchronisation, tracked while a launch runs.

Tile IR's memory model is PTX's: a release (a ``release``/``acq_rel`` atomic, or a ``release`` store) that an
acquire (an ``acquire``/``acq_rel`` atomic, or an ``acquire`` load) of another block reads from makes everything
token-ordered before the release happen before everything token-ordered after the acquire. Only ``device`` and
``sys`` scope synchronise blocks: ``tl_blk`` scope covers one block, and ``relaxed`` orders nothing. An acquire
also reads from a release through the read-modify-writes that followed it on that element (a release sequence);
any other store ends the sequence.

Vector clocks, shaped by how the interpreter runs: blocks run one after another, so a block can only ever read
what an earlier block wrote, and a clock (`Clock`) names, per earlier block, the releases of it that happen before
a point. Each token node has a clock (`TokenFlow`); every element a release wrote keeps, in a per-byte table of
its region, the id of the clock its value carries; an acquire joins the clocks of the elements it read into its
node. When a block ends, each of its nodes learns the releases of its own block that it is token-ordered before
(`released`). Access ``a`` of block ``i`` then happens before access ``b`` of a later block iff some release of
``i`` after ``a`` is in ``b``'s clock: ``released(a) & clock(b)[i] != 0``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ._dtypes import Array
from ._memory import Memory, Region
from ._tokens import EMPTY, Clock, TokenFlow, join

__all__ = ["HappensBefore"]


class HappensBefore:
    """Release/acquire bookkeeping of one launch (see the module docstring).

    Parameters
    ----------
    memory
        The launch's memory (to find the region of an atomic's addresses).
    flow
        The launch's token graph, which carries the per-node clocks.
    """

    def __init__(self, memory: Memory, flow: TokenFlow) -> None:
        self._memory = memory
        self._flow = flow
        self._published: list[Clock] = [EMPTY]  # id 0: the element's value was not written by a release
        self._join_cache: dict[tuple[int, int], int] = {}
        self.tables: dict[int, Array] = {}  # region index -> per byte, the id of the clock its value carries
        self._marks: dict[int, int] = {}  # this block's release nodes -> their bit
        self._releases: dict[int, int] = {}  # this block's release nodes -> the id of the clock they publish
        self._released: dict[int, int] = {}  # node -> releases of its own block token-ordered after it
        self._start = 0
        self.block = 0
        self.synchronised = False
        """True once an acquire synchronised with a release of another block."""

    def begin_block(self, block: int) -> None:
        """Start tile block `block` (linear id), finishing the previous one."""
        self.end_block()
        self.block, self._start = block, self._flow.count

    def end_block(self) -> None:
        """Record, for the block's nodes, which of its releases each is token-ordered before."""
        if self._marks:
            self._released.update(self._flow.reaching(self._start, self._marks))
            self._marks, self._releases = {}, {}

    def released(self, node: int) -> int:
        """Bit mask of the releases of `node`'s block that `node` is token-ordered before (itself included)."""
        return self._released.get(node, 0)

    def clock(self, node: int) -> Clock:
        """The releases of other blocks that happen before `node`."""
        return self._flow.clock(node)

    def acquire(self, region: Region, addresses: Array) -> None:
        """The running op acquires the elements at `addresses`: join what their values carry into its node."""
        table = self.tables.get(region.index)
        if table is None:
            return
        clock: Clock = EMPTY
        for i in np.unique(table[addresses - region.base]).tolist():
            clock = join(clock, self._published[i])
        if clock:
            self.synchronised = self.synchronised or any(b != self.block for b in clock)
            self._flow.acquire(self._flow.current, clock)

    def store(self, region: Region, addresses: Array, release: bool) -> None:
        """A store wrote `addresses`: a release heads a new release sequence there, any other store ends one."""
        table = self.tables.get(region.index)
        if release:
            table = table if table is not None else self._table(region)
            table[addresses - region.base] = self._publish()
        elif table is not None:
            table[addresses - region.base] = 0

    def rmw(self, addresses: Array, wrote: Array, acquire: bool, release: bool) -> None:
        """An atomic read-modify-write on `addresses` (flat), `wrote` where it stored (a CAS that failed did not).

        It acquires what every element carried; a release joins its own clock into the elements it wrote, which a
        non-release atomic leaves as they are (it continues their release sequence).
        """
        published = self._publish() if release else 0  # the clock before this op's own acquire
        for region, sel in _by_region(self._memory, addresses):
            if acquire:
                self.acquire(region, addresses[sel])
            if release:
                table = self.tables.get(region.index)
                table = table if table is not None else self._table(region)
                offsets = np.unique(addresses[sel][wrote[sel]] - region.base)
                old, inverse = np.unique(table[offsets], return_inverse=True)
                new = np.asarray([self._joined(int(o), published) for o in old.tolist()], dtype=np.int32)
                table[offsets] = new[inverse.reshape(-1)]

    def _publish(self) -> int:
        """The id of the clock the running release publishes (made once per op run)."""
        node = self._flow.current
        found = self._releases.get(node)
        if found is None:
            bit = 1 << len(self._marks)
            self._marks[node] = bit
            self._published.append(join(self._flow.clock(node), {self.block: bit}))
            found = self._releases[node] = len(self._published) - 1
        return found

    def _joined(self, old: int, new: int) -> int:
        if old in (0, new):
            return new
        key = (old, new)
        found = self._join_cache.get(key)
        if found is None:
            self._published.append(join(self._published[old], self._published[new]))
            found = self._join_cache[key] = len(self._published) - 1
        return found

    def _table(self, region: Region) -> Array:
        table = self.tables[region.index] = np.zeros(region.raw.size, dtype=np.int32)
        return table

    def ordered(self, first_blocks: Array, first_nodes: Array, second_nodes: Array) -> Array:
        """Per pair: does the access at `first_nodes` (of `first_blocks`) happen before the one at `second_nodes`?

        Pairs are reduced to distinct signatures first (what the first access's block released after it, the clock
        the second one saw), so the Python work is per signature pair, not per element.
        """
        firsts, where_a, inv_a = np.unique(first_nodes, return_index=True, return_inverse=True)
        seconds, inv_b = np.unique(second_nodes, return_inverse=True)
        blocks = first_blocks[where_a].tolist()
        published = [(block, self.released(n)) for block, n in zip(blocks, firsts.tolist(), strict=True)]
        seen = [self.clock(n) for n in seconds.tolist()]
        sig_a, rep_a = _dense(published)
        sig_b, rep_b = _dense([id(c) for c in seen])
        pairs, inverse = np.unique(
            sig_a[inv_a.reshape(-1)] * len(rep_b) + sig_b[inv_b.reshape(-1)], return_inverse=True
        )
        verdict = np.empty(pairs.size, dtype=bool)
        for i, p in enumerate(pairs.tolist()):
            block, mask = published[rep_a[p // len(rep_b)]]
            verdict[i] = bool(mask & seen[rep_b[p % len(rep_b)]].get(block, 0))
        return verdict[inverse.reshape(-1)]


def _dense(keys: Sequence[Hashable]) -> tuple[Array, list[int]]:
    """Dense ids for `keys` (equal keys share one) and, per id, the index of its first key."""
    ids: dict[Hashable, int] = {}
    first: list[int] = []
    out = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        found = ids.get(key)
        if found is None:
            found = ids[key] = len(first)
            first.append(i)
        out[i] = found
    return out, first


def _by_region(memory: Memory, flat: Array) -> list[tuple[Region, Array]]:
    """Split in-bounds addresses by region: ``(region, selection)``."""
    if flat.size == 0:
        return []
    region = memory.region_at(int(flat.min()))
    if region is not None and int(flat.max()) < region.end:
        return [(region, np.ones(flat.size, dtype=bool))]
    regions = memory.regions
    which = np.searchsorted(np.asarray([r.base for r in regions], dtype=np.int64), flat, side="right") - 1
    return [(regions[i], which == i) for i in np.unique(which).tolist()]
