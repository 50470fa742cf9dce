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


def main() -> None:
    with pytest.MonkeyPatch.context() as mp:
        fakes.install_fakes(mp)
        mp.setattr(tile_core, "prepare", _no_op_prepare)
        gc.collect()
        us = measure()
    print(f"launch path reason: {_accel.reason()}")
    for key, value in us.items():
        print(f"  {key:28s} {value:7.2f} us per launch")
    for name in (".then chain", "sync_on"):
        if f"compiled: {name}" in us:
            print(f"  {name}: compiled / pure = {us[f'compiled: {name}'] / us[f'pure: {name}']:.3f}")


if __name__ == "__main__":
    main()
