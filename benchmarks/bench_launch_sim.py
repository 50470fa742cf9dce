"""Host time of a safe GPU launch on the CPU, over the real tile.core and its driver simulator (no GPU, no tileiras).

``tile.core.testing.simulated(asynchronous=True)`` stands in for the CUDA driver (device memory is host memory,
streams queue their work until a synchronization); the kernels are compiled to bytecode only and loaded from a
stand-in cubin whose entries the simulator runs as no-ops, so what is timed is Tile's own host work per launch
(checks, moves, the ``Launch`` op, tile.aio's execution, tile.core's prepared launch, the hand-back) plus the
simulator's driver calls, which are timed apart (``sim``) and subtracted (``host``). Three loops, each on both
launch paths (pure Python and ``_fastlaunch``), in interleaved rounds (the fastest of ROUNDS: on a shared machine
the minimum is the steadiest statistic):

- ``add sync``: ``add(z, x, y).sync_on(stream)`` per launch, 1024 f32 elements in 8 tiles;
- ``add chain``: a ``.then`` chain of CHAIN launches of that kernel, waited for once (per launch);
- ``rms chain``: the same chain of the rmsnorm kernel of bench_lang_rmsnorm.py (its output a 4096 x 4096 f16
  tensor in ``partition([1, 4096])``, 4096 tiles, a float scalar and a keyword ``Const``);
- ``core launch``: ``tile.core.launch`` (checked, not prepared) of the add kernel's function, SYNCS back to back on
  its buffers' stream, then one synchronize (tile.core has one path: the row is the same code under both labels).

Run from the repository root: ``python benchmarks/bench_launch_sim.py``. ``--profile [pure|compiled]``: a cProfile of
one path's ``rms chain`` (with ``--core``: of ``core launch``, with ``--add``: of ``add chain``), top functions by own
time. ``--leaks``: 10^5 launches of each loop on each path, the growth of live Python blocks and of simulated device
memory. ``--breakdown``: each chain's build (``.then`` calls), run and release (hand-back) apart; in a GPU-bound chain
(rmsnorm's kernels take ~27 us each on an H100) the build and the release are host time the GPU sits idle, while the run
overlaps the kernels.
"""

from __future__ import annotations

import cProfile
import dataclasses
import gc
import pstats
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontend import SMALL_N, SMALL_TILE, TileLoop, add
from bench_lang_rmsnorm import SAFE as RMSNORM

import tile.core as tc
import tile.frontend as tile
from tile.compiler import compile_kernel
from tile.core.testing import SimDriver, SimKernel, simulated, sm90_cubin
from tile.frontend import _accel, _entry, _execute, f16, f32
from tile.frontend._execute import GPU_KIND

ROUNDS, CHAIN, SYNCS = 9, 100, 300
M = N = 4096
PATHS = ("pure", "compiled")
_LOOPS: dict[str, TileLoop] = {}
_SIM_CALLS = ("cuLaunchKernel", "cuStreamSynchronize", "cuStreamQuery", "cuEventRecord", "cuEventQuery")


def _bytecode_only(sim: SimDriver) -> Callable[..., Any]:
    """`compile_kernel` without tileiras: the bytecode, a stand-in sm_90 cubin, and a no-op simulator entry."""

    def compile_for_sim(fn: Any, spec: Any, target: Any, **options: Any) -> Any:
        compiled = compile_kernel(fn, spec, target, cubin=False, **options)  # (the frontend passes its captures=)
        if target.arch == "cpu":
            return compiled
        kinds = [
            "ptr" if slot.role in ("base", "pointer") else GPU_KIND.get(slot.dtype, slot.dtype)
            for slot in compiled.abi.slots
        ]
        sim.add_kernel(SimKernel(compiled.entry, kinds, lambda values, grid: ([], lambda: None)))
        return dataclasses.replace(compiled, cubin=sm90_cubin())

    return compile_for_sim


