"""Instruction counts of the compiled launch path per launch, under callgrind, over the simulated driver (as
bench_launch_sim.py; no GPU): K runs of one of its loops with the cyclic collector off, run inside ``eval`` so that
callgrind collects only them (``--toggle-collect=builtin_eval``). Wall time on a shared machine varies by 2x between
runs; instruction counts do not, so a C change to ``_fastlaunch`` is measured by alternating the old and new builds.

Run from the repository root (the extension built, e.g. ``python packages/tile-frontend/hatch_build.py``)::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=builtin_eval \\
        --callgrind-out-file=chain.out python benchmarks/cg_chain.py 20 "add chain"
    callgrind_annotate --inclusive=yes chain.out | grep _fastlaunch

then divide by K times the loop's launches (printed; 100 for ``add chain``, 300 for ``add sync``). The entry points'
inclusive counts (``call``, ``admit_impl``, ``then``, ``claim_run_impl``, ``execute_impl``, ``replay_impl``,
``release_links``) give the per-step breakdown; ``replay_impl``'s ``PyObject_Call`` is the simulated driver.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_launch_sim as sim_bench

import tile.core as tc
from tile.core.testing import simulated
from tile.frontend import _accel, _entry


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    which = sys.argv[2] if len(sys.argv) > 2 else "add chain"
    with simulated(asynchronous=True) as sim:
        sim.eagerness = 0.0
        _entry.compile_kernel = sim_bench._bytecode_only(sim)  # type: ignore[assignment]
        stream = tc.Device(0).create_stream()
        run, launches = sim_bench.loops(stream)[which]
        _accel.use("compiled")
        run()  # compiled, planned and prepared outside the measured part
        run()
        sim.log.clear()
        gc.collect()
        gc.disable()

        def body() -> None:
            for _ in range(runs):
                run()
                sim.log.clear()

        start = time.perf_counter_ns()
        eval("body()", {"body": body})  # the callgrind toggle: only this call is collected
        spent = time.perf_counter_ns() - start
        gc.enable()
    print(f"{which}: {runs} runs of {launches} launches, {spent / runs / launches / 1e3:.2f} us per launch")


if __name__ == "__main__":
    main()
