# ruff: noqa: F821, N803, UP037
# Kernel-language source: shape strings such as "B" are const generics the compiler binds (undefined for Python),
# and uppercase names follow cuTile's convention; keep the strings quoted.
"""tile.frontend against cuTile Python and torch, in one process on one GPU.

1. ``add`` f32 on 2^28 elements: GB/s (three 4-byte streams per element).
2. GEMM f16 and bf16 at 8192^3 (f32 accumulation, output in the input dtype): TFLOP/s. ``tile`` and cuTile Python
   use the same kernel (128 x 128 x 64 tiles, one block per output tile, row-major order); ``tile persistent grouped
   4`` is Tile's fast configuration: the same K loop in a persistent kernel (one block per SM, occupancy 1) walking
   the output tiles in grouped (L2-friendly) order through ``z.tiles(group=4)``, as cuBLAS does. cuBLAS via torch.
3. Host time per safe launch of a small kernel (1024 elements): Tile's ownership-checked ``add(z, x, y).sync_on(s)``
   against ``ct.launch(...); s.synchronize()`` (both wait for the kernel each time), and Tile's back-to-back
   enqueue cost (a ``.then`` chain: checks, move and launch per step) against back-to-back ``ct.launch``; the four
   measurements' rounds interleave, and ``launch_tile_vs_ct`` gives Tile's time over cuTile Python's. For context, the
   same rounds time the launch-bound path Tile offers: a captured graph of GRAPH_LAUNCHES chained launches (checked
   once, at capture), replayed and waited for, per launch. Both Tile launch paths are timed in the same rounds: the
   compiled one (``tile.frontend._fastlaunch``, under the plain names) and the pure-Python fallback (names ending in
   ``[pure-Python path]``), switched in-process.

Each measurement is the median of ROUNDS rounds of REPS back-to-back runs waited for once (Tile's through a
``.then`` chain); GEMM rounds interleave the contenders, so GPU clock drift affects them alike (it moved cuBLAS by
15% within one run); ``tile (sync each launch)`` also waits after every launch
(``sync_on``), which adds the host's round trip to each run. Every result is checked against numpy (float64) first.
Results go to ``benchmarks/results/frontend.json`` with the device name and versions. Run on the GPU machine from the
repository root: ``python benchmarks/bench_frontend.py``; ``--smoke`` runs tiny sizes on whatever backend is available
(the CPU interpreter here) to check the script itself; ``--launch-only`` runs only measurement 3 and writes
``frontend_launch.json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, bf16, f16, f32
from tile.kernels.bench import device_name, round_orders, versions  # shared with library users

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "frontend.json"
SMOKE = "--smoke" in sys.argv
LAUNCH_ONLY = "--launch-only" in sys.argv  # only the host-time-per-launch measurement (no 2^28 add, no GEMMs)
ADD_N = 1 << (12 if SMOKE else 28)
GEMM = 128 if SMOKE else 8192
TM, TN, TK = (32, 32, 32) if SMOKE else (128, 128, 64)
GROUP = 2 if SMOKE else 4  # rows of output tiles per group in gemm_grouped's tile order
SMALL_N, SMALL_TILE = 1024, 128
ROUNDS, REPS = (3, 2) if SMOKE else (7, 10)
LAUNCHES = 20 if SMOKE else 2000
GRAPH_LAUNCHES = 100  # launches per captured graph in the replay measurement


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry
def gemm(z: Mut[Tensor["T", ("BM", "BN")]], x: Tensor["T", (-1, -1)], y: Tensor["T", (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc.astype(z.dtype))


@tile.entry
def gemm_grouped(
    z: Mut[Tensor["T", ("BM", "BN")]],
    x: Tensor["T", (-1, -1)],
    y: Tensor["T", (-1, -1)],
    BK: Const[int],
    GROUP: Const[int],
):
    # The same K loop over output tiles in grouped order: consecutive blocks walk GROUP rows of tiles before moving
    # right, so the blocks running together share input tiles in L2 (cuBLAS orders its tiles likewise).
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    for idx in z.tiles(group=GROUP):
        m, n = idx
        acc = tile.zeros((BM, BN), f32)
        for k in range(px.num_tiles[1]):
            acc = tile.mma(px.load((m, k)), py.load((k, n)), acc)
        z.store(acc.astype(z.dtype), at=idx)


# The fast configuration: gemm_grouped launched persistently (one block per SM, each walking output tiles in grouped
# order), at occupancy 1 so each block gets a whole SM's registers and shared memory for its pipeline.
PERSISTENT = tile.entry(occupancy=1)(gemm_grouped.fn)
PERSISTENT_LABEL = f"tile persistent grouped {GROUP}"


def median_seconds(run: Callable[[], None], finish: Callable[[], None]) -> float:
    """Median over ROUNDS of the wall time of REPS back-to-back runs (drained at the end), per run."""
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(REPS):
            run()
        finish()
        samples.append((time.perf_counter() - start) / REPS)
    return statistics.median(samples)


class TileLoop:
    """Keeps a launch's arguments across repetitions: each run moves them in and takes them back."""

    def __init__(self, kernel: Any, args: list[Any], stream: Any, **generics: int) -> None:
        self.kernel, self.args, self.stream, self.generics = kernel, args, stream, generics
        self.n = len(args)

    def run(self) -> None:
        self.args = list(self.kernel(*self.args, **self.generics).sync_on(self.stream))[: self.n]

    def chain(self, n: int) -> None:
        """Enqueue ``n`` launches back to back (each made by the previous one's ``then``), wait once."""
        op = self.kernel(*self.args, **self.generics)
        for _ in range(n - 1):
            op = op.then(lambda out: self.kernel(*out[: self.n], **self.generics))
        self.args = list(op.sync_on(self.stream))[: self.n]

    def split(self, n: int) -> tuple[float, float, float]:
        """A chain of ``n`` launches in three parts, seconds per launch: building it (the ``.then`` calls), running it
        (the launches enqueued, and the wait) and releasing it (the hand-back, after the wait). In a chain of kernels
        longer than the host's launch work, the build and the release are time the device sits idle."""
        from tile.aio._combinators import Then

        released = [0]
        release = Then._release

        def timed_release(op: Any) -> None:
            t = time.perf_counter_ns()
            release(op)
            released[0] += time.perf_counter_ns() - t

        t0 = time.perf_counter_ns()
        op = self.kernel(*self.args, **self.generics)
        for _ in range(n - 1):
            op = op.then(lambda out: self.kernel(*out[: self.n], **self.generics))
        t1 = time.perf_counter_ns()
        Then._release = timed_release  # type: ignore[method-assign]
        try:
            self.args = list(op.sync_on(self.stream))[: self.n]
        finally:
            Then._release = release  # type: ignore[method-assign]
        t2 = time.perf_counter_ns()
        return (t1 - t0) / n / 1e9, (t2 - t1 - released[0]) / n / 1e9, released[0] / n / 1e9

    def seconds(self) -> float:
        """Median per-launch time of REPS back-to-back launches waited for once, as cuTile and torch are timed."""
        self.chain(REPS)
        samples = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            self.chain(REPS)
            samples.append((time.perf_counter() - start) / REPS)
        return statistics.median(samples)


