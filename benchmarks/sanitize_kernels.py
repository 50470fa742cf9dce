"""Run tile.kernels' GPU tests under NVIDIA compute-sanitizer (memcheck, racecheck, synccheck) and record the verdicts.

Issue 15 asks for every library kernel to be clean under memcheck and racecheck. The GPU tests already call every
kernel at odd, non-divisible shapes and check the numbers, so this runs them again, once per tool, inside
``compute-sanitizer --tool T`` and reads the tool's ``ERROR SUMMARY``. The tuner is off (``TILE_AUTOTUNE=0``: each
kernel runs its first config; racing every candidate under a sanitizer, tens of times slower, does not fit a run) and
so are the tests that exist to exercise the tuner itself.

    python benchmarks/sanitize_kernels.py --tools memcheck,racecheck --jobs 10 --out benchmarks/results/sanitizer.json

``--jobs N`` runs one sanitizer process per (tool, test file), N at once on the one GPU (each process compiles its
own kernels: give it CPU cores), so the whole sweep takes as long as its slowest file instead of the sum.

A tool passes when it reports 0 errors and the tests it ran passed; the JSON keeps the tool's own summary lines and,
on errors, the first reports, so a failure can be read without a rerun. Exit status 1 when any tool failed or none
ran.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "packages" / "tile-kernels" / "tests"
FILES = (
    "test_kernels_gpu.py",
    "test_rows_gpu.py",
    "test_gemv_gpu.py",
    "test_attention_gpu.py",
    "test_qwen3_ops_gpu.py",
)
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DESELECT = "not autotun and not tuner"
_SUMMARY = re.compile(r"=+ ERROR SUMMARY: (\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, \d+ warnings?\)")
# A report's kernel: "at <kernel>+0x<offset>", then " in <file>:<line>" when the cubin carries line info (Tile's do).
_AT = re.compile(r"\bat (.+?)\+0x[0-9a-fA-F]+(?: in (\S+?):\d+)?(?:\s|$)")
# Kernels that are not Tile's: torch's, cuDNN's, cuBLAS's (the tests' references). Tile kernels are Python names.
_FOREIGN = ("void ", "_Z", "cudnn", "cutlass", "nvjet", "sm80_", "sm86_", "sm89_", "sm90_", "sm100_", "ampere_", "xmma")
PRINT_LIMIT = 1000
_PYTEST = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected)")
_PYTEST_FINAL = re.compile(r"^=*\s*\d+ (passed|failed|skipped|errors?|deselected).* in [\d.]+s")


def find_sanitizer() -> str | None:
    """The compute-sanitizer binary: on PATH, else under CUDA_HOME or /usr/local/cuda."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            path = Path(home) / "bin" / "compute-sanitizer"
            if path.is_file():
                return str(path)
    return None


def command(sanitizer: str, tool: str, files: list[str], select: str) -> list[str]:
    """The compute-sanitizer command line running pytest's GPU tier over ``files`` with ``tool``."""
    if tool not in TOOLS:
        raise SystemExit(f"unknown tool {tool!r}: choose from {', '.join(TOOLS)}")
    return [
        sanitizer,
        "--tool",
        tool,
        "--error-exitcode",
        "86",
        "--print-limit",
        str(PRINT_LIMIT),
        "--report-api-errors",
        "no",
        "--target-processes",
        "all",
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-m",
        "gpu",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:benchmark",
        "-k",
        select,
        *files,
    ]


def attribute(output: str) -> dict[str, dict[str, int]]:
    """The printed reports by kernel, split into Tile's kernels and foreign ones (the tests' torch/cuDNN references):
    a report is one ``=========`` block starting at an ``Invalid ...`` or ``Error: ...`` line; its kernels are the
    names after ``at``. A kernel is Tile's when its frame names a ``.tilepy``/``.py`` source line or its name is not
    one of the foreign vendors' (`_FOREIGN`)."""
    found: dict[str, dict[str, int]] = {"tile": {}, "foreign": {}}
    block: set[tuple[str, bool]] = set()

    def close() -> None:
        for name, ours in block:
            side = found["tile" if ours else "foreign"]
            side[name] = side.get(name, 0) + 1
        block.clear()

    for line in output.splitlines():
        if not line.startswith("========="):
            continue
        body = line.lstrip("= ").strip()
        if body.startswith(("Invalid ", "Error:", "Race reported", "Uninitialized", "Barrier", "Warning:")):
            close()
        for name, where in _AT.findall(body):
            ours = where.endswith((".tilepy", ".py")) or not name.startswith(_FOREIGN)
            block.add((name, ours))
    close()
    return found


