"""A captured ``.then`` chain on tile.core's simulated driver, which captures graphs (tile.core.testing._graphs): the
nodes each captured link costs the GPU at every replay, and the driver calls each replay costs the host.

``bench_frontend.py --launch-only``'s "tile graph replay" row replays such a graph of 100 ``add`` launches with
``graph.launch().sync_on(stream)``. Each link is exactly one kernel node (no event record or wait, no host function,
no copy between links: stream order on the capture stream is the graph's order), and a replay is one
``cuGraphLaunch`` and one ``cuStreamSynchronize``. A change that adds a node per link, or a driver call per replay,
fails here instead of showing only as a slower row on the GPU.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core.testing import counting_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_frontend_launch_calls import N, _operands, _simulated_gpu  # a sibling test module


def _captured_chain(add: Any, args: list[Any], n: int, stream: tc.Stream) -> Any:
    """The benchmark's graph: ``n`` chained ``add`` launches captured on ``stream``."""
    op = add(*args)
    for _ in range(n - 1):
        op = op.then(lambda out: add(*out))
    return op.graph(stream)


@pytest.mark.parametrize("links", [1, 2, 25])
def test_each_captured_link_is_one_kernel_node_and_a_replay_is_one_launch(
    monkeypatch: pytest.MonkeyPatch, path: str, k: ModuleType, links: int
) -> None:
    """Per link: one kernel node and no edge (event record or wait) or other node; per replay: one cuGraphLaunch and
    one cuStreamSynchronize; the replays compute the chain (z = x + y, written ``links`` times per replay). Bugs
    caught: a captured event record/wait or host function per link (GPU time at every replay), a wait or event per
    replay for the graph's own ordering."""
    for sim in _simulated_gpu(monkeypatch, k, seed=2, eagerness=0.0):
        stream = tc.Device(0).create_stream()
        args = list(k.add(*_operands()).sync_on(stream))  # compiles, plans and prepares the launch, as the warm-up
        with counting_calls(sim) as calls:
            graph = _captured_chain(k.add, args, links, stream)
        assert calls["cuGraphInstantiate"] == 1
        (captured,) = sim.graphs.values()
        assert Counter(w.kind for w in captured.work) == {"kernel": links}, [w.kind for w in captured.work]
        assert captured.streams == {stream.handle}  # no other stream joined the capture
        assert sim.kinds("launch") == [("launch", stream.handle, (N // 128, 1, 1))]  # the warm-up only: none ran
        for _ in range(3):
            with counting_calls(sim) as calls:
                graph.launch().sync_on(stream)
            assert dict(calls) == {"cuGraphLaunch": 1, "cuStreamSynchronize": 1}
        assert len(sim.kinds("launch")) == 1 + 3 * links
        z, x, y = graph.close()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), x.to_numpy() + y.to_numpy())
        assert sim.graphs == {}
        assert sim.execs == {}
        del z, x, y, graph, args
