"""Loop-parallel stores: a ``for`` loop whose only access to an output is one store at a distinct tile per iteration.

Accesses to an output chain through its memory token (``token_key``), which a loop carries, so by default the store
of iteration ``i + 1`` is ordered after the store of iteration ``i``. Where the stores cannot overlap, that order
is pointless and costs: tileiras keeps a chained store after its predecessor (on Hopper a block-wide barrier per
iteration in a chunked row kernel's store loop). A store is *loop-parallel* when

* it is the loop body's only access to that output's chain: nothing before it in the iteration advanced the chain
  (its input is the body's carried token) and nothing after it reads the chain (its token only leaves through the
  body's ``continue``);
* it sits in the loop body itself (not under an ``if``, not in a helper or an inner loop);
* its tile is injective in the loop: a sub-tile index with the loop variable of ``range(...)`` as one coordinate,
  used as is (proven in range, so never clamped), or the tile ``out.tiles()`` handed to this iteration.

Such a store takes the token from *before* the loop (so it stays after everything earlier in the kernel) and its
token is joined into the carried one (so everything after the loop stays after every iteration's store); stores of
different iterations are left unordered, as cuTile Python does for the same pattern. The first two conditions are
only known once the body is emitted: `StoreScope.finish` checks them and gives any store that fails them its chained
token back, which is always correct.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from tile.compiler._kir import Block, Op, Value

__all__ = ["StoreScope"]


@dataclass(eq=False)
class StoreScope:
    """One ``for`` loop body's output token chains, and the stores that were given the pre-loop token."""

    body: Block
    bound: object  # the loop variable (a Value) of range(...), or the TileIndex an out.tiles() loop binds
    before: dict[str, Value]  # token key -> the chain's token before the loop
    carried: dict[str, Value]  # token key -> the body's block argument for that chain
    stores: list[tuple[Op, str, Value, Value]] = field(default_factory=list)  # (store, key, chained, join after it)

    def token_for(self, key: str, block: Block, injective: bool) -> Value | None:
        """The pre-loop token for a store on chain ``key`` emitted into ``block``, or None (chain it as usual)."""
        if not injective or block is not self.body or key not in self.before:
            return None
        return self.before[key]

    def record(self, store: Op, key: str, chained: Value, join: Value) -> None:
        """Remember a store on chain ``key`` given the pre-loop token (``chained``: the chain's token at the store)."""
        self.stores.append((store, key, chained, join))

    def finish(self) -> int:
        """Keep the stores that are their chain's only access in the body; chain the others again. Returns the kept
        count."""
        uses: Counter[int] = Counter()
        continues: Counter[int] = Counter()
        for op in _ops(self.body):
            for v in op.flat_operands():
                uses[v.id] += 1
                if op.name == "continue":
                    continues[v.id] += 1
        kept = 0
        for store, key, chained, join in self.stores:
            alone = chained is self.carried[key] and uses[join.id] == continues[join.id]
            if alone:
                kept += 1
            else:
                store.operands[3] = chained
        return kept


def _ops(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from _ops(region)