def verdict(output: str, returncode: int) -> dict[str, Any]:
    """What one sanitizer run says: its error count, pytest's counts, the reports by kernel, and pass.

    memcheck prints ``ERROR SUMMARY: N errors``; racecheck ``RACECHECK SUMMARY: ... (E errors, W warnings)`` lines
    (summed). A run that printed neither did not finish: None, a failure. A run passes when its tests passed and no
    report names a Tile kernel: hazards the tool finds in the tests' foreign reference kernels (cuDNN's attention) are
    listed under ``foreign`` and do not fail Tile, unless the print limit hid reports that could not be attributed."""
    errors = [int(m) for m in _SUMMARY.findall(output)] or [int(m) for m in _RACE_SUMMARY.findall(output)]
    counts: dict[str, int] = {}
    finals = [line for line in output.splitlines() if _PYTEST_FINAL.search(line)]
    for number, what in _PYTEST.findall(finals[-1] if finals else ""):
        counts[what.rstrip("s") if what.startswith("error") else what] = int(number)
    reports = [line for line in output.splitlines() if line.startswith("========= ") and "SUMMARY" not in line]
    total = sum(errors) if errors else None
    kernels = attribute(output)
    printed = sum(kernels["tile"].values()) + sum(kernels["foreign"].values())
    tests_ok = counts.get("passed", 0) > 0 and not counts.get("failed") and not counts.get("error")
    clean = total == 0 and returncode == 0
    foreign_only = total is not None and not kernels["tile"] and printed > 0 and printed < PRINT_LIMIT
    return {
        "errors": total,
        "tests": counts,
        "returncode": returncode,
        "passed": bool(tests_ok and (clean or foreign_only)),
        "kernels": kernels,
        "first_reports": reports[:40],
    }


def run_one(sanitizer: str, tool: str, files: list[str], select: str, timeout: float) -> dict[str, Any]:
    """One sanitizer process over ``files`` with ``tool``: its verdict, seconds and command line."""
    start, line = time.perf_counter(), command(sanitizer, tool, files, select)
    env = {**os.environ, "TILE_AUTOTUNE": "0", "TILE_REQUIRE_GPU": "1"}
    try:
        run = subprocess.run(line, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        output, code = run.stdout + run.stderr, run.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        output, code = output + f"\ntimed out after {timeout:.0f} s", -1
    return {**verdict(output, code), "seconds": round(time.perf_counter() - start, 1), "command": line}


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One tool's verdict over several processes (one per test file): errors and test counts summed, passed only
    when every process passed. A single process's verdict is returned as it is."""
    if len(parts) == 1:
        return parts[0]
    counts: dict[str, int] = {}
    for part in parts:
        for what, number in part["tests"].items():
            counts[what] = counts.get(what, 0) + number
    errors = [part["errors"] for part in parts]
    return {
        "errors": None if None in errors else sum(errors),
        "tests": counts,
        "returncode": next((part["returncode"] for part in parts if part["returncode"] != 0), 0),
        "passed": all(part["passed"] for part in parts),
        "kernels": {side: _merge(part["kernels"][side] for part in parts) for side in ("tile", "foreign")},
        "first_reports": [line for part in parts for line in part["first_reports"]][:40],
        "seconds": max(part["seconds"] for part in parts),
        "runs": [
            {k: part[k] for k in ("errors", "tests", "returncode", "passed", "seconds", "command")} for part in parts
        ],
    }


def _merge(tables: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in tables:
        for name, n in table.items():
            out[name] = out.get(name, 0) + n
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", default="memcheck,racecheck", help=f"comma-separated, of {', '.join(TOOLS)}")
    p.add_argument(
        "--files",
        default=",".join(FILES),
        help="test files: names under packages/tile-kernels/tests, or paths from the repository root",
    )
    p.add_argument("-k", dest="select", default=DESELECT, help="pytest -k expression")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per sanitizer process")
    p.add_argument(
        "--jobs", type=int, default=1, help="sanitizer processes at once; above 1, one process per (tool, test file)"
    )
    p.add_argument("--out", default="", help="write the JSON here")
    args = p.parse_args()
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print("compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)", file=sys.stderr)
        return 1
    files = [str(ROOT / f if "/" in f else TESTS / f) for f in args.files.split(",") if f]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        print(f"no such test file: {', '.join(missing)}", file=sys.stderr)
        return 1
    tools = [t for t in args.tools.split(",") if t]
    for tool in tools:
        command(sanitizer, tool, files, args.select)  # refuses an unknown tool before anything runs
    groups = [[f] for f in files] if args.jobs > 1 else [files]
    jobs = [(tool, group) for tool in tools for group in groups]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(lambda job: run_one(sanitizer, job[0], job[1], args.select, args.timeout), jobs))
    results: dict[str, Any] = {"sanitizer": sanitizer, "files": args.files.split(","), "select": args.select}
    for tool in tools:
        results[tool] = combine([part for (t, _), part in zip(jobs, done, strict=True) if t == tool])
        r = results[tool]
        verdict_line = f"errors={r['errors']} tests={r['tests']} rc={r['returncode']} passed={r['passed']}"
        print(f"{tool}: {verdict_line} ({r['seconds']} s)")
        for side in ("tile", "foreign"):
            if r["kernels"][side]:
                print(f"    reports in {side} kernels: {r['kernels'][side]}")
        for line in r["first_reports"][:10]:
            print("   ", line)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    ran = [t for t in TOOLS if t in results]
    return 0 if ran and all(results[t]["passed"] for t in ran) else 1


if __name__ == "__main__":
    raise SystemExit(main())
