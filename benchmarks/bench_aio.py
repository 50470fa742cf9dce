"""tile.aio execution modes on one GPU: time per op for sync, await and graphs, against tile.core and torch.

Kernel: the ``vec_add`` fixture of tile-core's tests (Tile IR bytecode, assembled here by tileiras for the
device), on 1024 float32 values (8 tile blocks): small enough that host overhead dominates. Every mode runs on
one stream that owns the buffers (no cross-stream events), except ``aio_sync_pool``, which uses the device's
default round-robin pool. Rounds alternate between modes; the median round is reported in microseconds per op.

- one op per execution (launch + wait for it): ``core_sync`` (tile.core launch + stream sync), ``aio_sync``
  (``op.sync_on``), ``aio_await`` (``await op`` in a running event loop), ``aio_sync_pool``, torch eager;
- 1000 ops per execution (``aio.collect``), one wait: ``core_chain``, ``aio_chain_sync``, ``aio_chain_await``;
- graphs: replay time per kernel for 1-, 100- and 1000-kernel graphs (back-to-back replays, and one wait
  per replay), aio vs ``torch.cuda.graph``.
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


def assemble(arch: str) -> bytes:
    import tile.bindings as tb

    found = tb.find_tileiras()
    if found is None:
        sys.exit("tileiras not found: pip install nvidia-cuda-tileiras or set TILE_TILEIRAS")
    out = Path(tempfile.mkdtemp()) / "vec_add.cubin"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    subprocess.run([str(found.path), f"--gpu-name={arch}", "-o", str(out), str(FIXTURE)], check=True, env=env)
    return out.read_bytes()


class Bench:
    """The kernel, one stream with its buffers, and op builders."""

    def __init__(self) -> None:
        import tile.core as tc
        from tile import aio

        self.tc, self.aio = tc, aio
        self.device = tc.Device(0)
        self.fn = tc.Module.from_cubin(assemble(self.device.arch), device=self.device).function("vec_add")
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

    def chain(self, n: int) -> Any:
        return self.aio.collect(self.op() for _ in range(n))

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


def graph_modes(b: Bench, graphs: dict[int, Any]) -> dict[str, tuple[int, Callable[[], float]]]:
    """Per kernel: ``replays`` back-to-back replays and one wait, and one replay per wait."""
    modes: dict[str, tuple[int, Callable[[], float]]] = {}
    for kernels, graph in graphs.items():
        replays = max(1, 2000 // kernels)

        def batch(graph: Any = graph, replays: int = replays) -> float:
            return timed(1, lambda: b.aio.collect(graph.launch() for _ in range(replays)).sync_on(b.ctx))

        def each(graph: Any = graph, replays: int = replays) -> float:
            return timed(replays, lambda: graph.launch().sync_on(b.ctx))

        modes[f"aio_graph_{kernels}"] = (kernels * replays, batch)
        modes[f"aio_graph_{kernels}_each_sync"] = (kernels * replays, each)
    return modes


def torch_modes() -> tuple[dict[str, tuple[int, Callable[[], float]]], str | None]:
    try:
        import torch
    except ImportError as exc:
        return {}, f"torch unavailable: {exc}"
    x = torch.ones(N, device="cuda")
    acc = torch.zeros(N, device="cuda")
    stream = torch.cuda.Stream()
    modes: dict[str, tuple[int, Callable[[], float]]] = {}

    def eager() -> None:
        acc.add_(x)
        torch.cuda.current_stream().synchronize()

    modes["torch_sync"] = (SINGLE_OPS, lambda: timed(SINGLE_OPS, eager))
    for kernels in (100, 1000):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            acc.add_(x)  # warm-up on the side stream, as torch's capture rules ask
            torch.cuda.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(kernels):
                    acc.add_(x)
        replays = max(1, 2000 // kernels)

        def replay(graph: Any = graph, replays: int = replays) -> float:
            start = time.perf_counter()
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize()
            return time.perf_counter() - start

        modes[f"torch_graph_{kernels}"] = (kernels * replays, replay)
    return modes, None


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
    graphs = {k: b.chain(k).graph(b.ctx) for k in (1, 100, 1000)}
    modes = single_and_chain_modes(b)
    modes.update(graph_modes(b, graphs))
    extra, torch_error = torch_modes()
    modes.update(extra)
    us = run_rounds(modes)
    for graph in graphs.values():
        graph.close()
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
        "notes": {"torch": torch_error} if torch_error else {},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    width = max(map(len, us))
    for name, value in us.items():
        print(f"{name:<{width}}  {value:9.3f} us/op")
    print(json.dumps({"overhead": report["host_overhead_us_per_op_vs_tile_core"], "targets": targets}, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
