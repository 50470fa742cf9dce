"""A graph dropped without ``close()``: once its last replay is done, its finalizer hands the captured memory and
the captured output back as ``close()`` would, and never before (a replay may still be running)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.aio import HostStream
from tile.frontend import f32

N = 256


@pytest.fixture
def worker() -> Iterator[tuple[HostStream, threading.Event]]:
    stream, gate = HostStream(worker=True), threading.Event()
    yield stream, gate
    gate.set()
    stream.close()


def test_a_dropped_graph_hands_its_memory_back_after_its_last_replay(
    k: ModuleType, path: str, worker: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = worker
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    stores = [z._tensor._storage, x._storage]
    graph = k.accumulate(z, x).graph(stream)
    graph.launch().sync_on(stream)
    z, x = graph.output
    stream.enqueue(gate.wait)  # the last replay's stream is still busy when the graph goes
    del graph
    gc.collect()
    assert [s.pending for s in stores] == [1, 1]  # not before the stream is done
    with pytest.raises(tile.InFlightError, match="captured into a graph"):
        z.unpartition()
    gate.set()
    stream.record().wait()  # everything queued so far, the release's completion callback included
    assert [s.pending for s in stores] == [0, 0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 1.0, np.float32))


def test_a_dropped_graph_never_launched_hands_its_memory_back(k: ModuleType, path: str) -> None:
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    store = x._storage
    graph = k.accumulate(z, x).graph()
    z, x = graph.output
    del graph
    gc.collect()
    assert store.pending == 0
    x.free()
    assert store.freed_at is not None
