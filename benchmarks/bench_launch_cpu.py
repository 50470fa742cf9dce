"""Host time of a safe launch on the CPU, pure-Python launch path against the compiled one, with no GPU.

The fake-GPU harness of ``packages/tile-frontend/tests/test_frontend_gpu_path.py`` stands in for tile.core's device
calls (device memory is host memory; tileiras still compiles the real cubin), and here tile.core's prepared launch
is a no-op, so what is timed is all of Tile's own host work per launch: the checks, the moves, the ``Launch`` op, its
execution through tile.aio and the hand-back. Measured in one process, switching paths in-process
(``tile.frontend._accel.use``), in interleaved rounds (median of ROUNDS):

- ``.then`` chain: LAUNCHES launches, each made by the previous one's ``then``, waited for once (per launch);
- ``sync_on``: ``add(z, x, y).sync_on(ctx)`` per launch (a launch and its wait).

Run from the repository root: ``python benchmarks/bench_launch_cpu.py`` (needs tileiras, no GPU). The GPU numbers
(``bench_frontend.py --launch-only``, ``bench_launch_floor.py``) report both paths too.

``--breakdown`` also splits a launch by step, on both paths (``perf_counter_ns`` around each step, so each split
carries about 0.1 us of timer): ``kernel(args)`` and ``.sync_on(ctx)`` of a launch with a wait; ``.then(fn)``, the
kernel call inside the ``.then`` function, and the rest of the chain's execution and hand-back per link.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "tile-frontend" / "tests"))

from bench_frontend import SMALL_N, SMALL_TILE, TileLoop, add  # noqa: E402

import test_frontend_gpu_path as fakes  # noqa: E402
import tile.core as tile_core  # noqa: E402
import tile.frontend as tile  # noqa: E402
from tile.frontend import _accel, f32  # noqa: E402

ROUNDS, LAUNCHES, SYNCS = 15, 2000, 2000
PATHS = ("pure", "compiled")
BREAKDOWN = "--breakdown" in sys.argv


def _no_op_prepare(*args: Any, **kwargs: Any) -> Any:
    return lambda: None


def measure() -> dict[str, float]:
    """Median µs per launch for each (path, measurement)."""
    ctx = fakes.FakeCudaContext()
    gpu = fakes.DEVICE
    args = [
        tile.zeros(f32, [SMALL_N], device=gpu).partition([SMALL_TILE]),
        tile.ones(f32, [SMALL_N], device=gpu),
        tile.ones(f32, [SMALL_N], device=gpu),
    ]
    loop = TileLoop(add, args, ctx)
    loop.run()  # compiles, makes the plan
    runs = {
        ".then chain": (lambda: loop.chain(LAUNCHES), LAUNCHES),
        "sync_on": (lambda: [loop.run() for _ in range(SYNCS)], SYNCS),
    }
    paths = [p for p in PATHS if p == "pure" or _accel.compiled() is not None]
    samples: dict[str, list[float]] = {f"{p}: {name}": [] for p in paths for name in runs}
    for _ in range(ROUNDS):
        for name, (run, count) in runs.items():
            for p in paths:
                _accel.use(p)
                start = time.perf_counter()
                run()
                samples[f"{p}: {name}"].append((time.perf_counter() - start) / count * 1e6)
    return {key: statistics.median(values) for key, values in samples.items()}


def _split_sync(kernel: Any, args: list[Any], ctx: Any, n: int) -> tuple[list[Any], dict[str, float]]:
    """``kernel(args)`` and ``.sync_on(ctx)`` timed apart, ns per launch summed over ``n`` launches."""
    call = wait = 0
    for _ in range(n):
        t0 = time.perf_counter_ns()
        op = kernel(*args)
        t1 = time.perf_counter_ns()
        args = list(op.sync_on(ctx))
        wait += time.perf_counter_ns() - t1
        call += t1 - t0
    return args, {"sync: kernel(args)": call / n, "sync: .sync_on(ctx)": wait / n}


def _split_chain(kernel: Any, args: list[Any], ctx: Any, n: int) -> tuple[list[Any], dict[str, float]]:
    """A chain of ``n`` launches: ``.then(fn)``, the kernel call inside ``fn``, the rest of execution and release."""
    inner = [0]

    def step(out: Any) -> Any:
        t = time.perf_counter_ns()
        op = kernel(*out)
        inner[0] += time.perf_counter_ns() - t
        return op

    op = kernel(*args)
    then = 0
    for _ in range(n - 1):
        t = time.perf_counter_ns()
        op = op.then(step)
        then += time.perf_counter_ns() - t
    t = time.perf_counter_ns()
    args = list(op.sync_on(ctx))
    rest = time.perf_counter_ns() - t - inner[0]
    return args, {
        "chain: .then(fn)": then / n,
        "chain: kernel(args) in fn": inner[0] / n,
        "chain: run + release": rest / n,
    }


def breakdown(rounds: int = 5) -> dict[str, float]:
    """Median µs per launch of each step on each path (see the module docstring)."""
    ctx = fakes.FakeCudaContext()
    gpu = fakes.DEVICE
    args = [
        tile.zeros(f32, [SMALL_N], device=gpu).partition([SMALL_TILE]),
        tile.ones(f32, [SMALL_N], device=gpu),
        tile.ones(f32, [SMALL_N], device=gpu),
    ]
    args = list(add(*args).sync_on(ctx))  # compiles, makes the plan
    paths = [p for p in PATHS if p == "pure" or _accel.compiled() is not None]
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for p in paths:
            _accel.use(p)
            args, sync = _split_sync(add, args, ctx, SYNCS)
            args, chain = _split_chain(add, args, ctx, LAUNCHES)
            for step, ns in (sync | chain).items():
                samples.setdefault(f"{p}: {step}", []).append(ns / 1e3)
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    with pytest.MonkeyPatch.context() as mp:
        fakes.install_fakes(mp)
        mp.setattr(tile_core, "prepare", _no_op_prepare)
        gc.collect()
        us = measure()
        steps = breakdown() if BREAKDOWN else {}
    print(f"launch path reason: {_accel.reason()}")
    for key, value in us.items():
        print(f"  {key:28s} {value:7.2f} us per launch")
    for name in (".then chain", "sync_on"):
        if f"compiled: {name}" in us:
            print(f"  {name}: compiled / pure = {us[f'compiled: {name}'] / us[f'pure: {name}']:.3f}")
    if steps:
        print("per step (each split adds ~0.1 us of timer):")
    for key, value in steps.items():
        print(f"  {key:38s} {value:7.2f} us per launch")


if __name__ == "__main__":
    main()
