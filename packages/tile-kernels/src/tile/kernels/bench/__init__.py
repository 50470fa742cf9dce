"""tile.kernels.bench: time kernels and their peers the same careful way, save the numbers, plot them.

``from tile.kernels import bench``. `measure` times one callable: CUDA events on one stream on the GPU backend, with
the L2 flushed between calls outside the timed region (a device buffer twice the L2's size is written), or
``perf_counter_ns`` on the CPU interpreter; warm-up calls first. `compare` times several contenders in interleaved
rounds (shuffled by default: on a GPU a contender's time depends on what ran before it by several percent), records
each one's failure without stopping the others, and gives medians, quartiles, min / max, ratios against a baseline
and TFLOP/s or GB/s (`Comparison`, JSON out). `Sweep` holds a comparison per size with provenance (device, versions,
time); `plot` draws it as an SVG written by hand (`line_chart`, no plotting library needed).

Example
-------
>>> from tile.kernels import bench
>>> result = bench.compare({"a": lambda: sum(range(1000)), "b": lambda: sum(range(2000))}, rounds=3, reps=2)
>>> sorted(result.samples), result.baseline, len(result.samples["a"].times_ms)
(['a', 'b'], 'a', 6)

Bad arguments (a non-callable contender, an unknown order or baseline, a count below 1) raise
``tile.frontend.ArgumentError`` before anything runs.
"""

from __future__ import annotations

from tile.kernels.bench._compare import METRICS, ORDERS, Comparison, compare, round_orders
from tile.kernels.bench._provenance import device_name, provenance, versions
from tile.kernels.bench._svg import PALETTE, Line, line_chart, nice_ticks, runs
from tile.kernels.bench._sweep import Sweep, plot
from tile.kernels.bench._timer import Sample, Timer, measure

__all__ = [
    "METRICS",
    "ORDERS",
    "PALETTE",
    "Comparison",
    "Line",
    "Sample",
    "Sweep",
    "Timer",
    "compare",
    "device_name",
    "line_chart",
    "measure",
    "nice_ticks",
    "plot",
    "provenance",
    "round_orders",
    "runs",
    "versions",
]