class SimClock:
    """Time spent inside the simulator's driver calls (wrapped), to subtract from the host time."""

    def __init__(self, sim: SimDriver, names: Iterable[str] = ()) -> None:
        """Wrap the calls ``names`` (default: the launch path's own, ``_SIM_CALLS``)."""
        self.ns = 0
        for name in tuple(names) or _SIM_CALLS:
            setattr(sim, name, self._timed(getattr(sim, name)))

    def _timed(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return call(*args)
            finally:
                self.ns += time.perf_counter_ns() - t

        return timed


def loops(stream: Any) -> dict[str, tuple[Callable[[], None], int]]:
    gpu = tc.Device(0)
    small = TileLoop(
        add,
        [
            tile.zeros(f32, [SMALL_N], device=gpu).partition([SMALL_TILE]),
            tile.ones(f32, [SMALL_N], device=gpu),
            tile.ones(f32, [SMALL_N], device=gpu),
        ],
        stream,
    )
    rms = TileLoop(
        RMSNORM,
        [
            tile.zeros(f16, [M, N], device=gpu).partition([1, N]),
            tile.ones(f16, [M, N], device=gpu),
            tile.ones(f16, [N], device=gpu),
            1e-6,
        ],
        stream,
        TILE=1024,
    )
    small.run()  # compile, make the plans
    rms.run()
    _LOOPS.update({"add chain": small, "rms chain": rms})
    return {
        "add sync": (lambda: [small.run() for _ in range(SYNCS)] and None, SYNCS),
        "add chain": (lambda: small.chain(CHAIN), CHAIN),
        "rms chain": (lambda: rms.chain(CHAIN), CHAIN),
        "core launch": (core_launches(stream), SYNCS),
    }


def core_launches(stream: Any) -> Callable[[], None]:
    """SYNCS checked ``tile.core.launch`` calls of the add kernel (as launch_calls.py's ``core_rows``), one sync."""
    function = next(iter(_execute._modules.values()))  # the add kernel: (ptr, i32, i32) x 3
    x, y, z = (tc.DeviceBuffer.allocate(4 * SMALL_N, device=stream.device, stream=stream) for _ in range(3))
    args, kinds = [z, SMALL_N, 1, x, SMALL_N, 1, y, SMALL_N, 1], ("ptr", "i32", "i32") * 3

    def run() -> None:
        for _ in range(SYNCS):
            tc.launch(function, SMALL_N // SMALL_TILE, 1, args, stream=stream, signature=kinds)
        stream.synchronize()

    return run


def measure(sim: SimDriver, stream: Any) -> dict[str, tuple[float, float]]:
    """The fastest round's (total, simulator) µs per launch for each (path, loop)."""
    clock = SimClock(sim)
    runs = loops(stream)
    paths = [p for p in PATHS if p == "pure" or _accel.compiled() is not None]
    samples: dict[str, list[tuple[float, float]]] = {}
    for _ in range(ROUNDS):
        for name, (run, count) in runs.items():
            for p in paths:
                _accel.use(p)
                sim.log.clear()
                clock.ns = 0
                start = time.perf_counter_ns()
                run()
                total = time.perf_counter_ns() - start
                samples.setdefault(f"{p}: {name}", []).append((total / count / 1e3, clock.ns / count / 1e3))
    return {key: min(values) for key, values in samples.items()}


def breakdown(stream: Any) -> None:
    """The fastest round's µs per launch of each part of a chain (see `TileLoop.split`), both paths, both kernels."""
    loops(stream)
    for name, loop in _LOOPS.items():
        for p in PATHS:
            if p == "compiled" and _accel.compiled() is None:
                continue
            _accel.use(p)
            parts = [loop.split(CHAIN) for _ in range(ROUNDS * 3)]
            med = [min(col) * 1e6 for col in zip(*parts, strict=True)]
            print(f"  {p}: {name}: build {med[0]:6.2f}  run {med[1]:6.2f}  release {med[2]:6.2f}  us per launch")


def profile(stream: Any) -> None:
    which = "core launch" if "--core" in sys.argv else ("add chain" if "--add" in sys.argv else "rms chain")
    run, _ = loops(stream)[which]
    after = sys.argv[sys.argv.index("--profile") + 1 :]
    _accel.use(after[0] if after and after[0] in PATHS else "pure")
    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        run()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def leaks(sim: SimDriver, stream: Any) -> None:
    """10^5 launches of each loop on each path: live Python memory blocks and simulated device bytes stay flat."""
    runs = loops(stream)
    for p in [p for p in PATHS if p == "pure" or _accel.compiled() is not None]:
        _accel.use(p)
        for name, (run, count) in runs.items():
            run()
            sim.log.clear()
            gc.collect()
            blocks, device = sys.getallocatedblocks(), sum(a.nbytes for a in sim.device_mem.values())
            for _ in range(10**5 // count):
                run()
                sim.log.clear()
            gc.collect()
            grew = sys.getallocatedblocks() - blocks
            moved = sum(a.nbytes for a in sim.device_mem.values()) - device
            print(f"  {p}: {name}: 10^5 launches: {grew:+d} Python blocks, {moved:+d} device bytes")


def main() -> None:
    with simulated(asynchronous=True) as sim:
        sim.eagerness = 0.0
        saved = _entry.compile_kernel
        _entry.compile_kernel = _bytecode_only(sim)  # type: ignore[assignment]
        try:
            stream = tc.Device(0).create_stream()
            gc.collect()
            if "--profile" in sys.argv:
                profile(stream)
                return
            if "--breakdown" in sys.argv:
                breakdown(stream)
                return
            if "--leaks" in sys.argv:
                leaks(sim, stream)
                return
            us = measure(sim, stream)
        finally:
            _entry.compile_kernel = saved
    print(f"launch path reason: {_accel.reason()}")
    print(f"  {'':22s} {'total':>8s} {'sim':>7s} {'host':>7s}  (us per launch)")
    for key, (total, simulator) in us.items():
        print(f"  {key:22s} {total:8.2f} {simulator:7.2f} {total - simulator:7.2f}")


if __name__ == "__main__":
    main()