def tile_stream() -> Any:
    if tile.backend() == "cpu":
        from tile.aio import HostStream

        return HostStream()
    import tile.core as tc

    return tc.Device(0).create_stream()


def bench_add(stream: Any, peers: dict[str, Any], out: dict[str, Any]) -> None:
    x, y = tile.rand(f32, [ADD_N]), tile.rand(f32, [ADD_N])
    ref = x.to_numpy().astype(np.float64) + y.to_numpy()
    loop = TileLoop(add, [tile.full(f32, [ADD_N], np.nan).partition([1024]), x, y], stream)
    loop.run()
    np.testing.assert_allclose(loop.args[0].unpartition().to_numpy(), ref, rtol=1e-6)
    loop.args[0] = tile.empty(f32, [ADD_N]).partition([1024])
    results = {"tile": loop.seconds(), "tile (sync each launch)": median_seconds(loop.run, lambda: None)}
    results |= peer_add(peers)
    out["add_f32"] = {
        "elements": ADD_N,
        "ms": {k: v * 1e3 for k, v in results.items()},
        "GB_per_s": {k: 12 * ADD_N / v / 1e9 for k, v in results.items()},
        "tile_vs": {k: results[k] / results["tile"] for k in results if k != "tile"},
    }


class Operands:
    """Where cuTile Python's operands live: torch tensors when torch is installed, else Tile's own GPU tensors
    (cuTile Python reads both through DLPack), with a stream to launch on and a way to read results back."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        if torch is not None:
            self.stream = torch.cuda.current_stream()
        else:
            import tile.core as tc

            self.stream = tc.Device(0).create_stream()

    def randn(self, shape: tuple[int, ...], dtype: Any) -> Any:
        if self.torch is None:
            return tile.randn(dtype, list(shape))
        tdt = {"f32": self.torch.float32, "f16": self.torch.float16, "bf16": self.torch.bfloat16}[dtype.name]
        return self.torch.randn(*shape, device="cuda", dtype=tdt)

    def numpy(self, array: Any) -> np.ndarray[Any, Any]:
        if self.torch is None:
            return np.asarray(array.to_numpy(), np.float64)
        return np.asarray(array.float().cpu().numpy(), np.float64)


def peer_add(peers: dict[str, Any]) -> dict[str, float]:
    torch, ct, found = peers.get("torch"), peers.get("ct"), {}
    if torch is not None:
        x, y = torch.rand(ADD_N, device="cuda"), torch.rand(ADD_N, device="cuda")
        z, stream = torch.empty_like(x), torch.cuda.current_stream()
        found["torch"] = median_seconds(lambda: torch.add(x, y, out=z), stream.synchronize)
    if ct is not None:
        ops = Operands(torch)
        x, y, z = (ops.randn((ADD_N,), f32) for _ in range(3))
        kernel, grid, stream = peers["ct_add"], (ADD_N // 1024, 1, 1), ops.stream
        ct.launch(stream, grid, kernel, (x, y, z, 1024))
        stream.synchronize()
        np.testing.assert_allclose(ops.numpy(z), ops.numpy(x) + ops.numpy(y), rtol=1e-6)
        found["cutile_python"] = median_seconds(
            lambda: ct.launch(stream, grid, kernel, (x, y, z, 1024)), stream.synchronize
        )
    return found


def bench_gemm(stream: Any, peers: dict[str, Any], dtype: Any, out: dict[str, Any]) -> None:
    """Tile's plain and persistent GEMMs, cuBLAS (torch) and cuTile Python, timed in interleaved rounds."""
    plain = TileLoop(gemm, gemm_operands(dtype), stream, BK=TK)
    persistent = TileLoop(PERSISTENT.grid((sm_count(),)), gemm_operands(dtype), stream, BK=TK, GROUP=GROUP)
    for loop in (plain, persistent):
        check_gemm(loop)
    contenders = {"tile": lambda: plain.chain(REPS), PERSISTENT_LABEL: lambda: persistent.chain(REPS)}
    contenders |= peer_gemm(peers, dtype)
    results = interleaved({name: (run, REPS, 1) for name, run in contenders.items()}, warmup=1)
    flops = 2 * GEMM**3
    out[f"gemm_{dtype.name}"] = {
        "mnk": GEMM,
        "tiles": [TM, TN, TK],
        "persistent": {"grid": sm_count(), "group": GROUP, "occupancy": 1},
        "ms": {k: v * 1e3 for k, v in results.items()},
        "TFLOP_per_s": {k: flops / v / 1e12 for k, v in results.items()},
        "tile_vs": {k: results[k] / results["tile"] for k in results if k != "tile"},
        "persistent_vs": {k: results[k] / results[PERSISTENT_LABEL] for k in results if k != PERSISTENT_LABEL},
    }


