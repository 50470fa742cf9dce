"""Host time of tensor views, partitions, allocations and eager tile.kernels calls, over the driver simulator.

``tile.core.testing.simulated(asynchronous=True)`` stands in for the CUDA driver (see bench_launch_sim.py: kernels
compile to bytecode only and run as simulator no-ops), so what is timed is Tile's own host work per call: the
ownership bookkeeping of each new handle (its layout check, registration, creation site), a partition's checks,
``tile.empty``, and an eager `tile.kernels` call's wrappers around its one launch. Each loop runs on both launch paths
(pure Python and ``_fastlaunch``) in interleaved rounds; the fastest of ROUNDS is reported (on a shared machine the
minimum is the steadiest statistic).

Run from the repository root: ``python benchmarks/bench_host_ops.py``. ``--profile NAME [--callees FUNC]
[cumtime]``: a cProfile of loop NAME (e.g. ``reshape``, ``tk.attention``) on the current path, top functions by own
time (or cumulative time), and what FUNC called.
"""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_launch_sim import _bytecode_only

import tile.core as tc
import tile.frontend as tile
import tile.kernels as tk
from tile.core.testing import simulated
from tile.frontend import _accel, _entry, f16

ROUNDS, CALLS = 7, 200
PATHS = ("pure", "compiled")


def loops() -> dict[str, Callable[[], object]]:
    """One call of each measured operation (tensors made once, outside the timing)."""
    gpu = tc.Device(0)
    x = tile.zeros(f16, [4, 8, 64, 64], device=gpu)
    rows = tile.zeros(f16, [64, 1024], device=gpu)
    w = tile.ones(f16, [1024], device=gpu)
    q = tile.zeros(f16, [1, 2, 64, 64], device=gpu)
    k = tile.zeros(f16, [1, 2, 64, 64], device=gpu)
    v = tile.zeros(f16, [1, 2, 64, 64], device=gpu)

    held = [tile.zeros(f16, [64, 1024], device=gpu)]

    def partition() -> object:  # the partition moves the tensor in, .unpartition() gives it back
        held[0] = held[0].partition([1, 1024]).unpartition()
        return held[0]

    return {
        "reshape": lambda: x.reshape(32, 64, 64),
        "slice": lambda: x[1:3, :, 5],
        "view t[()]": lambda: x[()],
        "permute": lambda: x.permute(0, 2, 1, 3),
        "partition+unpartition": partition,
        "tile.empty": lambda: tile.empty(f16, [64, 1024], device=gpu),
        "tk.rmsnorm": lambda: tk.rmsnorm(rows, w),
        "tk.attention": lambda: tk.attention(q, k, v, causal=False),
    }


def measure(runs: dict[str, Callable[[], object]]) -> dict[str, float]:
    """The fastest round's µs per call of each (path, loop)."""
    paths = [p for p in PATHS if p == "pure" or _accel.compiled() is not None]
    for run in runs.values():  # compile, tune, make the plans
        for p in paths:
            _accel.use(p)
            run()
    samples: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            for p in paths:
                _accel.use(p)
                start = time.perf_counter_ns()
                for _ in range(CALLS):
                    run()
                samples.setdefault(f"{p}: {name}", []).append((time.perf_counter_ns() - start) / CALLS / 1e3)
    return {key: min(values) for key, values in samples.items()}


def profile(runs: dict[str, Callable[[], object]], name: str) -> None:
    run = runs[name]
    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(CALLS):
        run()
    prof.disable()
    stats = pstats.Stats(prof).sort_stats(sys.argv[-1] if sys.argv[-1] in ("cumtime", "tottime") else "tottime")
    stats.print_stats(25)
    if "--callees" in sys.argv:
        stats.print_callees(sys.argv[sys.argv.index("--callees") + 1])


def main() -> None:
    # The simulated device reports a real arch and the real tileiras version: its tuning records (no-op kernels'
    # timings) must not land in the user's cache, where a real GPU's calls of the same shapes would read them.
    scratch = tempfile.mkdtemp(prefix="bench_host_ops.")
    os.environ["TILE_CACHE_DIR"] = scratch
    try:
        run_all()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_all() -> None:
    with simulated(asynchronous=True) as sim:
        saved = _entry.compile_kernel
        _entry.compile_kernel = _bytecode_only(sim)  # type: ignore[assignment]
        try:
            runs = loops()
            gc.collect()
            if "--profile" in sys.argv:
                profile(runs, sys.argv[sys.argv.index("--profile") + 1])
                return
            us = measure(runs)
        finally:
            _entry.compile_kernel = saved
    print(f"launch path reason: {_accel.reason()}")
    for key, value in us.items():
        print(f"  {key:32s} {value:8.2f} us per call")


if __name__ == "__main__":
    main()
