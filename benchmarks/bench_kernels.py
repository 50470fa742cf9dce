"""tile.kernels against torch (cuBLAS, torch.nn.functional) in one process on one GPU, with ratios.

Every contender is checked against the others first (the same inputs, shared through DLPack), then timed in
interleaved rounds (median of ROUNDS samples, each REPS calls): a Tile call waits for its work, so torch's calls are
timed waiting for theirs too (``torch.cuda.synchronize()`` after each), which puts the same host round trip in both.
Outputs are reused across calls (``out=``), so no allocation is timed.

1. ``matmul`` f16 / bf16: squares 4096^3 and 8192^3; the Qwen3-4B (hidden 2560, MLP 9728) and Qwen3-32B (5120,
   25600) MLP projections with M in {1, 16, 128, 2048}, weights stored (K, N). Contenders: Tile tuned (the autotuner's
   choice; the first call tunes and prints), Tile's untuned default config, ``torch.matmul``. TFLOP/s.
2. Fused epilogue: ``matmul(a, b, bias=, activation="silu")`` against ``F.silu(torch.addmm(bias, a, b))``.
3. Decode GEMM (``gemv``): every Qwen3-4B and -32B projection (fused q/k/v, o, fused gate/up, down, lm_head with
   f32 logits) at M in {1, 16}, bf16 weights in a Linear layer's (N, K) layout: Tile against cuBLAS ``x @ w.T``, GB/s
   of weight read and the fraction of the device-to-device copy bandwidth measured in the same run; launches timed
   back to back in a graph over weight copies that outgrow L2 (see gemv_decode.py). ``--only=gemv-4b`` or
   ``--only=gemv-32b`` runs one model.
4. ``bmm`` f16, 32 x 512 x 512 x 128 (attention-sized) against ``torch.bmm``.
5. Row kernels (``bench_rows.py``): softmax, log_softmax, rmsnorm, layernorm, add_rmsnorm, rmsnorm_heads on 4096
   rows of 1024 ... 32768, f16 / bf16, against torch and Triton's one-program-per-row kernels (``triton_rows.py``,
   skipped with a note if ``import triton`` fails), each timed as CHAIN launches replayed from a captured graph, so
   the kernels are compared, not the host's launch paths. GB/s. ``--only=rows_knobs``: the knob study (rows per
   block, chunk width, warps, occupancy, latency) of softmax and rmsnorm, f16.
6. Attention (``--only=attn``, or ``attn_prefill`` / ``attn_decode`` for one half; in ``bench_kernels_attn.py``):
   FMHA prefill against torch SDPA and cuTile Python's FMHA sample (causal and not, d64/d128, sequences 1k-8k, and
   a GQA case), decode attention against SDPA at batch 1 and 8 over KV lengths 1k-32k (waiting calls and
   back-to-back chains).

Results go to ``benchmarks/results/kernels.json`` with the device name and versions; ``tile_vs`` gives Tile's time
over each peer's (below 1: Tile is faster). Run on the GPU machine from the repository root:
``python benchmarks/bench_kernels.py``; ``--smoke`` runs tiny sizes on whatever backend is available (the CPU
interpreter here, without peers) to check the script itself; ``--only=matmul,epilogue,gemv,bmm,rows,rows_knobs,attn``
(``attn_prefill``, ``attn_decode``) picks measurements and merges them into an existing ``kernels.json`` (the first
run tunes every key, and each tuned config compiles once, so a full run can outlast a 10-minute limit: run it in
parts). ``tuned`` in the JSON lists every
config the autotuner chose. ``--match=TEXT,...`` runs only the measurements whose name contains one of the TEXTs
(``--only=rows --match=rmsnorm_f16,rmsnorm_bf16``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.kernels import _gemm_configs
from tile.kernels.bench import device_name, versions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_rows  # the row kernels' measurements (and triton_rows, their Triton peer)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemv_decode  # type: ignore[import-not-found]  # beside this script, found through sys.path above

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_kernels_attn import steps as attn_steps  # noqa: E402 - the attention measurements, same directory

RESULTS = ROOT / "benchmarks" / "results" / "kernels.json"
SMOKE = "--smoke" in sys.argv
ONLY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--only=")), "")
MATCH = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--match=")), "").split(",")
ROUNDS, REPS = (2, 1) if SMOKE else (7, 10)
SQUARES = [64] if SMOKE else [4096, 8192]
QWEN = {"qwen3-4b": (2560, 9728), "qwen3-32b": (5120, 25600)}
MS = [1, 16] if SMOKE else [1, 16, 128, 2048]
ROW_LENGTHS = [64, 96] if SMOKE else [1024, 4096, 8192, 32768]
ROWS = 8 if SMOKE else 4096
CHAIN = 2 if SMOKE else 50  # row-kernel launches per captured graph, replayed and waited for once per sample
Run = Callable[[], None]


def interleaved(paths: dict[str, Run], warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each path over ROUNDS samples of REPS calls, the paths' samples interleaved."""
    for run in paths.values():
        for _ in range(warmup):
            run()
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(ROUNDS):
        for name, run in paths.items():
            start = time.perf_counter()
            for _ in range(REPS):
                run()
            samples[name].append((time.perf_counter() - start) / REPS)
    return {name: statistics.median(v) for name, v in samples.items()}


