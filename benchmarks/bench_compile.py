"""Compile speed of tile.compiler on the kernel corpus, and cuTile Python's on its equivalent kernels.

Per corpus kernel (packages/tile-compiler/tests/corpus), for sm_90:
- frontend: parse → resolve → typecheck → lower → verify → bytecode, cold (first compile in this process) and warm
  (median of 5 reruns of the stages);
- tileiras: the assembler run of that first compile;
- disk hit: median of 20 `compile_kernel` calls served by the disk cache (memory cache cleared before each);
- cuTile Python: export of its equivalent kernel (packages/tile-ir/tests/cutile_corpus) to bytecode (median of 3)
  and to a cubin (one run), where one exists and cuda-tile is installed.
Targets: GEMM frontend ≤ 50 ms, disk hit ≤ 2 ms. Needs tileiras, no GPU. Writes benchmarks/results/compile.json.
Run: python benchmarks/bench_compile.py [--quick]   (--quick: the first 6 kernels plus the GEMMs, no results file)
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tile.compiler as tc
from tile.compiler._dump import Dumper
from tile.compiler._pipeline import Clock, run_frontend

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "packages" / "tile-compiler" / "tests" / "corpus"
CUTILE_CORPUS = ROOT / "packages" / "tile-ir" / "tests" / "cutile_corpus" / "kernels.py"
RESULTS = ROOT / "benchmarks" / "results" / "compile.json"
ARCH = "sm_90"
FRONTEND_STAGES = ("parse", "resolve", "typecheck", "lower", "verify", "bytecode")
TARGETS_MS = {"gemm_frontend": 50.0, "disk_hit": 2.0}
# Our corpus kernel -> the cuTile corpus entry computing the same thing.
EQUIVALENT = {
    "add": "vadd",
    "axpy": "axpy",
    "unary_math": "math_unary",
    "leaky_select": "compare_select",
    "int_arith": "int_ops",
    "row_sum": "row_reductions",
    "row_argmax": "argmax_rows",
    "row_cumsum": "scans",
    "transpose": "transpose_order",
    "gemm": "gemm_f16",
    "gemm_swizzled": "gemm_f16",
    "gemm_persistent": "gemm_f16",
    "softmax": "softmax",
    "layernorm": "layernorm",
    "rmsnorm": "rmsnorm_f16",
    "flash_attention": "attention",
}


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def corpus_cases() -> list[Any]:
    """Every corpus `Case`, in module order."""
    sys.path.insert(0, str(CORPUS))
    names = sorted(p.stem for p in CORPUS.glob("tc_corpus_*.py") if p.stem not in ("tc_corpus_case", "tc_corpus_lib"))
    return [case for name in names for case in importlib.import_module(name).CASES]


def spec_for(case: Any) -> tc.Specialization:
    """Row-major tensors with 16-divisible extents, as the corpus tests compile them."""
    params: dict[str, tc.ArraySpec | tc.ScalarSpec] = {}
    for p in tc.resolve(tc.parse(case.kernel)).params:
        if p.kind in ("tensor", "mut") and p.dtype is not None:
            n = len(p.shape)
            one = tuple(i == n - 1 for i in range(n)) if case.contiguous else ()
            params[p.name] = tc.ArraySpec(p.dtype.name, n, stride_one=one, shape_div=(16,) * n)
    return tc.Specialization.make(params=params, consts=dict(case.consts))


def _median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return _ms(statistics.median(times))


def measure_ours(case: Any, cache_dir: Path) -> dict[str, Any]:
    """Frontend (cold, warm), tileiras and disk-hit times of one corpus kernel."""
    # Only this run's cache and tileiras: TILE_TILEIRAS (the GPU box's kit) or else the pip package.
    chosen = {k: v for k, v in os.environ.items() if k == "TILE_TILEIRAS"}
    settings = tc.knobs({"TILE_CACHE_DIR": str(cache_dir), "PATH": "", **chosen})
    spec, target = spec_for(case), tc.Target(ARCH)
    tc.clear_memory_cache()
    first = tc.compile_kernel(case.kernel, spec, target, settings=settings)
    version = first.bytecode_version
    quiet = Dumper(frozenset(), None, case.name, io.StringIO())
    warm = _median_ms(lambda: run_frontend(case.kernel, spec, target, version=version, dumper=quiet, clock=Clock()), 5)

    def disk_hit() -> None:
        tc.clear_memory_cache()
        assert tc.compile_kernel(case.kernel, spec, target, settings=settings).origin == "disk"

    return {
        "frontend_cold_ms": _ms(sum(first.timings.get(s, 0.0) for s in FRONTEND_STAGES)),
        "frontend_warm_ms": warm,
        "tileiras_ms": _ms(first.timings.get("cubin", 0.0)),
        "disk_hit_ms": _median_ms(disk_hit, 20),
        "memory_hit_ms": _median_ms(lambda: tc.compile_kernel(case.kernel, spec, target, settings=settings), 50),
        "bytecode_bytes": len(first.bytecode),
        "cubin_bytes": len(first.cubin or b""),
        "bytecode_version": "{}.{}".format(*version),
    }


def load_cutile() -> types.ModuleType | None:
    """The cuTile corpus module, or None without cuda-tile."""
    if importlib.util.find_spec("cuda.tile") is None or not CUTILE_CORPUS.is_file():
        return None
    # cuTile's own disk cache would turn its second compile of a kernel into a lookup: measure real compiles.
    os.environ["CUDA_TILE_CACHE_DIR"] = "off"
    spec = importlib.util.spec_from_file_location("bench_cutile_corpus", CUTILE_CORPUS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@functools.cache
def measure_cutile(corpus: types.ModuleType, name: str) -> dict[str, Any]:
    """cuTile Python's bytecode export (median of 3) and full cubin export (one run) of corpus entry ``name``."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    entry = next(k for k in corpus.CORPUS if k.name == name)
    signature = KernelSignature(list(entry.params), CallingConvention.cutile_python_v2())

    def export(fmt: str) -> None:
        extra = {"gpu_code": ARCH} if fmt == "cubin" else {"bytecode_version": "13.4"}
        export_kernel(entry.kernel, [signature], io.BytesIO(), output_format=fmt, **extra)

    return {
        "cutile_entry": name,
        "cutile_frontend_ms": _median_ms(lambda: export("tileir_bytecode"), 3),
        "cutile_to_cubin_ms": _median_ms(lambda: export("cubin"), 1),
    }


