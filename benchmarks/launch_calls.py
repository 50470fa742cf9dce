"""Driver calls per launch, counted: the map of what a launch costs in driver calls (docs/development.md, "Driver
calls per launch", is this script's output).

Each real driver call costs the host one to three microseconds (the launch itself about 2.7 us on an H100), so the
count is the floor under a launch's host time once Tile's own work is compiled. Counted for: a safe launch waited for
(``sync_on(s)`` and ``.sync()``); a same-stream ``.then`` chain (its fixed cost, and each link's, from chains of 1 and
LINKS + 1 launches, the hand-back included); ``tile.core.launch`` (checked) and a prepared launch, BURST back to
back, on the buffers' stream and on another one; a graph replay (GPU only: the simulator has no graphs). Both
launch paths (pure Python and ``_fastlaunch``).

Run from the repository root: ``python benchmarks/launch_calls.py`` counts on tile.core's simulated driver (no GPU,
no tileiras; kernels compiled to bytecode only); ``--gpu`` counts the real driver's calls on the GPU, which must agree
(the code path is the same; this checks it). A second table splits the host time per launch of the chain and of the
waited launch into the time inside driver calls (every ``cu*`` function timed), inside Python's cyclic garbage
collector (``gc.callbacks``) and the rest, Tile's own host work: on the GPU it says whether a gap to ``ct.launch`` is
driver time, collections or host work (on the simulator, "driver" is the simulator's Python; the timing wrappers' own
cost, a fraction of a microsecond a call, counts as driver time). The collector's share grows with the heap the
process holds (torch and cuda.tile in bench_frontend's).
"""

from __future__ import annotations

import gc
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frontend import LAUNCHES, SMALL_N, SMALL_TILE, TileLoop, add, replayed_chain

import tile.bindings as tb
import tile.core as tc
import tile.frontend as tile
from tile.core.testing import SimDriver, counting_calls, simulated
from tile.frontend import _accel, _entry, _execute, f32

LINKS = 100
BURST = 20  # tile.core launches counted back to back, none waited for (the GPU behind, as in a real burst)
TIMED_LAUNCHES = 20_000  # launches timed per row of the time table


def _per(calls: Counter[str], n: int) -> str:
    return ", ".join(f"{name} {count / n:g}" for name, count in sorted(calls.items())) or "none"


def count(calls: Counter[str], run: Callable[[], None], times: int = 1) -> Counter[str]:
    """The driver calls of ``times`` runs of ``run`` (their garbage collected inside), after one warm-up run;
    ``calls`` counts all."""
    run()
    gc.collect()
    before = Counter(calls)
    for _ in range(times):
        run()
    gc.collect()
    return calls - before


def frontend_rows(calls: Counter[str], stream: Any) -> Iterator[tuple[str, str]]:
    loop = TileLoop(
        add,
        [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])],
        stream,
    )

    def sync() -> None:
        loop.args = list(add(*loop.args).sync())[: loop.n]

    paths = ["pure"] + (["compiled"] if _accel.compiled() is not None else [])
    for path in paths:
        _accel.use(path)
        yield f"{path}: add(...).sync_on(s)", _per(count(calls, loop.run), 1)
        yield f"{path}: add(...).sync()", _per(count(calls, sync), 1)
        one = count(calls, lambda: loop.chain(1))
        many = count(calls, lambda: loop.chain(LINKS + 1))
        yield f"{path}: .then chain, fixed (chain of 1)", _per(one, 1)
        yield f"{path}: .then chain, each further link", _per(many - one, LINKS)


def core_rows(calls: Counter[str], stream: Any) -> Iterator[tuple[str, str]]:
    function = next(iter(_execute._modules.values()))  # the add kernel: (ptr, i32, i32) x 3, like vec_add
    device = stream.device
    x, y, z = (tc.DeviceBuffer.allocate(4 * SMALL_N, device=device, stream=stream) for _ in range(3))
    args = [z, SMALL_N, 1, x, SMALL_N, 1, y, SMALL_N, 1]
    kinds = ("ptr", "i32", "i32") * 3
    grid = SMALL_N // SMALL_TILE
    other = device.create_stream()
    for label, on in (("its buffers' stream", stream), ("another stream", other)):
        yield (
            f"tile.core.launch (checked), {label}",
            _per(
                count(calls, lambda on=on: tc.launch(function, grid, 1, args, stream=on, signature=kinds), BURST), BURST
            ),
        )
        prepared = tc.prepare(function, grid, 1, args, stream=on, signature=kinds)
        yield f"tile.core prepared launch, {label}", _per(count(calls, prepared, BURST), BURST)
    stream.synchronize()
    other.synchronize()


def graph_rows(driver: Any, calls: Counter[str], stream: Any) -> Iterator[tuple[str, str]]:
    if isinstance(driver, SimDriver):  # no graphs
        yield "graph replay + sync_on(s) (whole graph)", "(GPU only: run with --gpu)"
        return
    graph = replayed_chain(stream)
    yield "graph replay + sync_on(s) (whole graph)", _per(count(calls, lambda: graph.launch().sync_on(stream)), 1)
    graph.close()


