"""Memory no Tile buffer owns, held by the work that uses it until that work completes.

A launch or asynchronous copy through a borrowed foreign view (``tile.core.borrow`` of torch, cupy or another DLPack
producer) or from/to a host array reads or writes memory whose owner tile.core cannot order a free after: the
producer frees (or its caching allocator hands the block to its next allocation) as soon as its last reference
drops. The DLPack and ``__cuda_array_interface__`` contracts put that on the consumer: it keeps the producer alive
as long as it uses the memory. A kernel or copy uses it until it completes, not until the call returns, so the
caller dropping every reference right after the call must not free it. Each such use therefore hands the objects
to its stream's holder (:func:`hold`), which keeps them until the stream's use mark (re-recorded by every use, so
a later record stands for every earlier one) is complete; a deferred release (``tile.core._reaper``) drops them at
the first safe point after that (a synchronize, an allocation, a free), and a stream that keeps getting such work
drops what completed every `_PRUNE_AT` holds.

Invariant: nothing held is dropped before the work queued before its hold is complete: a late release, never an
early one. A query that fails (a sticky fault) keeps the objects for the life of the process. Not while the stream
captures a graph (the capture runs nothing; whoever replays the graph keeps its memory alive, as for buffers).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tile.core import _reaper
from tile.core._event import Event

if TYPE_CHECKING:
    from tile.core._stream import Stream

__all__ = ["Holder", "hold", "prune"]

_PRUNE_AT = 64  # held objects of one stream after which a hold first asks whether the earlier ones are done
_leaked: list[object] = []  # held objects whose completion could not be told (a failed query): never dropped


class Holder:
    """The objects a stream's queued work uses, and the stream's use mark that stands for that work."""

    __slots__ = ("_lock", "mark", "objects", "queued")

    def __init__(self, mark: Event) -> None:
        self.mark, self.objects, self.queued = mark, list[object](), False
        self._lock = threading.Lock()  # guards the list (a release on another thread's safe point swaps it)

    def add(self, objects: Iterable[object]) -> None:
        """Hold ``objects`` until the mark, just recorded after their use, is complete."""
        with self._lock:
            self.objects.extend(objects)
            queue, self.queued = not self.queued, True
        if queue:
            _reaper.defer(self.release)

    def release(self) -> bool:
        """Drop the objects once the mark is complete (True); False while work they are used by may still run."""
        with self._lock:
            held, self.objects = self.objects, []
        try:
            done = not held or self.mark.query()
        except Exception:  # cannot tell (a sticky fault, a torn-down driver): keep them rather than free under work
            _leaked.extend(held)
            done, held = True, []
        with self._lock:
            if not done:
                held.extend(self.objects)
                self.objects = held
                return False
            more = bool(self.objects)  # held since the swap: a later record covers them; asked about next time
            self.queued = more
        del held  # the producers' finalizers run here (outside the lock), at a safe point, after the work completed
        return not more


def prune(stream: Stream) -> None:
    """Before a new use is recorded on ``stream``: once many objects are held, drop them if their work completed (a
    stream used in a loop without a safe point between would otherwise hold every launch's objects)."""
    holder = stream._holder
    if holder is not None and len(holder.objects) >= _PRUNE_AT:
        holder.release()


def hold(stream: Stream, mark: Event, objects: Iterable[object]) -> None:
    """Keep ``objects`` alive until the work just enqueued on ``stream`` (and recorded by ``mark``) completes.

    The caller holds ``use_lock`` and recorded ``mark`` (the stream's use mark) after the work.
    """
    holder = stream._holder
    if holder is None or holder.mark is not mark:
        holder = stream._holder = Holder(mark)
    holder.add(objects)