def gemm_operands(dtype: Any) -> list[Any]:
    """A NaN-poisoned output partition and two random inputs."""
    z = tile.full(dtype, [GEMM, GEMM], np.nan).partition([TM, TN])
    return [z, tile.randn(dtype, [GEMM, GEMM]), tile.randn(dtype, [GEMM, GEMM])]


def check_gemm(loop: TileLoop) -> None:
    """One run, checked on the output's first and last corners against float64 numpy."""
    loop.run()
    z, x, y = loop.args
    got = z.unpartition()
    out, xs, ys = got.to_numpy(), x.to_numpy(), y.to_numpy()
    c = min(GEMM, 256)  # the whole product in float64 is too slow on the host
    for rows, cols in ((slice(0, c), slice(0, c)), (slice(-c, None), slice(-c, None))):
        want = xs[rows].astype(np.float64) @ ys[:, cols].astype(np.float64)
        np.testing.assert_allclose(out[rows, cols].astype(np.float64), want, rtol=2e-2, atol=2e-1)
    loop.args[0] = got.partition([TM, TN])


def sm_count() -> int:
    """The persistent GEMM's grid: one block per SM (4 on the CPU interpreter)."""
    if tile.backend() != "gpu":
        return 4
    import tile.core as tc

    return tc.Device(0).sm_count


