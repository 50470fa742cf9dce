"""Happens-before between tile blocks: release/acquire synchronisation, tracked while a launch runs.

Tile IR's memory model is PTX's: a release (a ``release``/``acq_rel`` atomic, or a ``release`` store) that an
acquire (an ``acquire``/``acq_rel`` atomic, or an ``acquire`` load) of another block reads from makes everything
token-ordered before the release happen before everything token-ordered after the acquire. Only ``device`` and
``sys`` scope synchronise blocks: ``tl_blk`` scope covers one block, and ``relaxed`` orders nothing. An acquire
also synchronises with a release whose value later read-modify-writes (of any ordering) carried on to the value it
read (a release sequence); any other store ends the sequence. A compare-and-swap that fails stores nothing, so it
neither releases nor ends a sequence (the race check still counts it as an atomic update).

How it is tracked: every element written by a release keeps, in a per-byte table of its region, the id of the set
of release nodes its value carries (`_sources`); an acquire adds a synchronisation edge from each of them to its
own token node (`TokenFlow.synchronise`). Happens-before is then reachability in the token graph (`ordered`),
computed only for the access pairs the race check asks about. A releasing read-modify-write replaces the set by
itself alone when it is token-ordered after an acquire of that same set (an ``acq_rel`` one always is: it acquired
the old set itself), since whatever acquires from it then reaches those releases through it; so a lock handed
from block to block keeps a one-release set (release-only read-modify-writes from many blocks with no acquire
between them do grow it, one release per block). Blocks run one after another, so only an earlier block's release
can ever be read.

Approximation: the elements of one tile op are separate memory-model operations, yet the op has one token node, so
an atomic that acquires on one element and releases on another orders the first before the second here.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import Array
from ._memory import Memory, Region
from ._tokens import TokenFlow

__all__ = ["HappensBefore"]


class HappensBefore:
    """Release/acquire bookkeeping of one launch (see the module docstring).

    Parameters
    ----------
    memory
        The launch's memory (to find the regions of an atomic's addresses).
    flow
        The launch's token graph, which records the synchronisation edges.
    """

    def __init__(self, memory: Memory, flow: TokenFlow) -> None:
        self._memory = memory
        self._flow = flow
        self._sources: list[tuple[int, ...]] = [()]  # id 0: the element's value carries no release
        self._ids: dict[tuple[int, ...], int] = {(): 0}
        self._start = 0
        self._acquired: dict[int, list[int]] = {}  # release set id -> this block's nodes that acquired it
        self.tables: dict[int, Array] = {}
        """Region index -> per byte, the id of the release set its value carries (allocated at the first release)."""
        self.synchronised = False
        """True once an acquire read a release of another block."""

    def begin_block(self) -> None:
        """Start the next tile block: nodes made from now on belong to it."""
        self._start = self._flow.count
        self._acquired = {}

    def acquire(self, region: Region, addresses: Array) -> None:
        """The running op acquires the elements at `addresses`: it synchronises with the releases they carry."""
        table = self.tables.get(region.index)
        if table is None:
            return
        ids = np.unique(table[addresses - region.base]).tolist()
        releases = {r for i in ids for r in self._sources[i]}
        for i in ids:
            self._acquired.setdefault(i, []).append(self._flow.current)
        if releases:
            self.synchronised = self.synchronised or min(releases) < self._start
            self._flow.synchronise(self._flow.current, sorted(releases))

    def store(self, region: Region, addresses: Array, release: bool) -> None:
        """A store wrote `addresses`: a release starts a release sequence there, any other store ends one."""
        table = self.tables.get(region.index)
        if release:
            table = table if table is not None else self._table(region)
            table[addresses - region.base] = self._id((self._flow.current,))
        elif table is not None:
            table[addresses - region.base] = 0

    def rmw(self, addresses: Array, wrote: Array, acquire: bool, release: bool) -> None:
        """An atomic read-modify-write on `addresses` (flat), `wrote` where it stored (a failed CAS did not).

        It acquires the releases every element carried; a release adds itself to the elements it wrote, which a
        non-release atomic leaves as they are (it continues their release sequence).
        """
        for region, sel in _by_region(self._memory, addresses):
            if acquire:
                self.acquire(region, addresses[sel])
            if release:
                table = self.tables.get(region.index)
                table = table if table is not None else self._table(region)
                offsets = np.unique(addresses[sel][wrote[sel]] - region.base)
                if acquire:
                    table[offsets] = self._id((self._flow.current,))
                    continue
                old, inverse = np.unique(table[offsets], return_inverse=True)
                new = [self._continued(i) for i in old.tolist()]
                table[offsets] = np.asarray(new, dtype=np.int32)[inverse.reshape(-1)]

    def ordered(self, first_nodes: Array, second_nodes: Array) -> Array:
        """Per pair: does the access at node ``first_nodes[i]`` happen before the one at ``second_nodes[i]``?"""
        keys = first_nodes << 32 | second_nodes  # node ids stay below 2**31
        # Neighbouring elements mostly pair the same two ops: collapse runs before the (hashing) unique.
        runs = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        distinct, inverse = np.unique(keys[runs], return_inverse=True)
        verdict = self._flow.reach(distinct >> 32, distinct & 0xFFFFFFFF)[inverse.reshape(-1)]
        return np.repeat(verdict, np.diff(np.r_[runs, keys.size]))

    def _continued(self, old: int) -> int:
        """The set a release read-modify-write leaves on an element whose value carried set `old`."""
        node = self._flow.current
        if any(self._flow.precedes(a, node) for a in self._acquired.get(old, ())):
            return self._id((node,))
        return self._id(tuple(sorted({*self._sources[old], node})))

    def _id(self, releases: tuple[int, ...]) -> int:
        found = self._ids.get(releases)
        if found is None:
            found = self._ids[releases] = len(self._sources)
            self._sources.append(releases)
        return found

    def _table(self, region: Region) -> Array:
        table = self.tables[region.index] = np.zeros(region.raw.size, dtype=np.int32)
        return table


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
