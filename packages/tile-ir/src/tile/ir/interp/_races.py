"""Inter-block data race detection for one interpreted launch.

Every load, store and atomic reports the byte addresses it touched, with the running tile block and the op's
location. After the launch, `RaceDetector.check` looks for an element that two *different* blocks touched where
at least one access is a plain (weak) write, or one is atomic and the other a plain access: on a GPU those
blocks run concurrently, so the outcome is undefined. Accesses of one block never race with each other (a
block is sequential), and atomic/atomic pairs are well defined.

Invariants: the check is element-granular on the element's first byte address, vectorised with numpy (sort +
searchsorted), and only looks at reads of buffers that some block writes, so read-only inputs cost nothing
beyond keeping their address arrays until the launch ends.

Limitation: release/acquire synchronisation between blocks is not modelled. A kernel that publishes plain
stores with a release atomic and reads them in another block after an acquire (a "last block finishes" pattern)
is well defined on the device but reported here; launch it with ``check_races=False``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._dtypes import Array
from ._errors import BlockId, DataRaceError
from ._memory import Access, Memory, Region

__all__ = ["RaceDetector"]

READ, WRITE, ATOMIC = "read", "write", "atomic"


@dataclass
class _Log:
    regions: list[int] = field(default_factory=list)
    addresses: list[Array] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    sites: list[int] = field(default_factory=list)

    def arrays(self, keep: set[int]) -> tuple[Array, Array, Array]:
        """Concatenate the chunks whose region is in `keep`: (addresses, block ids, site ids)."""
        picked = [i for i, r in enumerate(self.regions) if r in keep]
        if not picked:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        addr = np.concatenate([self.addresses[i].astype(np.int64, copy=False) for i in picked])
        sizes = [self.addresses[i].size for i in picked]
        blocks = np.repeat(np.asarray([self.blocks[i] for i in picked], dtype=np.int64), sizes)
        sites = np.repeat(np.asarray([self.sites[i] for i in picked], dtype=np.int64), sizes)
        return addr, blocks, sites


@dataclass
class _Hit:
    address: int
    block: int
    site: int
    kind: str
    other_block: int
    other_site: int
    other_kind: str


class RaceDetector:
    """Collects the accesses of one launch and reports the first inter-block race.

    Parameters
    ----------
    memory
        The memory the launch runs against (used to name the racing element).
    grid
        The launch grid; block ids are linear ``x + gx * (y + gy * z)`` while recording.
    """

    def __init__(self, memory: Memory, grid: BlockId) -> None:
        self._memory = memory
        self._grid = grid
        self._logs = {READ: _Log(), WRITE: _Log(), ATOMIC: _Log()}
        self._sites: list[str] = []
        self._itemsize: dict[int, int] = {}
        self.block = 0

    def site(self, location: str) -> int:
        """Register an op location; returns the id accesses are recorded under."""
        self._sites.append(location)
        return len(self._sites) - 1

    def recorder(self, kind: str, site: int) -> Access:
        """Return the callback a memory access of `kind` at `site` reports to."""
        log = self._logs[kind]

        def record(region: Region, addresses: Array, itemsize: int) -> None:
            self._itemsize[region.index] = itemsize
            log.regions.append(region.index)
            log.addresses.append(addresses)
            log.blocks.append(self.block)
            log.sites.append(site)

        return record

    def check(self) -> None:
        """Raise `DataRaceError` for the first racing element, if any."""
        written = set(self._logs[WRITE].regions)
        atomic = set(self._logs[ATOMIC].regions)
        hits: list[_Hit] = []
        racing: list[Array] = []
        if written:
            others = [(self._logs[k].arrays(written), k) for k in (WRITE, ATOMIC, READ)]
            self._against(self._logs[WRITE].arrays(written), WRITE, others, hits, racing)
        if atomic:
            self._against(
                self._logs[ATOMIC].arrays(atomic), ATOMIC, [(self._logs[READ].arrays(atomic), READ)], hits, racing
            )
        if hits:
            hit = min(hits, key=lambda h: (h.address, min(h.block, h.other_block)))
            count = int(np.unique(np.concatenate(racing)).size)
            self._raise(hit, count)

    def _against(
        self,
        writers: tuple[Array, Array, Array],
        writer_kind: str,
        others: list[tuple[tuple[Array, Array, Array], str]],
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
        for (addr, block, site), kind in others:
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
            hits.append(
                _Hit(int(addr[i]), int(w_block[j]), int(w_site[j]), writer_kind, int(block[i]), int(site[i]), kind)
            )

    def _raise(self, hit: _Hit, count: int) -> None:
        region = self._memory.region_at(hit.address)
        if region is None:
            element = f"address {hit.address:#x}"
        else:
            element = region.describe(hit.address, self._itemsize.get(region.index))
        first = (self._block_id(hit.block), self._sites[hit.site], hit.kind)
        second = (self._block_id(hit.other_block), self._sites[hit.other_site], hit.other_kind)
        if hit.other_block < hit.block:
            first, second = second, first
        raise DataRaceError(element, first, second, count)

    def _block_id(self, linear: int) -> BlockId:
        gx, gy, _ = self._grid
        return (linear % gx, (linear // gx) % gy, linear // (gx * gy))