def peer_gemm(peers: dict[str, Any], dtype: Any) -> dict[str, Callable[[], None]]:
    """cuBLAS through torch and cuTile Python on the same sizes, checked, as callables running REPS and waiting."""
    torch, ct, found = peers.get("torch"), peers.get("ct"), {}
    if torch is not None:
        tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype.name]
        a, b = (torch.randn(GEMM, GEMM, device="cuda", dtype=tdt) for _ in range(2))
        c, stream = torch.empty(GEMM, GEMM, device="cuda", dtype=tdt), torch.cuda.current_stream()

        def torch_run() -> None:
            for _ in range(REPS):
                torch.matmul(a, b, out=c)
            stream.synchronize()

        found["torch"] = torch_run
    if ct is not None:
        ops = Operands(torch)
        ca, cb, cc = (ops.randn((GEMM, GEMM), dtype) for _ in range(3))
        kernel, grid, cstream = peers["ct_gemm"], (GEMM // TM, GEMM // TN, 1), ops.stream
        ct.launch(cstream, grid, kernel, (ca, cb, cc, TM, TN, TK))
        cstream.synchronize()
        corner = ops.numpy(ca)[:256] @ ops.numpy(cb)[:, :256]
        np.testing.assert_allclose(ops.numpy(cc)[:256, :256], corner, rtol=2e-2, atol=2e-1)

        def ct_run() -> None:
            for _ in range(REPS):
                ct.launch(cstream, grid, kernel, (ca, cb, cc, TM, TN, TK))
            cstream.synchronize()

        found["cutile_python"] = ct_run
    return found


def bench_launch(stream: Any, peers: dict[str, Any], out: dict[str, Any]) -> None:
    loop = TileLoop(
        add,
        [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])],
        stream,
    )
    paths: dict[str, tuple[Callable[[], None], int]] = {}
    for path, label in launch_paths():  # the active (compiled) path under the plain names, then the pure one
        paths[f"tile add(...).sync_on(s){label}"] = (on_path(path, loop.run, SYNC_REPS), SYNC_REPS)
        paths[f"tile .then chain (enqueue){label}"] = (on_path(path, lambda: loop.chain(LAUNCHES)), LAUNCHES)
    graph = replayed_chain(stream)
    if graph is not None:
        paths["tile graph replay (per launch)"] = (lambda: graph.launch().sync_on(stream), GRAPH_LAUNCHES)
    ct = peers.get("ct")
    if ct is not None:
        ops = Operands(peers.get("torch"))
        x, y, z = (ops.randn((SMALL_N,), f32) for _ in range(3))
        s = ops.stream
        kernel, grid = peers["ct_add"], (SMALL_N // SMALL_TILE, 1, 1)

        def ct_sync() -> None:
            ct.launch(s, grid, kernel, (x, y, z, SMALL_TILE))
            s.synchronize()

        def ct_burst() -> None:
            for _ in range(LAUNCHES):
                ct.launch(s, grid, kernel, (x, y, z, SMALL_TILE))
            s.synchronize()

        paths |= {"ct.launch + synchronize": (ct_sync, 1), "ct.launch back to back": (ct_burst, LAUNCHES)}
    results = interleaved(
        {name: (run, launches, max(LAUNCHES // launches, 1)) for name, (run, launches) in paths.items()}, warmup=20
    )
    out["launch_us"] = {k: v * 1e6 for k, v in results.items()}
    if graph is not None:
        graph.close()
        z, *_ = graph.output
        np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(SMALL_N, 2, np.float32))
    if ct is not None:
        out["launch_tile_vs_ct"] = {
            "sync each launch": results["tile add(...).sync_on(s)"] / results["ct.launch + synchronize"],
            "back to back": results["tile .then chain (enqueue)"] / results["ct.launch back to back"],
        }
        if "tile .then chain (enqueue)" + PURE_LABEL in results:
            out["launch_tile_vs_ct"] |= {
                "sync each launch, pure-Python path": results["tile add(...).sync_on(s)" + PURE_LABEL]
                / results["ct.launch + synchronize"],
                "back to back, pure-Python path": results["tile .then chain (enqueue)" + PURE_LABEL]
                / results["ct.launch back to back"],
            }
        if graph is not None:
            out["launch_tile_vs_ct"]["graph replay vs back to back"] = (
                results["tile graph replay (per launch)"] / results["ct.launch back to back"]
            )


PURE_LABEL = " [pure-Python path]"
SYNC_REPS = 2 if SMOKE else 50  # launches per sync_on sample: switching the launch path costs nothing measurable


def launch_paths() -> list[tuple[str, str]]:
    """The launch paths to time, with the label their measurements carry: the active one (the compiled path when the
    extension is built, see tile.frontend._accel) under the plain names, then the pure-Python path if it is not the
    active one."""
    from tile.frontend import _accel

    active = _accel.active()
    return [(active, "")] + ([("pure", PURE_LABEL)] if active != "pure" else [])


def on_path(path: str, run: Callable[[], None], repeat: int = 1) -> Callable[[], None]:
    """``run`` (``repeat`` times) on the launch path ``path``, switched in-process before each sample."""
    from tile.frontend import _accel

    def go() -> None:
        _accel.use(path)
        for _ in range(repeat):
            run()

    return go


def replayed_chain(stream: Any) -> Any:
    """A graph of GRAPH_LAUNCHES chained ``add`` launches (checked, moved and captured once): the launch-bound path
    Tile offers, replayed as one unit; None on the CPU, whose host graphs run the interpreter."""
    if tile.backend() == "cpu":
        return None
    args = [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])]
    op = add(*args)
    for _ in range(GRAPH_LAUNCHES - 1):
        op = op.then(lambda out: add(*out))
    return op.graph(stream)


def interleaved(
    paths: dict[str, tuple[Callable[[], None], int, int]],
    warmup: int,
    *,
    rounds: int | None = None,
    order: str = "fixed",
    seed: int = 0,
    settle: int = 0,
) -> dict[str, float]:
    """Median seconds per unit of each path ``(run, units one run does, runs per sample)`` over ``rounds`` (default
    ROUNDS) samples, after ``warmup`` runs (compilation, plans, prepared launches, allocator pools); the paths'
    samples interleave, so drift of the GPU or the host during the benchmark (cuBLAS moved 15% within one run) hits
    all alike. Each round visits the paths in ``round_orders(len(paths), rounds, order, seed)``'s order, and runs each
    path ``settle`` times untimed just before its timed sample (the GPU then times the path from its own steady
    state, not from what the previous path left: clocks, caches)."""
    for run, _, _ in paths.values():
        for _ in range(warmup):
            run()
    names = list(paths)
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for visit in round_orders(len(names), ROUNDS if rounds is None else rounds, order, seed):
        for name in (names[i] for i in visit):
            run, units, calls = paths[name]
            for _ in range(settle):
                run()
            start = time.perf_counter()
            for _ in range(calls):
                run()
            samples[name].append((time.perf_counter() - start) / (calls * units))
    return {name: statistics.median(values) for name, values in samples.items()}


def load_peers(errors: dict[str, str]) -> dict[str, Any]:
    peers: dict[str, Any] = {}
    if tile.backend() != "gpu":
        errors["peers"] = "no GPU: cuTile Python and torch are not run"
        return peers
    try:
        import torch

        peers["torch"] = torch
    except ImportError as exc:
        errors["torch"] = f"{exc} (cuTile Python then reads Tile's own GPU tensors)"
    try:
        import cuda.tile as ct
        from cutile_peers import ct_add, ct_gemm
    except ImportError as exc:
        errors["cutile_python"] = str(exc)
        return peers

    peers |= {"ct": ct, "ct_add": ct_add, "ct_gemm": ct_gemm}
    return peers


def main() -> None:
    errors: dict[str, str] = {}
    peers = load_peers(errors)
    stream = tile_stream()
    report: dict[str, Any] = {"benchmark": "frontend", "device": device_name(), "backend": tile.backend()}
    report |= {"smoke": SMOKE, "versions": versions(), "rounds": ROUNDS, "reps": REPS}
    steps: list[tuple[str, Callable[[], None]]] = [
        ("add_f32", lambda: bench_add(stream, peers, report)),
        ("gemm_f16", lambda: bench_gemm(stream, peers, f16, report)),
        ("gemm_bf16", lambda: bench_gemm(stream, peers, bf16, report)),
        ("launch", lambda: bench_launch(stream, peers, report)),
    ]
    if LAUNCH_ONLY:
        steps = steps[-1:]
    for name, step in steps:
        try:
            step()
        except Exception as exc:  # one failing measurement must not cost the others
            errors[name] = f"{type(exc).__name__}: {exc}"
        print(f"{name}: {json.dumps(report.get(name if name != 'launch' else 'launch_us'), indent=None)}")
    if "launch_tile_vs_ct" in report:
        print(f"launch, Tile / cuTile Python: {json.dumps(report['launch_tile_vs_ct'])}")
    report["errors"] = errors
    for name, error in errors.items():
        print(f"  {name}: {error}")
    if not SMOKE:
        path = RESULTS.with_name("frontend_launch.json") if LAUNCH_ONLY else RESULTS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
