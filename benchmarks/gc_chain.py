"""Time the cyclic collector takes per link of a safe ``.then`` chain, over the simulated driver (as
bench_launch_sim.py), by generation: the collections a chain's allocations trigger, wherever they land.

Min-of-rounds timings (bench_launch_sim.py) hide the collector: a full collection (which walks every tracked object
of the process) comes every few thousand links and lands in a few rounds only; this sums every collection's time
(``gc.callbacks``) over CHAINS chains. Run from the repository root:
``python benchmarks/gc_chain.py [pure|compiled] [CHAINS] [BALLAST] [LINKS]``: chains of LINKS launches (default 100;
bench_frontend.py --launch-only times chains of 2000); BALLAST long-lived tracked objects are made first, as a process
that imported torch holds (a full collection walks them all; the sim process has ~70k).
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_launch_sim as sim_bench

import tile.core as tc
from tile.core.testing import simulated
from tile.frontend import _accel, _entry

CHAINS = int(sys.argv[2]) if len(sys.argv) > 2 else 300
BALLAST = int(sys.argv[3]) if len(sys.argv) > 3 else 0
sim_bench.CHAIN = int(sys.argv[4]) if len(sys.argv) > 4 else sim_bench.CHAIN


def main() -> None:
    spent, count, started = [0, 0, 0], [0, 0, 0], [0]

    def on_collect(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter_ns()
        else:
            spent[info["generation"]] += time.perf_counter_ns() - started[0]
            count[info["generation"]] += 1

    with simulated(asynchronous=True) as sim:
        sim.eagerness = 0.0
        _entry.compile_kernel = sim_bench._bytecode_only(sim)  # type: ignore[assignment]
        stream = tc.Device(0).create_stream()
        run, links = sim_bench.loops(stream)["add chain"]
        _accel.use(sys.argv[1] if len(sys.argv) > 1 else "compiled")
        run()
        sim.log.clear()
        ballast = [[] for _ in range(BALLAST)]
        gc.collect()
        gc.callbacks.append(on_collect)
        start = time.perf_counter_ns()
        for _ in range(CHAINS):
            run()
            sim.log.clear()
        total = time.perf_counter_ns() - start
        gc.callbacks.remove(on_collect)
        del ballast
    n = CHAINS * links
    print(f"path {_accel.active()}, {len(gc.get_objects())} tracked objects, {total / n / 1e3:.2f} us per link")
    for gen in range(3):
        print(f"  gen {gen}: {count[gen]:5d} collections, {spent[gen] / n / 1e3:6.3f} us per link")


if __name__ == "__main__":
    main()
