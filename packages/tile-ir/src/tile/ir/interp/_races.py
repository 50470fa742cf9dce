"""Inter-block data race detection for one interpreted launch.

Every load, store and atomic reports the byte addresses it touched, with the running tile block, its token node
and the op's location. After the launch, `RaceDetector.check` looks for an element that two *different* blocks
touched, at least one of them writing it, where the two accesses are not both *strong* and neither happens before
the other: on a GPU those blocks may run concurrently, so the outcome is undefined. An access is strong when its
ordering is not ``weak`` and its scope reaches other blocks (``device`` or ``sys``; an ordered op without a scope
counts as ``device``): two strong accesses are well defined whatever their order, a ``tl_blk`` atomic is not
strong towards another block. Happens-before comes from release/acquire synchronisation (`_hb`). Accesses of one
block never race with each other here (a block is sequential up to token order, which `_tokens` checks).

Invariants: the check is element-granular on the element's first byte address and vectorised with numpy (sort +
searchsorted); it only looks at reads of buffers that some block writes, so read-only inputs cost nothing beyond
keeping their address arrays until the launch ends. A launch in which no acquire synchronised with another block
is decided by that first pass alone; otherwise the elements it flags are re-examined pair by pair
(`candidate_pairs`) against the happens-before relation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._dtypes import Array
from ._errors import BlockId, DataRaceError
from ._hb import HappensBefore
from ._memory import Access, Memory, Region
from ._tokens import TokenFlow

__all__ = ["ATOMIC", "READ", "WRITE", "RaceDetector", "Semantics", "candidate_pairs"]

READ, WRITE, ATOMIC = "read", "write", "atomic"
R, SR, W, SW = range(4)  # weak read, strong read, weak write, strong write (a read-modify-write is a write)
_RACES_WITH = {W: (W, SW, R, SR), SW: (R,)}  # a class of writes -> the classes that race with it
# For `candidate_pairs`: since the last weak write, each earlier access of the first class against each later one
# of the second (any access is also tested against that last weak write itself).
_SEGMENT_PAIRS = ((SW, R), (SW, W), (R, W), (R, SW), (SR, W))
_TL_BLK_HINT = (
    "An op with memory_scope tl_blk is atomic and ordered only within its own tile block, so towards another block "
    "it is a plain access: give it memory_scope device"
)


@dataclass(frozen=True)
class Semantics:
    """The memory ordering and scope of one memory op, as its attributes give them."""

    ordering: str = "weak"
    scope: str | None = None

    @property
    def strong(self) -> bool:
        """Well defined against concurrent strong accesses of other blocks."""
        return self.ordering != "weak" and self.scope != "tl_blk"

    @property
    def acquires(self) -> bool:
        """Synchronises with a release of another block that it reads from."""
        return self.strong and self.ordering in ("acquire", "acq_rel")

    @property
    def releases(self) -> bool:
        """Synchronises with an acquire of another block that reads what it wrote."""
        return self.strong and self.ordering in ("release", "acq_rel")


@dataclass
class _Log:
    regions: list[int] = field(default_factory=list)
    addresses: list[Array] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    sites: list[int] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)

    def arrays(self, keep: set[int], nodes: bool = False) -> tuple[Array, ...]:
        """Concatenate the chunks whose region is in `keep`: (addresses, block ids, site ids[, token nodes])."""
        picked = [i for i, r in enumerate(self.regions) if r in keep]
        columns = (self.blocks, self.sites, self.nodes) if nodes else (self.blocks, self.sites)
        if not picked:
            return tuple(np.zeros(0, dtype=np.int64) for _ in range(len(columns) + 1))
        addr = np.concatenate([self.addresses[i].astype(np.int64, copy=False) for i in picked])
        sizes = [self.addresses[i].size for i in picked]
        return addr, *(np.repeat(np.asarray([c[i] for i in picked], dtype=np.int64), sizes) for c in columns)


@dataclass
class _Hit:
    address: int
    block: int
    site: int
    other_block: int
    other_site: int


class RaceDetector:
    """Collects the accesses of one launch and reports the first inter-block race.

    Parameters
    ----------
    memory
        The memory the launch runs against (used to name the racing element).
    grid
        The launch grid; block ids are linear ``x + gx * (y + gy * z)`` while recording.
    flow
        The launch's token graph (accesses are recorded at its current node).
    """

    def __init__(self, memory: Memory, grid: BlockId, flow: TokenFlow) -> None:
        self._memory = memory
        self._grid = grid
        self._flow = flow
        self.hb = HappensBefore(memory, flow)
        self._logs = [_Log() for _ in range(4)]
        self._sites: list[tuple[str, str, bool]] = []  # (location, access label, tl_blk scope)
        self._itemsize: dict[int, int] = {}
        self.block = 0

    def begin_block(self, block: int) -> None:
        """Record the following accesses for tile block `block` (linear id)."""
        self.block = block
        self.hb.begin_block()

    def recorder(self, kind: str, location: str, sem: Semantics) -> Access:
        """Return the callback a load (`READ`), store (`WRITE`) or `ATOMIC` op at `location` reports to."""
        label = kind if kind == ATOMIC or sem.ordering == "weak" else f"atomic {kind}"
        self._sites.append((location, label, sem.scope == "tl_blk" and sem.ordering != "weak"))
        site = len(self._sites) - 1
        log = self._logs[(W if kind != READ else R) + int(sem.strong)]
        hb, flow = self.hb, self._flow
        acquire, store, release = kind == READ and sem.acquires, kind == WRITE, sem.releases

        def record(region: Region, addresses: Array, itemsize: int) -> None:
            self._itemsize[region.index] = itemsize
            log.regions.append(region.index)
            log.addresses.append(addresses)
            log.blocks.append(self.block)
            log.sites.append(site)
            log.nodes.append(flow.current)
            if acquire:
                hb.acquire(region, addresses)
            elif store and (release or hb.tables):
                hb.store(region, addresses, release)

        return record

    def check(self) -> None:
        """Raise `DataRaceError` for the first racing element, if any."""
        w, sw, r = (self._logs[c] for c in (W, SW, R))
        written, strong_written = set(w.regions), set(sw.regions)
        hits: list[_Hit] = []
        racing: list[Array] = []
        if written:
            others = [self._logs[c].arrays(written) for c in _RACES_WITH[W]]
            self._against(w.arrays(written), others, hits, racing)
        if strong_written & set(r.regions):  # atomics alone never race: skip sorting them
            self._against(sw.arrays(strong_written), [r.arrays(strong_written)], hits, racing)
        if not hits:
            return
        count = 0
        if self.hb.synchronised:
            hits, count = self._exact(np.unique(np.concatenate(racing)), written | strong_written)
        if hits:
            hit = min(hits, key=lambda h: (h.address, min(h.block, h.other_block)))
            self._raise(hit, count or int(np.unique(np.concatenate(racing)).size))

    def _against(
        self,
        writers: tuple[Array, ...],
        others: list[tuple[Array, ...]],
        hits: list[_Hit],
        racing: list[Array],
    ) -> None:
        """Find accesses in `others` to an address that a different block reached through `writers`."""
        w_addr, w_block, w_site = writers
        if w_addr.size == 0:
            return
        order = np.lexsort((w_block, w_addr))
        w_addr, w_block, w_site = w_addr[order], w_block[order], w_site[order]
        starts = np.flatnonzero(np.r_[True, w_addr[1:] != w_addr[:-1]])
        uniq = w_addr[starts]
        lo = np.minimum.reduceat(w_block, starts)
        hi = np.maximum.reduceat(w_block, starts)
        for addr, block, site in others:
            if addr.size == 0:
                continue
            pos = np.minimum(np.searchsorted(uniq, addr), uniq.size - 1)
            bad = (uniq[pos] == addr) & ((lo[pos] != block) | (hi[pos] != block))
            if not bad.any():
                continue
            racing.append(addr[bad])
            i = int(np.flatnonzero(bad)[np.argmin(addr[bad])])
            group = pos[i]
            end = starts[group + 1] if group + 1 < starts.size else w_addr.size
            members = np.arange(starts[group], end)
            j = int(members[w_block[members] != block[i]][0])
            hits.append(_Hit(int(addr[i]), int(w_block[j]), int(w_site[j]), int(block[i]), int(site[i])))

    def _exact(self, candidates: Array, regions: set[int]) -> tuple[list[_Hit], int]:
        """The races among the accesses to `candidates` once happens-before is taken into account.

        Elements with the same history (the same ops touching them in the same order, as when one tile is
        published to many blocks) race alike, so one element per distinct history is examined.
        """
        logs = [self._logs[c].arrays(regions, nodes=True) for c in range(4)]
        addr, block, site, node = (np.concatenate([log[k] for log in logs]) for k in range(4))
        cls = np.concatenate([np.full(log[0].size, c) for c, log in enumerate(logs)])
        picked = np.flatnonzero(candidates[np.minimum(np.searchsorted(candidates, addr), candidates.size - 1)] == addr)
        picked = picked[np.lexsort((node[picked], addr[picked]))]
        addr, block, site, node, cls = (a[picked] for a in (addr, block, site, node, cls))
        elements, history, shown = _histories(addr, node * 4 + cls)
        addr, block, site, node, cls = (a[shown] for a in (addr, block, site, node, cls))
        j, k = candidate_pairs(addr, cls)
        other = block[j] != block[k]
        j, k = j[other], k[other]
        race = ~self.hb.ordered(node[j], node[k])
        j, k = j[race], k[race]
        if j.size == 0:
            return [], 0
        racing_histories = history[np.searchsorted(elements, addr[j])]
        racing = elements[np.isin(history, racing_histories)]
        # The lowest racing element, reported through the pair of its history's example with the earliest block.
        first = int(racing.min())
        same = np.flatnonzero(racing_histories == history[np.searchsorted(elements, first)])
        a, b = int(j[same[np.argmin(block[j[same]])]]), int(k[same[np.argmin(block[j[same]])]])
        hit = _Hit(first, int(block[a]), int(site[a]), int(block[b]), int(site[b]))
        return [hit], int(racing.size)

    def _raise(self, hit: _Hit, count: int) -> None:
        region = self._memory.region_at(hit.address)
        if region is None:
            element = f"address {hit.address:#x}"
        else:
            element = region.describe(hit.address, self._itemsize.get(region.index))
        (loc1, kind1, local1), (loc2, kind2, local2) = self._sites[hit.site], self._sites[hit.other_site]
        first = (self._block_id(hit.block), loc1, kind1)
        second = (self._block_id(hit.other_block), loc2, kind2)
        if hit.other_block < hit.block:
            first, second = second, first
        raise DataRaceError(element, first, second, count, _TL_BLK_HINT if local1 or local2 else None)

    def _block_id(self, linear: int) -> BlockId:
        gx, gy, _ = self._grid
        return (linear % gx, (linear // gx) % gy, linear // (gx * gy))


def candidate_pairs(addr: Array, cls: Array) -> tuple[Array, Array]:
    """Positions ``(j, k)``, ``j < k``, of the access pairs to test, in arrays sorted by (address, run order).

    Every access is tested against the last weak write to its element before it; and, among the accesses since
    that write, strong writes against later weak reads and writes, weak reads against later writes, strong reads
    against later weak writes (the pairs of `_SEGMENT_PAIRS`). If all of those are ordered, so is every
    conflicting pair, happens-before being transitive (FastTrack's argument); so each racing element shows up.
    """
    pos = np.arange(addr.size)
    if pos.size == 0:
        return pos, pos
    starts = np.r_[True, addr[1:] != addr[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, pos, 0))
    is_w = cls == W
    prev_w = np.r_[-1, np.maximum.accumulate(np.where(is_w, pos, -1))[:-1]]
    has = prev_w >= group_start
    js, ks = [prev_w[has]], [pos[has]]
    weak_writes = np.cumsum(is_w)
    # Accesses since the same last weak write (a write closing the segment included) share a key.
    key = np.cumsum(starts) * (int(weak_writes[-1]) + 2) + weak_writes - is_w
    for a, b in _SEGMENT_PAIRS:
        j_pos, k_pos = pos[cls == a], pos[cls == b]
        if j_pos.size == 0 or k_pos.size == 0:
            continue
        lo = np.searchsorted(key[j_pos], key[k_pos], side="left")
        count = np.maximum(np.searchsorted(j_pos, k_pos, side="left") - lo, 0)
        total = int(count.sum())
        if total:
            offsets = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
            js.append(j_pos[np.repeat(lo, count) + offsets])
            ks.append(np.repeat(k_pos, count))
    return np.concatenate(js), np.concatenate(ks)


def _histories(addr: Array, token: Array) -> tuple[Array, Array, Array]:
    """Group the elements of events sorted by (address, run order) by their history, the sequence of `token`.

    Returns the distinct addresses, a history id per address (equal ids: identical sequences), and the positions
    of the events of one example address per history, in order.
    """
    starts = np.flatnonzero(np.r_[True, addr[1:] != addr[:-1]])
    lengths = np.diff(np.r_[starts, addr.size])
    history = np.empty(starts.size, dtype=np.int64)
    examples: list[Array] = []
    for length in np.unique(lengths).tolist():
        groups = np.flatnonzero(lengths == length)
        rows = token[starts[groups][:, None] + np.arange(length)]
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        history[groups] = len(examples) + inverse.reshape(-1)
        examples.extend(starts[groups[first]])
    shown = np.sort(np.asarray(examples, dtype=np.int64))
    spans = lengths[np.searchsorted(starts, shown)]
    positions = np.repeat(shown, spans) + np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans)
    return addr[starts], history, positions
