"""Host time of tile.core's launch paths on the CPU, over tile.core's driver simulator (no GPU, no tileiras).

The kernel is the simulator's ``vec_add`` (9 parameters, ``(ptr, i32, i32) x 3``, as ``bench_launch.py``'s fixture).
The simulator's ``cuLaunchKernel`` is replaced by a stub that only returns success while timing, so what is timed is
tile.core's own host work per launch, with no driver work to subtract (on a GPU add the real ``cuLaunchKernel``,
about 5 us on an H200 with cuda.bindings). Paths, each LAUNCHES back to back on the buffers' stream, in interleaved
rounds (the fastest of ROUNDS: on a shared machine the minimum is the steadiest statistic):

- ``driver lookup (sim)``: ``_reaper.driver().cuLaunchKernel``, a read the simulator makes slow (its
  ``__getattribute__``, about 1 us; the real ``cuda.bindings`` module's is tens of ns): a checked launch that reads
  it per call (tile.core before its launch plans) carries this simulator cost, to subtract when comparing;
- ``bare driver call``: the stub called with a pre-built argument list (the floor: one Python call);
- ``prepared``: ``PreparedLaunch.__call__`` of ``tile.core.prepare(...)``;
- ``checked``: ``tile.core.launch(...)`` (every check, the ``bench_launch.py`` row that issue 17's bar is about): the
  compiled launch where tile-core's extension is built (``python packages/tile-core/hatch_build.py``), and then
  ``checked, pure`` beside it, the pure-Python launch (``TILE_PURE_PYTHON=1`` makes ``checked`` that one);
- ``checked, other stream``: ``tile.core.launch`` on a stream other than the buffers' (adds the use mark's record;
  the simulator's ``cuStreamIsCapturing`` and ``cuEventRecord`` are timed apart and subtracted).

Run from the repository root: ``python benchmarks/bench_launch_core_sim.py``; ``--profile``: a cProfile of the
checked launch, top functions by own time.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tile.core as tc
from tile.core import _launch, _reaper
from tile.core.testing import VEC_ADD_SIGNATURE, simulated, sm90_cubin

N, LAUNCHES, ROUNDS = 1024, 500, 40


def _ok(*_: object) -> tuple[int]:
    return (0,)


class SimClock:
    """Time spent inside the simulator's other driver calls (a cross-stream launch's capture query and use mark
    record), wrapped, to subtract from the host time."""

    def __init__(self, sim: object, names: tuple[str, ...] = ("cuStreamIsCapturing", "cuEventRecord")) -> None:
        """Wrap ``names`` on ``sim``."""
        self.ns = 0
        for name in names:
            setattr(sim, name, self._timed(getattr(sim, name)))

    def _timed(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return call(*args)
            finally:
                self.ns += time.perf_counter_ns() - t

        return timed


def paths(sim: object) -> dict[str, Callable[[], None]]:
    """The timed loops, each LAUNCHES launches."""
    function = tc.Module.from_cubin(sm90_cubin()).function("vec_add")
    stream, other = tc.Stream(), tc.Stream()
    x, y, z = (tc.DeviceBuffer.from_host(np.ones(N, np.float32), stream=stream) for _ in range(3))
    args = [x, N, 1, y, N, 1, z, N, 1]
    sig = VEC_ADD_SIGNATURE
    sim.cuLaunchKernel = _ok  # type: ignore[attr-defined]  # from here on: tile.core's host work only
    prepared = tc.prepare(function, 8, 1, args, stream=stream, signature=sig)  # (it keeps the stub to call)
    call = prepared._call
    launch = tc.launch

    def lookup() -> None:
        for _ in range(LAUNCHES):
            _reaper.driver().cuLaunchKernel  # noqa: B018  # the read is what is timed

    def bare() -> None:
        stub = sim.cuLaunchKernel  # type: ignore[attr-defined]
        for _ in range(LAUNCHES):
            stub(*call)

    def prepared_loop() -> None:
        for _ in range(LAUNCHES):
            prepared()

    def checked() -> None:
        for _ in range(LAUNCHES):
            launch(function, 8, 1, args, stream=stream, signature=sig)

    def checked_pure() -> None:
        for _ in range(LAUNCHES):
            _launch.launch(function, 8, 1, args, stream=stream, signature=sig)

    def checked_other() -> None:
        for _ in range(LAUNCHES):
            launch(function, 8, 1, args, stream=other, signature=sig)

    loops = {
        "driver lookup (sim)": lookup,
        "bare driver call": bare,
        "prepared": prepared_loop,
        "checked": checked,
        "checked, pure": checked_pure,
        "checked, other stream": checked_other,
    }
    if launch is _launch.launch:  # the pure-Python launch is tile.core.launch: timed once
        del loops["checked, pure"]
    return loops


def main() -> None:
    with simulated() as sim:
        loops = paths(sim)
        for run in loops.values():
            run()  # warm-up: layouts, plans, use marks
        if "--profile" in sys.argv:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(5):
                loops["checked"]()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(20)
            return
        clock = SimClock(sim)
        samples: dict[str, list[float]] = {name: [] for name in loops}
        for _ in range(ROUNDS):
            for name, run in loops.items():
                clock.ns = 0
                start = time.perf_counter_ns()
                run()
                elapsed = time.perf_counter_ns() - start - clock.ns
                samples[name].append(elapsed / LAUNCHES / 1e3)
    best = {name: min(values) for name, values in samples.items()}
    print("tile.core host time per launch on the simulator (stub cuLaunchKernel, the simulator's other calls")
    print(f"subtracted), fastest of {ROUNDS} rounds of {LAUNCHES}:")
    for name, micros in best.items():
        print(f"  {name:24s} {micros:6.2f} us   {micros / best['prepared']:5.2f}x prepared")


if __name__ == "__main__":
    main()
