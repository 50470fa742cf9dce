"""Index guards the launcher checks on the host instead of the kernel checking them on the device.

Tile IR requires every partition access to use an index inside the partition's index space. A safe kernel proves
most indices in range (a loop over ``range(p.num_tiles[d])``, a tile from ``out.tiles()``); the rest need a guard.
When the guard's subject depends only on things the launcher knows before launching (tensor extents, the grid,
constants), it becomes a `HostGuard`: "this upper bound <= the partition's tile count". The kernel then contains no
check at all, which matters on the GPU: a guard branch (even one that never runs) makes tileiras drop its
warp-specialised GEMM pipeline. Guards on values computed at run time stay in the kernel (see ``_typecheck_guards``).

Invariants: a `Bound` is the exclusive upper bound of a non-negative index; a guard holds when ``bound <=
cdiv(extent, tile)`` for the partition's tensor parameter; every field is plain data, so guards live in the disk
cache's JSON and compare and hash by value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Bound", "HostGuard", "failed_guard"]


@dataclass(frozen=True)
class Bound:
    """A host-computable integer: a tile count ``cdiv(param.shape[dim], tile[dim])``, a grid size or a constant.

    ``kind`` is ``"count"`` (``param``, ``tile``, ``dim`` set), ``"grid"`` (``dim`` is the grid axis) or ``"const"``
    (``value``).
    """

    kind: str
    param: str = ""
    tile: tuple[int, ...] = ()
    dim: int = 0
    value: int = 0

    def evaluate(self, shapes: Mapping[str, Sequence[int]], grid: Sequence[int]) -> int:
        """The value for a launch with these tensor extents (by parameter name) and grid."""
        if self.kind == "count":
            return -(-int(shapes[self.param][self.dim]) // self.tile[self.dim])
        if self.kind == "grid":
            return int(grid[self.dim]) if self.dim < len(grid) else 1
        return self.value

    def describe(self, value: int) -> str:
        """Words for an error message, given the bound's value at the launch."""
        if self.kind == "count":
            return f"{self.param}.partition({self.tile}) has {value} tile(s) along dim {self.dim}"
        if self.kind == "grid":
            return f"the launch grid has {value} block(s) along {'xyz'[self.dim]}"
        return f"the constant index is {value - 1}"

    def to_json(self) -> list[Any]:
        """A JSON-ready list (inverse of `from_json`)."""
        return [self.kind, self.param, list(self.tile), self.dim, self.value]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> Bound:
        """Rebuild a bound written by `to_json`."""
        kind, param, tile, dim, value = data
        return cls(str(kind), str(param), tuple(int(t) for t in tile), int(dim), int(value))


@dataclass(frozen=True)
class HostGuard:
    """``bound <= cdiv(shapes[param][dim], tile[dim])``: the accesses at ``where`` stay inside the partition."""

    bound: Bound
    param: str
    tile: tuple[int, ...]
    dim: int
    where: str

    @property
    def count(self) -> Bound:
        """The guarded partition's tile count along ``dim``: what the bound must not exceed."""
        return Bound("count", self.param, self.tile, self.dim)

    def holds(self, shapes: Mapping[str, Sequence[int]], grid: Sequence[int]) -> bool:
        """True when every index the guarded access can take is inside the partition for this launch."""
        return self.bound.evaluate(shapes, grid) <= self.count.evaluate(shapes, grid)

    def explain(self, shapes: Mapping[str, Sequence[int]], grid: Sequence[int]) -> str:
        """Why the guard fails for this launch, and what to change."""
        need = self.bound.evaluate(shapes, grid)
        have = self.count.evaluate(shapes, grid)
        return (
            f"the kernel indexes {self.param}.partition({self.tile}) along dim {self.dim}{self.where} with tile "
            f"indices up to {need - 1} ({self.bound.describe(need)}), but {self.param} of shape "
            f"{tuple(shapes[self.param])} has only {have} tile(s) along dim {self.dim}; pass tensors whose shapes "
            "agree with each other and with the grid"
        )

    def to_json(self) -> list[Any]:
        """A JSON-ready list (inverse of `from_json`)."""
        return [self.bound.to_json(), self.param, list(self.tile), self.dim, self.where]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> HostGuard:
        """Rebuild a guard written by `to_json`."""
        bound, param, tile, dim, where = data
        return cls(Bound.from_json(bound), str(param), tuple(int(t) for t in tile), int(dim), str(where))


def failed_guard(
    guards: Sequence[HostGuard], shapes: Mapping[str, Sequence[int]], grid: Sequence[int]
) -> HostGuard | None:
    """The first guard that does not hold for a launch with these extents and grid, or None when all hold."""
    for g in guards:
        if not g.holds(shapes, grid):
            return g
    return None