def _device_name() -> str:
    """The GPU's name (compiling needs none: this only records where the numbers were taken)."""
    import tile.bindings as tb

    return tb.device_name(0) if tb.driver_available() and tb.device_count() > 0 else "none (CPU only)"


def environment() -> dict[str, Any]:
    """Host and tool versions for the results file."""
    found = tc.toolchain()
    cutile = importlib.util.find_spec("cuda.tile")
    cutile_version = importlib.import_module("cuda.tile").__version__ if cutile else None
    machine = platform.processor() or platform.machine()
    return {
        "host": platform.node(),
        "device": _device_name(),
        "cpu": f"{machine} x{os.cpu_count()}",
        "python": platform.python_version(),
        "tileiras": found.version,
        "cuda_tile": cutile_version,
        "arch": ARCH,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the first 6 kernels plus any GEMM")
    args = parser.parse_args()
    cases = corpus_cases()
    if args.quick:
        cases = cases[:6] + [c for c in cases[6:] if "gemm" in c.name]
    cutile = load_cutile()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        for i, case in enumerate(cases):
            row: dict[str, Any] = {"kernel": case.name}
            try:
                row |= measure_ours(case, Path(tmp) / f"c{i}")
            except Exception as exc:  # one broken kernel must not hide the others' numbers
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            if cutile is not None and case.name in EQUIVALENT:
                try:
                    row |= measure_cutile(cutile, EQUIVALENT[case.name])  # memoised: several share one peer
                except Exception as exc:  # the peer failing is a result, not a crash
                    row["cutile_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            rows.append(row)
            print(f"  {case.name}: done", file=sys.stderr)
    summary = summarize(rows)
    if not args.quick:  # a partial run must not replace the full results
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "benchmark": "compile",
            **environment(),
            "targets_ms": TARGETS_MS,
            "summary": summary,
            "kernels": rows,
        }
        RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    print_table(rows, summary)
    return 0


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians, the GEMM frontend and whether the targets are met."""
    ok = [r for r in rows if "error" not in r]
    gemms = [r["frontend_cold_ms"] for r in ok if r["kernel"].startswith("gemm")]
    disk = [r["disk_hit_ms"] for r in ok]
    return {
        "kernels": len(rows),
        "failed": [r["kernel"] for r in rows if "error" in r],
        "median_frontend_cold_ms": statistics.median([r["frontend_cold_ms"] for r in ok]) if ok else None,
        "median_tileiras_ms": statistics.median([r["tileiras_ms"] for r in ok]) if ok else None,
        "max_disk_hit_ms": max(disk) if disk else None,
        "gemm_frontend_cold_ms": max(gemms) if gemms else None,
        "gemm_frontend_target_met": bool(gemms) and max(gemms) <= TARGETS_MS["gemm_frontend"],
        "disk_hit_target_met": bool(disk) and max(disk) <= TARGETS_MS["disk_hit"],
    }


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """The short table printed last (ms)."""
    print(f"{'kernel':24} {'front cold':>10} {'warm':>8} {'tileiras':>9} {'disk hit':>9} ", end="")
    print(f"{'cuTile fe':>10} {'cuTile all':>11}")
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:24} error: {r['error'][:90]}")
            continue
        fe, full = r.get("cutile_frontend_ms", "-"), r.get("cutile_to_cubin_ms", "-")
        print(
            f"{r['kernel']:24} {r['frontend_cold_ms']:>10} {r['frontend_warm_ms']:>8} {r['tileiras_ms']:>9} "
            f"{r['disk_hit_ms']:>9} {fe!s:>10} {full!s:>11}"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    raise SystemExit(main())
