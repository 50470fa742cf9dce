"""Host time per launch of Qwen3's eager decode step, over the driver simulator.

One eager decode token is one ``.then()`` chain of ``11 * layers + 3`` `tile.kernels` launches (`Qwen3.forward`).
On a GPU the step is host-bound (an H200 ran Qwen3-4B's eager decode at 7.4 tokens/s, ~330 us of host work a
launch, while its kernels take ~3.3 ms a token), so this bench times that host work without a GPU:
``tile.core.testing.simulated(asynchronous=True)`` stands in for the driver and the kernels compile to bytecode
only and run as simulator no-ops (bench_launch_sim.py's ``_bytecode_only``). What is timed is everything Tile does
per launch: the chain's steps, the `tk.*_op` wrappers (argument checks, views, partitions, autotune lookups), the
launches' ownership checks and moves, tile.aio's execution and tile.core's prepared launch, and the hand-back.

Configs (random weights): ``tiny`` (TINY, 2 layers), and ``4B-1L``: Qwen3-4B's shapes (hidden 2560, 32/8 heads,
intermediate 9728) with one layer and a 4096-token vocabulary (host memory is device memory here). Each config runs
on both launch paths (pure Python and ``_fastlaunch``); the fastest of ROUNDS is reported as µs per launch.

Run from the repository root: ``python benchmarks/bench_qwen3_host.py [--config tiny|4B-1L]``;
``--profile [cumtime] [--dump FILE]``: a cProfile of ``5 * TOKENS`` decode steps on the current path, top functions
by own (or cumulative) time (``--dump``: the raw stats for ``pstats``).

Host µs per launch (``host``: wall less the simulator's driver calls), measured on the 2-core development machine
shared with other jobs (November 2026; two interleaved runs each, the range shown), before (main at cc391e2) and
after this bench's changes (branch ``eager``):

==========  ==================  ==================  ==================  ==================
config      pure, before        pure, after         compiled, before    compiled, after
==========  ==================  ==================  ==================  ==================
tiny        195-224             150-151             198-223             145-149
4B-1L       233-235             151-165             235-236             151-157
==========  ==================  ==================  ==================  ==================

1.35-1.55x less host time per launch. Where it went before (cProfile, ``--profile``, 20 tiny tokens = 500 launches,
434 ms under the profiler): making the ops in the chain's steps 66% (of which the autotune look-ups 19%: matmul's
JSON key, ``autotune.environment()`` parsing every compiler setting from the environment, and the ~30 decode
candidates and the default rebuilt on every call; the row ops' the same), executing the launches 18% (tile.core's
argument packing and prepared launch per launch, the simulator's calls), the handles' call-site walk
(``user_site``) 6.5%, ``tile.empty`` 14% (half of it the simulator's allocation). 180 of the 460 launches took the
keyed launch path: the GEMV kernel is called with each projection's layout in turn, and a kernel kept only its
latest plan. After: 236 ms under the profiler; what remains is spread over the handles' ownership bookkeeping
(``owning`` steps, new handles and their call sites, ~5 per launch), tile.core's packing and the chain's protocol.
A cyclic garbage collection of the long-lived heap costs another ~8 µs a launch here (``gc.freeze()`` after loading
removes it), and more in a process that holds torch's heap.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_launch_sim import SimClock, _bytecode_only

from tile.core.testing import SimDriver, simulated
from tile.frontend import _accel, _entry
from tile.kernels import autotune
from tile.kernels.qwen3 import TINY, Qwen3, Qwen3Config, random_weights

ROUNDS, TOKENS = 9, 4
PATHS = ("pure", "compiled")
CONFIGS = {
    "tiny": TINY,
    "4B-1L": Qwen3Config("4B-1L", 2560, 1, 32, 8, 9728, vocab_size=4096, tie_word_embeddings=True),
}


def _bytecode_only_kept(sim: SimDriver) -> Callable[..., Any]:
    """bench_launch_sim's ``_bytecode_only``, keeping every compiled variant launchable: the simulator finds a
    kernel by entry name (the latest added) and a launch by handle, and one entry compiles to several variants (the
    model's matmul and RMSNorm shapes and configs), so each added kernel is also kept under a key of its own."""
    compile_for_sim = _bytecode_only(sim)

    def compile_kept(fn: Any, spec: Any, target: Any) -> Any:
        compiled = compile_for_sim(fn, spec, target)
        kernel = sim.kernels.get(compiled.entry)
        if kernel is not None:
            sim.kernels[f"{compiled.entry}@{kernel.handle:#x}"] = kernel
        return compiled

    return compile_kept


def sim_clock(sim: SimDriver) -> SimClock:
    """Time spent inside every simulator driver call (each ``cu*`` method wrapped), to subtract from the host time:
    a real driver's calls cost ~2-5 us each, the simulator's (Python) more, and neither is Tile's own work."""
    return SimClock(sim, [name for name in dir(type(sim)) if name.startswith("cu")])


def _untimed(fn: object) -> float:
    """The simulator's no-op kernels cannot be timed (and matmul's tuner captures graphs, which it does not
    implement): every candidate ties, so the tuner keeps the first listed and records it like a real tuning."""
    return 1.0


def launches(config: Qwen3Config) -> int:
    """Launches of one eager decode token: the embedding, 11 a layer, the final norm, the LM head."""
    return 1 + 11 * config.num_hidden_layers + 2


def decode(model: Qwen3, tokens: int) -> None:
    """``tokens`` eager decode steps from position 0 (one chain and one host wait each)."""
    model.reset()
    for t in range(tokens):
        model.forward([t % model.config.vocab_size])


def measure(model: Qwen3, clock: SimClock) -> dict[str, float]:
    """The fastest round's µs per launch on each path: all of it (``wall``) and less the simulator's calls
    (``host``)."""
    paths = [p for p in PATHS if p == "pure" or _accel.compiled() is not None]
    for p in paths:  # compile, tune, make the plans
        _accel.use(p)
        decode(model, 2)
    per_token = launches(model.config)
    samples: dict[str, list[float]] = {}
    for _ in range(ROUNDS):
        for p in paths:
            _accel.use(p)
            gc.collect()
            clock.ns = 0
            start = time.perf_counter_ns()
            decode(model, TOKENS)
            wall = time.perf_counter_ns() - start
            samples.setdefault(f"{p} wall", []).append(wall / TOKENS / per_token / 1e3)
            samples.setdefault(f"{p} host", []).append((wall - clock.ns) / TOKENS / per_token / 1e3)
    return {p: min(v) for p, v in samples.items()}


def profile(model: Qwen3) -> None:
    decode(model, 2)
    prof = cProfile.Profile()
    prof.enable()
    decode(model, 5 * TOKENS)
    prof.disable()
    if "--dump" in sys.argv:
        prof.dump_stats(sys.argv[sys.argv.index("--dump") + 1])
    stats = pstats.Stats(prof).sort_stats("cumtime" if "cumtime" in sys.argv else "tottime")
    stats.print_stats(40)


def main() -> None:
    name = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else "tiny"
    config = CONFIGS[name]
    # The simulated device reports a real arch: its tuning records (no-op kernels' timings) must not land in the
    # user's cache, where a real GPU's calls of the same shapes would read them.
    scratch = tempfile.mkdtemp(prefix="bench_qwen3_host.")
    os.environ["TILE_CACHE_DIR"] = scratch
    try:
        with simulated(asynchronous=True) as sim:
            saved = _entry.compile_kernel
            _entry.compile_kernel = _bytecode_only_kept(sim)  # type: ignore[assignment]
            autotune.wall_timer = _untimed  # type: ignore[assignment]
            autotune.interleaved_wall_times = lambda fns, **_: [1.0] * len(fns)  # type: ignore[assignment]
            try:
                model = Qwen3(config, random_weights(config), max_seq=64)
                gc.collect()
                if "--profile" in sys.argv:
                    profile(model)
                    return
                us = measure(model, sim_clock(sim))
            finally:
                _entry.compile_kernel = saved
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{name}: {launches(config)} launches a token; launch path reason: {_accel.reason()}")
    for p, value in us.items():
        print(f"  {p:14s} {value:8.1f} us per launch")


if __name__ == "__main__":
    main()