@contextmanager
def timing(driver: Any) -> Iterator[dict[str, int]]:
    """Nanoseconds spent in the block inside ``driver``'s ``cu*`` functions (``"driver"``, wrapped as
    ``counting_calls`` wraps them: a prepared launch keeps the ``cuLaunchKernel`` it was made with) and inside the
    cyclic garbage collector (``"gc"``, through ``gc.callbacks``; a collection inside a driver call is ``gc``)."""
    spent = {"driver": 0, "gc": 0}
    gc_started = [0]
    names = [name for name in dir(driver) if name.startswith("cu") and name[2:3].isupper()]
    own = {name: vars(driver)[name] for name in names if name in vars(driver)}

    def timed(call: Callable[..., Any]) -> Callable[..., Any]:
        def call_timed(*args: Any) -> Any:
            start, collected = time.perf_counter_ns(), spent["gc"]
            try:
                return call(*args)
            finally:
                spent["driver"] += time.perf_counter_ns() - start - (spent["gc"] - collected)

        return call_timed

    def gc_timer(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter_ns()
        else:
            spent["gc"] += time.perf_counter_ns() - gc_started[0]

    for name in names:
        setattr(driver, name, timed(getattr(driver, name)))
    gc.callbacks.append(gc_timer)
    try:
        yield spent
    finally:
        gc.callbacks.remove(gc_timer)
        for name in names:
            if name in own:
                setattr(driver, name, own[name])
            else:
                delattr(driver, name)


def timed_rows(driver: Any, after_round: Callable[[], None]) -> list[tuple[str, float, float, float]]:
    """(loop, us per launch in all, inside driver calls, inside the cyclic garbage collector), each the mean over
    about TIMED_LAUNCHES launches after a warm-up run: a mean, not a minimum, so the collections a loop triggers count
    at their rate. The chain of LAUNCHES is bench_frontend's: its links' ops and handles stay alive until the
    hand-back (about ten GC-tracked objects a link), so the collector runs during it. ``after_round`` runs after each
    round, untimed (the simulator's call log is cleared there)."""
    out: list[tuple[str, float, float, float]] = []
    with timing(driver) as spent:
        stream = tc.Device(0).create_stream()  # a new stream: its launches are prepared inside the block
        loop = TileLoop(
            add,
            [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])],
            stream,
        )

        def waited() -> None:
            for _ in range(LINKS):
                loop.run()

        loops: dict[str, tuple[Callable[[], None], int]] = {
            f"add(...).sync_on(s), {LINKS} times": (waited, LINKS),
            f".then chain of {LINKS}, waited for": (lambda: loop.chain(LINKS), LINKS),
            f".then chain of {LAUNCHES} (bench_frontend's), waited for": (lambda: loop.chain(LAUNCHES), LAUNCHES),
        }
        for path in ["pure"] + (["compiled"] if _accel.compiled() is not None else []):
            _accel.use(path)
            for name, (run, n) in loops.items():
                run()
                after_round()
                totals = {"all": 0, "driver": 0, "gc": 0}
                for _ in range(max(TIMED_LAUNCHES // n, 1)):
                    driver_ns, gc_ns, start = spent["driver"], spent["gc"], time.perf_counter_ns()
                    run()
                    totals["all"] += time.perf_counter_ns() - start
                    totals["driver"] += spent["driver"] - driver_ns
                    totals["gc"] += spent["gc"] - gc_ns
                    after_round()
                launches = max(TIMED_LAUNCHES // n, 1) * n
                us = {key: ns / launches / 1e3 for key, ns in totals.items()}
                out.append((f"{path}: {name}", us["all"], us["driver"], us["gc"]))
    return out


def rows(driver: Any) -> list[tuple[str, str]]:
    """Everything runs under one counter: a prepared launch keeps the ``cuLaunchKernel`` it was made with."""
    with counting_calls(driver) as calls:
        stream = tc.Device(0).create_stream()
        out = list(frontend_rows(calls, stream))
        out += core_rows(calls, stream)
        out += graph_rows(driver, calls, stream)
    return out


def main() -> None:
    if "--gpu" in sys.argv:
        tile.set_backend("gpu")
        table, times = rows(tb.driver()), timed_rows(tb.driver(), lambda: None)
    else:
        from bench_launch_sim import _bytecode_only

        with simulated(asynchronous=True) as sim:
            sim.eagerness = 0.0
            saved = _entry.compile_kernel
            _entry.compile_kernel = _bytecode_only(sim)  # type: ignore[assignment]
            tile.set_backend("gpu")
            try:
                table, times = rows(sim), timed_rows(sim, sim.log.clear)
            finally:
                _entry.compile_kernel = saved
    print("| launch | driver calls per launch |\n| --- | --- |")
    for label, calls in table:
        print(f"| {label} | {calls} |")
    print("\n| launch (us per launch, mean) | in all | in driver calls | in the garbage collector | the rest |")
    print("| --- | --- | --- | --- | --- |")
    for label, total, driver_us, gc_us in times:
        print(f"| {label} | {total:.2f} | {driver_us:.2f} | {gc_us:.2f} | {total - driver_us - gc_us:.2f} |")


if __name__ == "__main__":
    main()