class Peers:
    """torch on the GPU (None on the interpreter or without torch); tensors made by torch and lent to Tile."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.torch: Any = None
        self.errors = errors
        if tile.backend() != "gpu":  # the interpreter checks the script, not speed: no peers, and that is no error
            print("no GPU: peers are not run")
            return
        try:
            import torch
        except ImportError as exc:
            errors["torch"] = str(exc)
            return
        self.torch = torch

    def randn(self, dtype: Any, shape: tuple[int, ...], scale: float = 1.0) -> tuple[Any, tile.Tensor]:
        """A (torch tensor or None, Tile tensor) pair over the same values (the same memory on the GPU)."""
        if self.torch is None:
            t = tile.from_numpy((np.random.default_rng(0).standard_normal(shape) * scale).astype(np.float32))
            return None, _cast(t, dtype)
        tdt = {"f16": self.torch.float16, "bf16": self.torch.bfloat16, "f32": self.torch.float32}[dtype.name]
        x = self.torch.randn(*shape, device="cuda", dtype=tdt) * scale
        return x, tile.from_dlpack(x)

    def sync(self, fn: Callable[[], object]) -> Run:
        def run() -> None:
            fn()
            self.torch.cuda.synchronize()

        return run


def _cast(t: tile.Tensor, dtype: Any) -> tile.Tensor:
    """``t`` converted to ``dtype`` on the host (interpreter runs only)."""
    import ml_dtypes

    np_dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}[dtype.name]
    return tile.from_numpy(t.to_numpy().astype(np_dtype))


class Reuse:
    """A Tile call whose output is handed back in as ``out=`` on the next call (no allocation timed)."""

    def __init__(self, fn: Callable[..., tile.Tensor]) -> None:
        self.fn, self.out = fn, fn(None)

    def __call__(self) -> None:
        self.out = self.fn(self.out)


def _check(got: tile.Tensor, want: Any, peers: Peers, rtol: float) -> None:
    if want is None:
        return
    g, w = np.asarray(got.to_numpy(), np.float64), want.float().cpu().numpy().astype(np.float64)
    scale = max(float(np.abs(w).max()), 1e-30)
    err = float(np.abs(g - w).max()) / scale
    if err > rtol:
        raise AssertionError(f"Tile and torch differ by {err:.2e} of the output's range (allowed {rtol:.0e})")


def _entry(times: dict[str, float], work: float, unit: str) -> dict[str, Any]:
    return {
        "ms": {k: v * 1e3 for k, v in times.items()},
        unit: {k: work / v / 1e12 if unit == "TFLOP_per_s" else work / v / 1e9 for k, v in times.items()},
        "tile_vs": {k: times["tile"] / v for k, v in times.items() if k != "tile"},
    }


def bench_matmul(peers: Peers, dtype: Any, m: int, n: int, k: int, *, epilogue: bool = False) -> dict[str, Any]:
    ta, a = peers.randn(dtype, (m, k))
    tb, b = peers.randn(dtype, (k, n), scale=k**-0.5)
    tbias, bias = peers.randn(dtype, (n,)) if epilogue else (None, None)
    extra: dict[str, Any] = {"bias": bias, "activation": "silu"} if epilogue else {}
    default = _gemm_configs.default(m, n, k)
    tile_run = Reuse(lambda out: tk.matmul(a, b, out=out, **extra))
    paths: dict[str, Run] = {
        "tile": tile_run,
        "tile default config": Reuse(lambda out: tk.matmul(a, b, out=out, config=default, **extra)),
    }
    torch = peers.torch
    if torch is not None:
        tc = torch.empty(m, n, device="cuda", dtype=ta.dtype)
        if epilogue:
            silu = torch.nn.functional.silu
            paths["torch"] = peers.sync(lambda: silu(torch.addmm(tbias, ta, tb, out=tc), inplace=True))
        else:
            paths["torch"] = peers.sync(lambda: torch.matmul(ta, tb, out=tc))
        paths["torch"]()
        _check(tile_run.out, tc, peers, 2e-2)
    entry = _entry(interleaved(paths), 2.0 * m * n * k, "TFLOP_per_s")
    return entry | {"shape": [m, n, k], "default_config": str(default)}


def bench_gemv(
    peers: Peers, model: str, proj: str, *, mnk: tuple[int, int, int], copy: dict[str, float]
) -> dict[str, Any]:
    """A decode projection (see gemv_decode.py); the copy bandwidth is measured once per run, on first use."""
    if peers.torch is not None and "bytes_per_s" not in copy:
        copy["bytes_per_s"] = gemv_decode.copy_bandwidth(peers.torch, ROUNDS)
    found: dict[str, Any] = gemv_decode.bench(
        peers.torch,
        *mnk,
        f32_out=proj == "lm_head",
        chain=4 if SMOKE else 50,
        rounds=ROUNDS,
        copy=copy.get("bytes_per_s", 0.0),
    )
    return found | {"model": f"qwen3-{model}", "projection": proj}


def bench_bmm(peers: Peers) -> dict[str, Any]:
    batch, m, n, k = (2, 32, 32, 16) if SMOKE else (32, 512, 512, 128)
    ta, a = peers.randn(tile.f16, (batch, m, k))
    tb, b = peers.randn(tile.f16, (batch, k, n), scale=k**-0.5)
    tile_run = Reuse(lambda out: tk.bmm(a, b, out=out))
    paths: dict[str, Run] = {"tile": tile_run}
    if peers.torch is not None:
        tc = peers.torch.empty(batch, m, n, device="cuda", dtype=ta.dtype)
        paths["torch"] = peers.sync(lambda: peers.torch.bmm(ta, tb, out=tc))
        paths["torch"]()
        _check(tile_run.out, tc, peers, 2e-2)
    return _entry(interleaved(paths), 2.0 * batch * m * n * k, "TFLOP_per_s") | {"shape": [batch, m, n, k]}


def steps(peers: Peers) -> list[tuple[str, str, Callable[[], dict[str, Any]]]]:
    found: list[tuple[str, str, Callable[[], dict[str, Any]]]] = []
    for dtype in (tile.f16, tile.bf16):
        for s in SQUARES:
            found.append(("matmul", f"matmul_{dtype.name}_{s}", partial(bench_matmul, peers, dtype, s, s, s)))
        for model, (hidden, mlp) in QWEN.items():
            h, f = (64, 96) if SMOKE else (hidden, mlp)
            for m in MS:
                for proj, (n, k) in (("up", (f, h)), ("down", (h, f))):
                    found.append(
                        (
                            "matmul",
                            f"matmul_{dtype.name}_{model}_{proj}_m{m}",
                            partial(bench_matmul, peers, dtype, m, n, k),
                        )
                    )
    s = SQUARES[0]
    found.append(("epilogue", "matmul_bias_silu_f16", lambda: bench_matmul(peers, tile.f16, s, s, s, epilogue=True)))
    copy: dict[str, float] = {}
    for model in gemv_decode.MODELS:
        for proj, (n, k) in gemv_decode.projections(model, SMOKE).items():
            for m in (1, 16):
                name = f"gemv_bf16_qwen3-{model}_{proj}_m{m}"
                found.append((f"gemv-{model}", name, partial(bench_gemv, peers, model, proj, mnk=(m, n, k), copy=copy)))
    found.append(("bmm", "bmm_f16", lambda: bench_bmm(peers)))
    if not ONLY or {"rows", "rows_knobs"} & set(ONLY.split(",")):
        env = bench_rows.Env(peers.torch, peers.errors, rows=ROWS, chain=CHAIN, timer=bench_rows_timer)
        found += bench_rows.steps(env, ROW_LENGTHS)
    found += attn_steps(peers, interleaved, _entry, SMOKE)
    picked = set(
        ONLY.split(",")
    )  # a group ("rows"), its prefix before "-" ("gemv") or before "_" ("attn": both attn_*)
    return [
        s
        for s in found
        if (not ONLY or {s[0], s[0].split("-")[0], s[0].split("_")[0]} & picked) and any(m in s[1] for m in MATCH)
    ]


def bench_rows_timer(paths: dict[str, tuple[Run, int, int]], warmup: int = 2) -> dict[str, float]:
    """Seconds per launch of each ``(run, launches per run, runs per sample)`` path, interleaved (see `interleaved`)."""
    per_run = interleaved({name: run for name, (run, _, _) in paths.items()}, warmup)
    return {name: per_run[name] / paths[name][1] for name in paths}


def main() -> None:
    errors: dict[str, str] = {}
    peers = Peers(errors)
    report: dict[str, Any] = {"benchmark": "kernels", "device": device_name(), "backend": tile.backend()}
    report |= {"smoke": SMOKE, "versions": versions(), "rounds": ROUNDS, "reps": REPS, "results": {}}
    for _, name, step in steps(peers):
        try:
            report["results"][name] = found = step()
        except Exception as exc:  # one failing measurement must not cost the others
            errors[name] = f"{type(exc).__name__}: {exc}"
            print(f"{name}: FAILED {errors[name]}")
            continue
        ratios = {k: round(v, 3) for k, v in found["tile_vs"].items()}
        print(f"{name}: tile/peer time {ratios}")
        for unit in ("GB_per_s", "TFLOP_per_s"):
            if "tile back to back" in found.get(unit, {}):
                rates = {k: round(v, 1) for k, v in found[unit].items() if "back to back" in k}
                print(f"  back to back {unit.replace('_per_s', '/s')} {rates}")
        if "GB_per_s_weight" in found:
            gbs = {k: round(v, 1) for k, v in found["GB_per_s_weight"].items()}
            frac = {k: round(v, 3) for k, v in found.get("fraction_of_copy_bandwidth", {}).items()}
            print(f"  weight GB/s {gbs}, of the copy bandwidth {frac}, config {found['config']}")
    report["tuned"] = {
        family: {key: str(config) for key, config in tk.autotune.tuner(family, "").remembered().items()}
        for family in ("matmul", "bmm", *bench_rows.KERNELS, "attention")
    }
    report["errors"] = errors
    if not SMOKE:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        if ONLY and RESULTS.exists():  # a partial run adds its measurements to the last full or partial one
            previous = json.loads(RESULTS.read_text())
            report["results"] = previous.get("results", {}) | report["results"]
            old_errors = {k: v for k, v in previous.get("errors", {}).items() if k not in report["results"]}
            report["errors"] = old_errors | errors
            report["tuned"] = {f: previous.get("tuned", {}).get(f, {}) | t for f, t in report["tuned"].items()}
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
