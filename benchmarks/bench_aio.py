"""tile.aio execution modes on one GPU: time per op for sync, await and graphs, against tile.core and torch.

Kernel: the ``vec_add`` fixture of tile-core's tests (Tile IR bytecode, assembled here by tileiras for the
device), on 1024 float32 values (8 tile blocks): small enough that host overhead dominates. Every mode runs on
one stream that owns the buffers (no cross-stream events), except ``aio_sync_pool``, which uses the device's
default round-robin pool. Rounds alternate between modes; the median round is reported in microseconds per op.

- one op per execution (launch + wait for it): ``core_sync`` (tile.core launch + stream sync), ``aio_sync``
  (``op.sync_on``), ``aio_await`` (``await op`` in a running event loop), ``aio_sync_pool``, torch eager;
- 1000 ops per execution (``aio.collect``), one wait: ``core_chain``, ``aio_chain_sync``, ``aio_chain_await``;
- graphs: replay time per kernel for 1-, 100- and 1000-kernel graphs (back-to-back replays, and one wait
  per replay), aio vs ``torch.cuda.graph``; the same for a ``noop`` Tile kernel (built here with tile.ir's
  builder: no parameters, returns at once), and torch graphs of the same Tile kernels (launched by tile.core on
  torch's capture stream), so the graph's own per-kernel cost is told apart from the kernel's duration. The
  report gives each captured graph's node kinds and edges (``cuGraphGetNodes``), also for a capture on a
  stream that is not the buffers' home.
Host overhead per op is the difference to the tile.core baseline of the same shape. A 1000-op pipeline
(``acc += 1`` a thousand times) must give the same result in sync, await and graph modes.
Targets: graph replay <= 1 us per kernel (100-kernel graph); await within 10% of sync at one op.

Run on a GPU machine from the repository root: ``python benchmarks/bench_aio.py``; writes
``benchmarks/results/aio.json``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "packages" / "tile-core" / "tests" / "fixtures" / "vec_add.tileirbc"
RESULTS = ROOT / "benchmarks" / "results" / "aio.json"
N, TILE = 1024, 128
SIGNATURE = ("ptr", "i32", "i32") * 3
SINGLE_OPS, CHAIN_OPS, ROUNDS = 500, 1000, 21


def assemble(arch: str, bytecode: Path = FIXTURE) -> bytes:
    import tile.bindings as tb

    found = tb.find_tileiras()
    if found is None:
        sys.exit("tileiras not found: pip install nvidia-cuda-tileiras or set TILE_TILEIRAS")
    out = Path(tempfile.mkdtemp()) / f"{bytecode.stem}.cubin"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    subprocess.run([str(found.path), f"--gpu-name={arch}", "-o", str(out), str(bytecode)], check=True, env=env)
    return out.read_bytes()


def noop_bytecode() -> Path:
    """Tile IR bytecode of ``entry @noop()`` (no parameters, returns at once), built with tile.ir's builder:
    the shortest kernel tileiras makes, to separate the graph's per-kernel cost from the kernel's duration."""
    from tile.ir import Builder, Function, FunctionType, Module, write_bytecode

    fn = Function("noop", FunctionType(()))
    Builder(fn.body).return_()
    path = Path(tempfile.mkdtemp()) / "noop.tileirbc"
    path.write_bytes(write_bytecode(Module([fn]), "13.3"))
    return path


class Bench:
    """The kernel, one stream with its buffers, and op builders."""

    def __init__(self) -> None:
        import tile.core as tc
        from tile import aio

        self.tc, self.aio = tc, aio
        self.device = tc.Device(0)
        self.fn = tc.Module.from_cubin(assemble(self.device.arch), device=self.device).function("vec_add")
        noop_cubin = assemble(self.device.arch, noop_bytecode())
        self.noop = tc.Module.from_cubin(noop_cubin, device=self.device).function("noop")
        self.stream = tc.Stream(self.device)
        self.ctx = aio.CudaContext(self.stream)
        self.policy = aio.SingleStream(self.ctx)
        ones = np.ones(N, np.float32)
        self.ones = tc.DeviceBuffer.from_host(ones, stream=self.stream)
        self.acc = tc.DeviceBuffer.from_host(np.zeros(N, np.float32), stream=self.stream)
        self.args = [self.acc, N, 1, self.ones, N, 1, self.acc, N, 1]
        self.grid = math.ceil(N / TILE)
        self.loop = asyncio.new_event_loop()

    def op(self) -> Any:
        return self.aio.launch(self.fn, self.grid, self.args, signature=SIGNATURE)

    def noop_op(self) -> Any:
        return self.aio.launch(self.noop, 1, [], signature=())

    def chain(self, n: int, make: Callable[[], Any] | None = None) -> Any:
        return self.aio.collect((make or self.op)() for _ in range(n))

    def core_launch(self) -> None:
        self.tc.launch(self.fn, self.grid, 1, self.args, stream=self.stream, signature=SIGNATURE)

    def result(self) -> np.ndarray:
        return np.asarray(self.acc.to_numpy(np.float32, N))

    def awaiting(self, make: Callable[[], Any], count: int) -> float:
        """Seconds for ``count`` sequential awaits inside a running loop (loop entry not timed)."""

        async def body() -> float:
            start = time.perf_counter()
            for _ in range(count):
                await make().schedule(self.policy)
            return time.perf_counter() - start

        return self.loop.run_until_complete(body())


def timed(count: int, body: Callable[[], None]) -> float:
    start = time.perf_counter()
    for _ in range(count):
        body()
    return time.perf_counter() - start


def run_rounds(modes: dict[str, tuple[int, Callable[[], float]]]) -> dict[str, float]:
    """Median microseconds per op; ``modes`` maps a name to (ops per round, round -> seconds)."""
    for _, body in modes.values():
        body()  # warm-up
    samples: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(ROUNDS):
        for name, (ops, body) in modes.items():
            samples[name].append(body() / ops * 1e6)
    return {name: round(statistics.median(v), 3) for name, v in samples.items()}


def single_and_chain_modes(b: Bench) -> dict[str, tuple[int, Callable[[], float]]]:
    s, c = SINGLE_OPS, CHAIN_OPS

    def core_sync() -> None:
        b.core_launch()
        b.stream.synchronize()

    def core_chain() -> float:
        start = time.perf_counter()
        for _ in range(c):
            b.core_launch()
        b.stream.synchronize()
        return time.perf_counter() - start

    return {
        "core_sync": (s, lambda: timed(s, core_sync)),
        "aio_sync": (s, lambda: timed(s, lambda: b.op().sync_on(b.ctx))),
        "aio_await": (s, lambda: b.awaiting(b.op, s)),
        "aio_sync_pool": (s, lambda: timed(s, lambda: b.op().sync())),
        "core_chain": (c, core_chain),
        "aio_chain_sync": (c, lambda: timed(1, lambda: b.chain(c).sync_on(b.ctx))),
        "aio_chain_await": (c, lambda: b.awaiting(lambda: b.chain(c), 1)),
    }


def graph_modes(b: Bench, graphs: dict[str, tuple[int, Any]]) -> dict[str, tuple[int, Callable[[], float]]]:
    """Per kernel: ``replays`` back-to-back replays and one wait, and one replay per wait; for the 100-kernel
    graphs also the bare driver loop (``cuGraphLaunch`` on the same executable, no tile.aio op per replay)."""
    modes: dict[str, tuple[int, Callable[[], float]]] = {}
    for name, (kernels, graph) in graphs.items():
        replays = max(1, 2000 // kernels)

        def batch(graph: Any = graph, replays: int = replays) -> float:
            return timed(1, lambda: b.aio.collect(graph.launch() for _ in range(replays)).sync_on(b.ctx))

        def each(graph: Any = graph, replays: int = replays) -> float:
            return timed(replays, lambda: graph.launch().sync_on(b.ctx))

        def bare(graph: Any = graph, replays: int = replays) -> float:
            start = time.perf_counter()
            for _ in range(replays):
                graph._replay.replay(b.ctx)
            b.stream.synchronize()
            return time.perf_counter() - start

        modes[name] = (kernels * replays, batch)
        modes[f"{name}_each_sync"] = (kernels * replays, each)
        if kernels == 100:
            modes[f"{name}_driver_loop"] = (kernels * replays, bare)
    return modes


def graph_shape(handle: Any) -> dict[str, Any]:
    """Node kinds and edge count of a ``CUgraph`` (the template the executable was instantiated from)."""
    from tile.bindings import check, driver

    d = driver()
    _, count = check(d.cuGraphGetNodes(handle, 0), "cuGraphGetNodes")
    nodes, _ = check(d.cuGraphGetNodes(handle, count), "cuGraphGetNodes") if count else ([], 0)
    kinds: dict[str, int] = {}
    for node in nodes:
        kind = check(d.cuGraphNodeGetType(node), "cuGraphNodeGetType").name.removeprefix("CU_GRAPH_NODE_TYPE_")
        kinds[kind] = kinds.get(kind, 0) + 1
    edges = check(d.cuGraphGetEdges(handle, 0), "cuGraphGetEdges")
    return {"nodes": int(count), "kinds": kinds, "edges": int(edges[-1] if isinstance(edges, tuple) else edges)}


def foreign_capture_shape(b: Bench) -> dict[str, Any]:
    """Shape of a 10-launch graph captured on a stream that is not the buffers' home (tile.core then orders
    the stream after the allocation and records an event per launch): extra nodes or a refusal show up here.
    Runs last, on buffers of its own, so the timed buffers never see a capture-time event."""
    tc, aio = b.tc, b.aio
    other = aio.CudaContext(tc.Stream(b.device))
    acc = tc.DeviceBuffer.from_host(np.zeros(N, np.float32), stream=b.stream)
    args = [acc, N, 1, b.ones, N, 1, acc, N, 1]
    try:
        op = aio.collect(aio.launch(b.fn, b.grid, args, signature=SIGNATURE) for _ in range(10))
        with op.graph(other) as graph:
            shape = graph_shape(graph._replay._graph)
            graph.launch().sync_on(other)
        shape["result_ok"] = bool(np.array_equal(acc.to_numpy(np.float32, N), np.full(N, 10, np.float32)))
        return shape
    except Exception as exc:  # reported, not fatal: the timed numbers do not depend on it
        return {"error": f"{type(exc).__name__}: {exc}"}


def torch_modes(b: Bench) -> tuple[dict[str, tuple[int, Callable[[], float]]], dict[str, Any], str | None]:
    """torch eager and ``torch.cuda.graph`` timings: of torch's ``add_`` and, to separate graph machinery
    from kernel duration, of the same Tile kernels (vec_add, noop) launched by tile.core on torch's capture
    stream (raw pointers into torch memory, so tile.core records nothing but the launch)."""
    try:
        import torch
    except ImportError as exc:
        return {}, {}, f"torch unavailable: {exc}"
    x = torch.ones(N, device="cuda")
    acc = torch.zeros(N, device="cuda")
    stream = torch.cuda.Stream()
    tile_stream = b.tc.Stream.borrow(stream, device=b.device)  # torch's stream object: no raw handle
    vec_args = [acc.data_ptr(), N, 1, x.data_ptr(), N, 1, acc.data_ptr(), N, 1]
    kernels_of = {
        "torch_graph": lambda: acc.add_(x),
        "torch_graph_tile_vec_add": b.tc.prepare(  # torch's addresses: the benchmark vouches for them
            b.fn, b.grid, 1, vec_args, stream=tile_stream, signature=SIGNATURE, unchecked=True
        ),
        "torch_graph_tile_noop": b.tc.prepare(b.noop, 1, 1, [], stream=tile_stream, signature=()),
    }
    modes: dict[str, tuple[int, Callable[[], float]]] = {}
    shapes: dict[str, Any] = {}

    def eager() -> None:
        acc.add_(x)
        torch.cuda.current_stream().synchronize()

    modes["torch_sync"] = (SINGLE_OPS, lambda: timed(SINGLE_OPS, eager))
    for prefix, body in kernels_of.items():
        for kernels in (100, 1000):
            graph, shape = _torch_graph(torch, stream, body, kernels)
            if shape is not None:
                shapes[f"{prefix}_{kernels}"] = shape
            replays = max(1, 2000 // kernels)

            def replay(graph: Any = graph, replays: int = replays) -> float:
                start = time.perf_counter()
                for _ in range(replays):
                    graph.replay()
                torch.cuda.synchronize()
                return time.perf_counter() - start

            modes[f"{prefix}_{kernels}"] = (kernels * replays, replay)
    return modes, shapes, None


def _torch_graph(torch: Any, stream: Any, body: Callable[[], object], kernels: int) -> tuple[Any, Any]:
    """Capture ``kernels`` calls of ``body``; with recent torch keep the template and count its nodes."""
    try:
        graph = _torch_capture(torch, stream, body, kernels, torch.cuda.CUDAGraph(keep_graph=True))
        from tile.bindings import driver

        shape: Any = graph_shape(driver().CUgraph(int(graph.raw_cuda_graph())))
        graph.replay()  # instantiates a kept graph; proves it replays before it is timed
        torch.cuda.synchronize()
        return graph, shape
    except Exception as exc:  # older torch: no keep_graph / raw_cuda_graph(); the timing does not need them
        note = f"{type(exc).__name__}: {exc}"
    return _torch_capture(torch, stream, body, kernels, torch.cuda.CUDAGraph()), {"error": note}


def _torch_capture(torch: Any, stream: Any, body: Callable[[], object], kernels: int, graph: Any) -> Any:
    with torch.cuda.stream(stream):
        body()  # warm-up on the side stream, as torch's capture rules ask
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(kernels):
                body()
    return graph


def pipeline_agreement(b: Bench) -> dict[str, Any]:
    """Run ``acc += 1`` a thousand times in sync, await and graph modes from the same start."""
    start = np.random.default_rng().integers(0, 100, N).astype(np.float32)
    got: dict[str, np.ndarray] = {}
    b.acc.copy_from(start)
    b.chain(1000).sync_on(b.ctx)
    got["sync"] = b.result()
    b.acc.copy_from(start)
    b.awaiting(lambda: b.chain(1000), 1)
    got["await"] = b.result()
    b.acc.copy_from(start)
    with b.chain(1000).graph(b.ctx) as graph:
        graph.launch().sync_on(b.ctx)
    got["graph"] = b.result()
    expected = start + 1000
    return {mode: bool(np.array_equal(values, expected)) for mode, values in got.items()}


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for dist in ("cuda-bindings", "cuda-core", "torch", "tile-async", "tile-core", "nvidia-cuda-tileiras"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "absent"
    return found


def main() -> None:
    import tile.bindings as tb

    b = Bench()
    agreement = pipeline_agreement(b)
    graphs = {f"aio_graph_{k}": (k, b.chain(k).graph(b.ctx)) for k in (1, 100, 1000)}
    graphs.update({f"aio_noop_graph_{k}": (k, b.chain(k, b.noop_op).graph(b.ctx)) for k in (100, 1000)})
    shapes = {name: graph_shape(graph._replay._graph) for name, (_, graph) in graphs.items()}
    modes = single_and_chain_modes(b)
    modes.update(graph_modes(b, graphs))
    extra, torch_shapes, torch_error = torch_modes(b)
    modes.update(extra)
    shapes.update(torch_shapes)
    us = run_rounds(modes)
    for _, graph in graphs.values():
        graph.close()
    shapes["aio_graph_10_foreign_stream"] = foreign_capture_shape(b)
    b.loop.close()
    overhead = {
        "aio_sync": us["aio_sync"] - us["core_sync"],
        "aio_await": us["aio_await"] - us["core_sync"],
        "aio_chain_sync": us["aio_chain_sync"] - us["core_chain"],
        "aio_chain_await": us["aio_chain_await"] - us["core_chain"],
        "aio_graph_1_each_sync": us["aio_graph_1_each_sync"] - us["core_sync"],
    }
    targets = {
        "graph_100_per_kernel_us_le_1": us["aio_graph_100"] <= 1.0,
        "await_within_10pct_of_sync_one_op": us["aio_await"] <= 1.10 * us["aio_sync"],
        "pipeline_modes_agree": all(agreement.values()),
    }
    report = {
        "benchmark": "aio",
        "device": b.device.name,
        "driver": ".".join(map(str, tb.driver_version())),
        "versions": versions(),
        "kernel": f"vec_add fixture, {N} float32, grid {b.grid}",
        "rounds": ROUNDS,
        "us_per_op": us,
        "host_overhead_us_per_op_vs_tile_core": {k: round(v, 3) for k, v in overhead.items()},
        "await_over_sync_one_op": round(us["aio_await"] / us["aio_sync"], 3),
        "pipeline_1000_ops_agree": agreement,
        "targets_met": targets,
        "graph_shapes": shapes,
        "graph_nodes_per_kernel": {name: round(shapes[name]["nodes"] / k, 3) for name, (k, _) in graphs.items()},
        "graph_per_kernel_us_over_torch_same_kernel": {
            "vec_add_100": round(us["aio_graph_100"] - us.get("torch_graph_tile_vec_add_100", math.nan), 3),
            "noop_100": round(us["aio_noop_graph_100"] - us.get("torch_graph_tile_noop_100", math.nan), 3),
        },
        "notes": {"torch": torch_error} if torch_error else {},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    width = max(map(len, us))
    for name, value in us.items():
        print(f"{name:<{width}}  {value:9.3f} us/op")
    summary = {k: report[k] for k in ("host_overhead_us_per_op_vs_tile_core", "targets_met", "graph_shapes")}
    summary["over_torch"] = report["graph_per_kernel_us_over_torch_same_kernel"]
    print(json.dumps(summary, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
