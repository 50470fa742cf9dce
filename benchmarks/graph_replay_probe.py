"""Split bench_frontend's "tile graph replay" row into the GPU's part and Tile's host part, on a real GPU.

Builds the benchmark's graph (``replayed_chain``: GRAPH_LAUNCHES chained ``add`` launches), prints its node count and
node types as the driver reports them, then times, interleaved, per replay (microseconds, median of ROUNDS samples of
SAMPLE replays): ``tile`` = ``graph.launch().sync_on(stream)`` (the row), ``raw`` = ``cuGraphLaunch`` +
``cuStreamSynchronize`` on the same executable and stream (the driver and the GPU only). ``tile - raw`` is Tile's
host cost per replay. Run it with each checkout's packages on PYTHONPATH; the file reads only what both have.

    python benchmarks/graph_replay_probe.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_frontend as bf  # the benchmark's own kernel and graph

import tile.bindings as tb
import tile.frontend as tile

ROUNDS, SAMPLE = 15, 20


def main() -> None:
    """Print the graph's nodes and the per-replay timings as one JSON line."""
    tile.set_backend("gpu")
    stream = bf.tile_stream()
    graph = bf.replayed_chain(stream)
    d = tb.driver()
    replay = graph._replay  # tile.aio's CudaGraphExec: its graph and executable
    _, count = tb.check(d.cuGraphGetNodes(replay._graph, 0), "cuGraphGetNodes")
    nodes, _ = tb.check(d.cuGraphGetNodes(replay._graph, count), "cuGraphGetNodes")
    kinds = Counter(tb.check(d.cuGraphNodeGetType(n), "cuGraphNodeGetType").name for n in nodes)
    exe, raw = replay._exec, stream._raw

    def tile_replay() -> None:
        graph.launch().sync_on(stream)

    def raw_replay() -> None:
        tb.check(d.cuGraphLaunch(exe, raw), "cuGraphLaunch")
        tb.check(d.cuStreamSynchronize(raw), "cuStreamSynchronize")

    runs = {"tile": tile_replay, "raw": raw_replay}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for run in runs.values():
        for _ in range(50):
            run()
    for _ in range(ROUNDS):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(SAMPLE):
                run()
            samples[name].append((time.perf_counter() - start) / SAMPLE * 1e6)
    us = {name: round(statistics.median(v), 2) for name, v in samples.items()}
    graph.close()
    out = {"nodes": count, "kinds": dict(kinds), "launches": bf.GRAPH_LAUNCHES, "us_per_replay": us}
    out["tile_host_us_per_replay"] = round(us["tile"] - us["raw"], 2)
    out["frontend"] = tile.__file__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
