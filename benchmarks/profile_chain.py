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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontend import SMALL_N, SMALL_TILE, TileLoop, add, tile_stream

import tile.frontend as tile
from tile.frontend import _accel, f32

CHAINS, LINKS = 50, 100


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
    print(f"backend {tile.backend()}, launch path {_accel.active()}: {plain:.2f} us a link unprofiled")
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
