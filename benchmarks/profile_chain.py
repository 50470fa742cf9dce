"""Where a safe ``.then`` chain's host time goes on the machine it runs on: a cProfile of chains of ``add`` launches.

bench_launch_sim.py times the host work on the CPU over the simulated driver (about 5 us a link on the compiled path,
on a two-core development machine); bench_launch_floor.py measured 13.8 us a link on an H100, where each link makes
one driver call (``cuLaunchKernel``, about 2.7 us; benchmarks/launch_calls.py). This profile, run on the GPU machine,
shows what the rest is: the functions by own time, over CHAINS chains of LINKS launches (the GPU's real driver and
kernels; the first chain, which compiles and prepares, is not profiled).

Run from the repository root on the GPU machine: ``python benchmarks/profile_chain.py [pure|compiled]`` (default: the
active path).
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontend import SMALL_N, SMALL_TILE, TileLoop, add, tile_stream

import tile.frontend as tile
from tile.frontend import _accel, f32

CHAINS, LINKS = 50, 100


def handled_by_the_compiled_path(run: Callable[[], None]) -> tuple[int, int]:
    """(calls the compiled path handled, kernel calls) over ``run``: a call it leaves (``_accel.call`` returning
    None: a foreign import anywhere in the process, an export, another handle on an output's storage...) takes the
    pure path, at about twice the host time."""
    real, seen = _accel.call, [0, 0]
    if real is None:
        return 0, 0

    def spy(*args: Any) -> Any:
        done = real(*args)
        seen[0] += done is not None
        seen[1] += 1
        return done

    _accel.call = spy
    try:
        run()
    finally:
        _accel.call = real
    return seen[0], seen[1]


def main() -> None:
    if len(sys.argv) > 1:
        _accel.use(sys.argv[1])
    stream = tile_stream()
    loop = TileLoop(
        add,
        [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])],
        stream,
    )
    loop.chain(LINKS)  # compile, plan, prepare
    gc.collect()
    start = time.perf_counter()
    for _ in range(CHAINS):
        loop.chain(LINKS)
    plain = (time.perf_counter() - start) / CHAINS / LINKS * 1e6
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(CHAINS):
        loop.chain(LINKS)
    profile.disable()
    handled, calls = handled_by_the_compiled_path(lambda: loop.chain(LINKS))
    print(f"backend {tile.backend()}, launch path {_accel.active()}: {plain:.2f} us a link unprofiled")
    print(f"the compiled path handled {handled} of {calls} kernel calls (the rest took the pure path)")
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
