"""Token ordering inside a tile block, and the check that conflicting accesses are ordered by it.

Tile IR does not order memory ops by program order: only token chains do, and the device may run two memory
ops of one block in either order unless one's result token reaches the other's input token (directly, through
``join_tokens`` or through loop-carried tokens). The interpreter runs ops in program order, which is one of the
allowed orders; `TokenFlow` records the token graph as it runs (one node per dynamic op instance, its
predecessors being the nodes of its input token) and, at the end of each block, looks for two accesses of that
block to one element, at least one a plain write, that no chain orders: on the device their order, and so the
result, is undefined. Two atomics never conflict; reads never conflict with reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._dtypes import Array
from ._errors import BlockId, TokenOrderError
from ._memory import Access, Memory, Region

__all__ = ["TokenFlow"]


@dataclass
class _Access:
    node: int
    region: Region
    addresses: Array
    kind: str
    location: str


class TokenFlow:
    """The token graph of one launch (see the module docstring)."""

    def __init__(self, memory: Memory, check: bool) -> None:
        self._memory = memory
        self._preds: list[tuple[int, ...]] = []
        self._accesses: list[_Access] = []
        self.check = check
        self.current = -1

    def node(self, preds: Iterable[object] = ()) -> int:
        """A new token node ordered after the token values in `preds` (None entries are absent tokens)."""
        self._preds.append(tuple(p for p in preds if isinstance(p, int)))
        return len(self._preds) - 1

    def recorder(self, kind: str, location: str) -> Access | None:
        """Callback recording accesses of the op running as node `current` (None when not checking)."""
        if not self.check:
            return None

        def record(region: Region, addresses: Array) -> None:
            self._accesses.append(_Access(self.current, region, addresses.reshape(-1), kind, location))

        return record

    def check_block(self, block: BlockId) -> None:
        """Raise `TokenOrderError` for the first unordered conflicting pair of this block, then forget them."""
        accesses, self._accesses = self._accesses, []
        writes = [a for a in accesses if a.kind == "write"]
        for w in writes:
            for other in accesses:
                if other.node == w.node or (other.kind == "write" and other.node < w.node):
                    continue
                element = _shared(w, other)
                if element is not None and not self._ordered(w.node, other.node):
                    first, second = (w, other) if w.node < other.node else (other, w)
                    raise TokenOrderError(
                        block, w.region.describe(element), (first.location, first.kind), (second.location, second.kind)
                    )

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


def _shared(a: _Access, b: _Access) -> int | None:
    """The lowest address both accesses touch, or None."""
    if a.region is not b.region:
        return None
    if a.addresses.max() < b.addresses.min() or b.addresses.max() < a.addresses.min():
        return None
    common = np.intersect1d(a.addresses, b.addresses)
    return int(common[0]) if common.size else None
