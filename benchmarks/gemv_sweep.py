"""Every decode GEMV candidate at Qwen3-4B's projections, timed as gemv_decode.py times (a graph of CHAIN launches
rotating over weight copies that outgrow L2; torch cuBLAS and the device-to-device copy bandwidth in the same run),
so the autotuner's candidate lists can be pruned on evidence. Writes ``benchmarks/results/gemv_sweep.json`` and
prints, per shape, the configs sorted by fraction of copy bandwidth.

    python benchmarks/gemv_sweep.py                  # the GPU sweep (about 5-7 minutes on an H100, cold caches)
    python benchmarks/gemv_sweep.py --smoke          # the CPU interpreter at tiny sizes: checks the script (its
                                                     # JSON goes to the temp dir, not results/)
    options: --budget=SECONDS (420: no config starts after it, counted from the start; the compile phase gets at
             most --compile_budget=SECONDS, 240, its workers killed after it), --workers=N (compile
             processes, default min(8, cores / 2); 0: compile while timing), --shapes=qkv,o --ms=1,16 --extra,
             --forms=1,2,3 (0: the skinny persistent tiles and their split-K; default all)

Compiling is what takes the time (tileiras, several seconds a config), so the GPU run first compiles every
(shape, config) in ``--workers`` processes into tile's disk cache (``TILE_CACHE_DIR``, shared), each on its share of
the list, then times them in this process from the cache. The timing phase goes round-robin over the shapes, so a
run cut short by ``--budget`` still covers every shape; what was not timed is listed as skipped. ``--extra`` adds
configs the tuner does not time (gemv_wx at every width and BK 64 or 512; gemv_mma at BK 64) to explore with.
Each config's output is checked against cuBLAS once (``wrong`` in the table: more than 2e-2 of the output's range).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.kernels import _gemm_configs, autotune

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemv_decode  # type: ignore[import-not-found]  # beside this script

RESULTS = Path(__file__).resolve().parent / "results" / "gemv_sweep.json"
ARGS = {a[2:].partition("=")[0]: a.partition("=")[2] or "1" for a in sys.argv[1:] if a.startswith("--")}
SMOKE = "smoke" in ARGS
CHAIN, ROUNDS = (2, 1) if SMOKE else (50, 7)
Job = tuple[str, int, autotune.Config]  # (projection, M, config)


def shapes() -> dict[str, tuple[int, int]]:
    """(N, K) of each projection swept (lm_head left out: it is at copy bandwidth already)."""
    found = {"qkv": (96, 300), "o": (40, 520)} if SMOKE else dict(gemv_decode.projections("4b", False))
    found.pop("lm_head", None)
    wanted = ARGS.get("shapes")
    return {name: nk for name, nk in found.items() if wanted is None or name in wanted.split(",")}


def extra(m: int, n: int, blocks: int) -> list[autotune.Config]:
    """Configs beyond the tuner's candidates (``--extra``): gemv_wx at every width that fills the SMs, BK 64 and 512;
    gemv_mma at BK 64 at its two narrowest widths."""
    base = {"GROUP": 1, "SPLIT": 1, "LAT": 3, "TMA": 1, "OCC": 0}
    found = [
        autotune.Config.of(**(base | {"FORM": 3, "BM": 8 if m <= 8 else 16, "BN": bn, "BK": bk}))
        for bn in (16, 32, 64, 128)
        if -(-n // bn) >= blocks
        for bk in (64, 512)
    ]
    widths = [bn for bn in (8, 16) if -(-n // bn) >= blocks]
    found += [autotune.Config.of(**(base | {"FORM": 1, "BM": 16, "BN": bn, "BK": 64, "LAT": 6})) for bn in widths]
    return found


def jobs() -> list[Job]:
    """Every (projection, M, config) to time, round-robin over the shapes (each shape's list interleaves forms)."""
    per_shape: list[list[Job]] = []
    for name, (n, _) in shapes().items():
        for m in (int(v) for v in ARGS.get("ms", "1,16").split(",")):
            configs = list(_gemm_configs.decode_candidates(m, n))
            if "extra" in ARGS:
                configs += [c for c in extra(m, n, _gemm_configs.persistent_blocks()) if c not in configs]
            forms = {int(f) for f in ARGS.get("forms", "0,1,2,3").split(",")}
            configs = [c for c in configs if c.as_dict().get("FORM", 0) in forms]
            kinds: dict[tuple[int, bool], list[autotune.Config]] = {}  # (FORM, split): interleaved, 2 each in smoke
            for c in configs:
                kinds.setdefault((c.as_dict().get("FORM", 0), c["SPLIT"] > 1), []).append(c)
            mixed = [c for group in _zip_longest(list(kinds.values())) for c in group]
            per_shape.append([(name, m, c) for c in (mixed[: 2 * len(kinds)] if SMOKE else mixed)])
    return [job for group in _zip_longest(per_shape) for job in group]


def _zip_longest(lists: list[list[Any]]) -> list[list[Any]]:
    """Round i holds the i-th item of every list that has one."""
    return [[items[i] for items in lists if i < len(items)] for i in range(max(map(len, lists), default=0))]


class Shape:
    """One projection at one M: weight copies beyond L2, the activation, and the reference output."""

    def __init__(self, torch: Any, m: int, n: int, k: int, *, rotate: bool = True) -> None:
        self.m, self.n, self.k = m, n, k
        copies = max(1, min(CHAIN, -(-gemv_decode.L2_SPAN // (2 * n * k)))) if rotate else 1
        if torch is None:
            rng = np.random.default_rng(0)
            self.ws = [tile.from_numpy(rng.standard_normal((n, k)).astype(np.float32)) for _ in range(copies)]
            x = rng.standard_normal((m, k)).astype(np.float32)
            self.x, self.tws, self.tx = tile.from_numpy(x), [], None
            self.want = x.astype(np.float64) @ self.ws[0].to_numpy().astype(np.float64).T
        else:
            self.tws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5 for _ in range(copies)]
            self.tx = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            self.ws, self.x = [tile.from_dlpack(w) for w in self.tws], tile.from_dlpack(self.tx)
            self.want = (self.tx @ self.tws[0].T).float().cpu().numpy()

    def error(self, config: autotune.Config) -> float:
        """Largest difference from the reference, relative to the output's largest magnitude."""
        got = tk.matmul(self.x, self.ws[0].T, config=config)
        diff = np.abs(got.to_numpy().astype(np.float64) - self.want).max()
        return float(diff / max(float(np.abs(self.want).max()), 1e-30))

    def graph(self, config: autotune.Config) -> Callable[[], None]:
        """One replay (and its wait) of CHAIN launches rotating over the weight copies."""
        return gemv_decode.tile_graph(self.x, self.ws, CHAIN, config=config)


def _torch() -> Any:
    if tile.backend() != "gpu":
        return None
    import torch

    return torch


def compile_share(worker: int, workers: int) -> None:
    """A compile worker: run each of its share of the jobs once (compiling it into the disk cache), errors ignored."""
    torch, made = _torch(), dict[tuple[str, int], Shape]()
    all_shapes = shapes()
    for i, (name, m, config) in enumerate(jobs()):
        if i % workers != worker:
            continue
        n, k = all_shapes[name]
        shape = made.get((name, m)) or made.setdefault((name, m), Shape(torch, m, n, k, rotate=False))
        try:
            tk.matmul(shape.x, shape.ws[0].T, config=config)
        except tile.TileError as exc:
            print(f"worker {worker}: {name} M={m} {config}: {type(exc).__name__}", flush=True)


def precompile(workers: int, deadline: float) -> None:
    """Compile every job in ``workers`` processes (each on its share), killing any still running at ``deadline``."""
    argv = [a for a in sys.argv[1:] if not a.startswith("--workers")]
    procs = [subprocess.Popen([sys.executable, __file__, *argv, f"--worker={i},{workers}"]) for i in range(workers)]
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()  # this run started it; what it compiled so far stays in the cache
            proc.wait()


def measure(torch: Any, budget: float) -> dict[str, Any]:
    """Time torch once per shape and every job until ``budget`` seconds have passed; the report as a dict."""
    start = time.monotonic()
    copy = gemv_decode.copy_bandwidth(torch, ROUNDS) if torch is not None else 0.0
    all_shapes, made, report = shapes(), dict[str, Shape](), dict[str, dict[str, Any]]()
    todo = jobs()
    skipped = []
    for i, (name, m, config) in enumerate(todo):
        n, k = all_shapes[name]
        key = f"{name}_m{m}"
        if key not in made:
            made[key] = Shape(torch, m, n, k)
            report[key] = {"shape": [m, n, k], "weight_bytes": 2 * n * k, "configs": []}
            if torch is not None:
                run = gemv_decode.torch_graph(torch, made[key].tx, made[key].tws, False, CHAIN)
                report[key]["torch_us"] = gemv_decode.median_seconds(run, ROUNDS) / CHAIN * 1e6
        if time.monotonic() - start > budget:
            skipped.append(f"{key} {config}")
            continue
        entry: dict[str, Any] = {"config": str(config), "form": config.as_dict().get("FORM", 0)}
        try:
            error = made[key].error(config)
            entry["error"] = error
            entry["us"] = gemv_decode.median_seconds(made[key].graph(config), ROUNDS) / CHAIN * 1e6
        except tile.TileError as exc:
            entry["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        report[key]["configs"].append(entry)
        print(
            f"[{i + 1}/{len(todo)} {time.monotonic() - start:5.0f}s] {key} {_row(entry, report[key], copy)}", flush=True
        )
    return {"copy_GB_per_s": copy / 1e9, "shapes": report, "skipped": skipped, "timing_s": time.monotonic() - start}


def _fraction(us: float, shape: dict[str, Any], copy: float) -> float:
    return float(shape["weight_bytes"] / (us * 1e-6) / copy) if copy else 0.0


def _row(entry: dict[str, Any], shape: dict[str, Any], copy: float) -> str:
    if "failed" in entry:
        return f"{'failed':>8} {entry['config']}  {entry['failed']}"
    flag = "  WRONG" if entry["error"] > 2e-2 else ""
    return f"{entry['us']:8.2f} us {_fraction(entry['us'], shape, copy):5.2f} {entry['config']}{flag}"


def table(report: dict[str, Any]) -> None:
    """Each shape's configs, fastest first, with torch's line among them."""
    copy = report["copy_GB_per_s"] * 1e9
    for key, shape in report["shapes"].items():
        timed = sorted((e for e in shape["configs"] if "us" in e), key=lambda e: e["us"])
        for entry in timed:
            entry["fraction_of_copy_bandwidth"] = _fraction(entry["us"], shape, copy)
        peer = f"copy {report['copy_GB_per_s']:.0f} GB/s" if copy else "no copy peer: fractions are 0"
        print(f"\n{key} (M, N, K = {shape['shape']}), {peer}:")
        if "torch_us" in shape:
            shape["torch_fraction"] = _fraction(shape["torch_us"], shape, copy)
            print(f"  torch    {shape['torch_us']:8.2f} us {shape['torch_fraction']:5.2f}")
        for entry in [*timed, *(e for e in shape["configs"] if "us" not in e)]:
            print(f"  {_row(entry, shape, copy)}")
        shape["configs"] = [*timed, *(e for e in shape["configs"] if "us" not in e)]


def main() -> None:
    if "worker" in ARGS:
        worker, workers = map(int, ARGS["worker"].split(","))
        compile_share(worker, workers)
        return
    torch = _torch()
    begun = time.monotonic()
    workers = int(ARGS.get("workers", min(8, (os.cpu_count() or 2) // 2)))
    if workers > 0 and (torch is not None or "workers" in ARGS):  # on the interpreter only if asked (a smoke test)
        print(f"compiling {len(jobs())} configs in {workers} processes", flush=True)
        precompile(workers, begun + float(ARGS.get("compile_budget", 240)))
        print(f"compiled in {time.monotonic() - begun:.0f}s", flush=True)
    report = measure(torch, float(ARGS.get("budget", 420)) - (time.monotonic() - begun))
    table(report)
    report |= {"device": "CPU interpreter" if torch is None else torch.cuda.get_device_name(), "smoke": SMOKE}
    report |= {"chain": CHAIN, "rounds": ROUNDS, "total_s": time.monotonic() - begun}
    out = Path(tempfile.gettempdir()) / "gemv_sweep_smoke.json" if SMOKE else RESULTS  # a smoke run keeps results
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    bad = [f"{key} {e['config']}" for key, v in report["shapes"].items() for e in v["configs"] if _bad(e)]
    print(f"\n{len(report['skipped'])} skipped (budget), {len(bad)} wrong or failed; wrote {out}")
    if bad:
        raise SystemExit("wrong or failed: " + "; ".join(bad))


def _bad(entry: dict[str, Any]) -> bool:
    return "failed" in entry or entry["error"] > 2e-2


if __name__ == "__main__":
    main()
