"""``benchmarks/sanitize_kernels.py`` passes a tool only on 0 errors with tests that ran and passed.

compute-sanitizer is stood in for by a shim on PATH that prints what the real one prints around a pytest run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "sanitize_kernels.py"


def _run(tmp_path: Path, pytest_line: str, errors: int | None, status: int) -> tuple[int, dict[str, object], str]:
    shims = tmp_path / "bin"
    shims.mkdir()
    summary = f"echo '========= ERROR SUMMARY: {errors} errors'\n" if errors is not None else ""
    report = "echo '========= Invalid __global__ read of size 4 bytes'\n" if errors else ""
    shim = shims / "compute-sanitizer"
    shim.write_text(f"#!/bin/sh\necho \"args: $*\"\n{report}echo '{pytest_line}'\n{summary}exit {status}\n")
    shim.chmod(0o755)
    out = tmp_path / "s.json"
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--tools", "memcheck", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return run.returncode, json.loads(out.read_text()), run.stdout


def test_a_clean_run_passes_and_runs_pytest_inside_the_tool(tmp_path: Path) -> None:
    code, result, stdout = _run(tmp_path, "12 passed, 3 deselected in 9.1s", errors=0, status=0)
    assert code == 0, stdout
    memcheck = result["memcheck"]
    assert isinstance(memcheck, dict)
    assert memcheck["errors"] == 0
    assert memcheck["passed"] is True
    assert memcheck["tests"] == {"passed": 12, "deselected": 3}
    line = memcheck["command"]
    assert isinstance(line, list)
    assert line[1:3] == ["--tool", "memcheck"]
    assert line[line.index(sys.executable) :][1:5] == ["-m", "pytest", "-q", "-m"]


@pytest.mark.parametrize(
    ("line", "errors", "status"),
    [
        ("12 passed in 9.1s", 2, 86),  # the tool found errors
        ("11 passed, 1 failed in 9.1s", 0, 1),  # a test failed under the tool
        ("12 passed in 9.1s", None, 0),  # no summary: the tool did not run to the end
        ("3 skipped in 0.2s", 0, 0),  # nothing ran
    ],
)
def test_errors_failures_missing_summaries_and_empty_runs_fail(
    tmp_path: Path, line: str, errors: int | None, status: int
) -> None:
    code, result, stdout = _run(tmp_path, line, errors=errors, status=status)
    assert code == 1, stdout
    memcheck = result["memcheck"]
    assert isinstance(memcheck, dict)
    assert memcheck["passed"] is False
    if errors:
        assert memcheck["first_reports"] == ["========= Invalid __global__ read of size 4 bytes"]


def test_jobs_run_one_process_per_tool_and_file_and_sum_their_verdicts(tmp_path: Path) -> None:
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "compute-sanitizer"
    # Errors only in the rows file's process: the combined verdict must fail and say so.
    shim.write_text(
        "#!/bin/sh\n"
        'case "$*" in *test_rows_gpu.py*) n=2 ;; *) n=0 ;; esac\n'
        "echo '4 passed in 1.0s'\n"
        'echo "========= ERROR SUMMARY: $n errors"\n'
        '[ "$n" = 0 ] || exit 86\n'
    )
    shim.chmod(0o755)
    out = tmp_path / "s.json"
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    files = "test_kernels_gpu.py,test_rows_gpu.py,test_gemv_gpu.py"
    args = ["--tools", "memcheck,racecheck", "--files", files, "--jobs", "4", "--out", str(out)]
    run = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stdout
    result = json.loads(out.read_text())
    for tool in ("memcheck", "racecheck"):
        verdict = result[tool]
        assert verdict["errors"] == 2
        assert verdict["tests"] == {"passed": 12}
        assert verdict["passed"] is False
        assert verdict["returncode"] == 86
        runs = verdict["runs"]
        assert [r["passed"] for r in runs] == [True, False, True]
        assert all(r["command"][1:3] == ["--tool", tool] for r in runs)
        assert [sum(f in " ".join(r["command"]) for f in files.split(",")) for r in runs] == [1, 1, 1]


def _verdict(output: str, status: int) -> dict[str, object]:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import sanitize_kernels
    finally:
        sys.path.remove(str(SCRIPT.parent))
    result: dict[str, object] = sanitize_kernels.verdict(output, status)
    return result


_RACE = (
    "========= COMPUTE-SANITIZER\n"
    "========= Error: Race reported between Read access at cudnn_sdpa_fprop_kernel0_0+0x2e0\n"
    "=========     and Write access at {second} [528 hazards]\n"
    "=========\n"
    "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
    "29 passed in 200.0s\n"
)


def test_racecheck_summaries_count_and_foreign_reference_kernels_do_not_fail_tile() -> None:
    # Hazards only in the tests' cuDNN reference kernel: listed as foreign, Tile passes.
    foreign = _verdict(_RACE.format(second="cudnn_sdpa_fprop_kernel0_0+0x4660"), 86)
    assert foreign["errors"] == 1
    assert foreign["kernels"] == {"tile": {}, "foreign": {"cudnn_sdpa_fprop_kernel0_0": 1}}
    assert foreign["passed"] is True
    # The same report naming a Tile kernel (a .tilepy source line) fails.
    ours = _verdict(_RACE.format(second="attn_fwd+0x4660 in _attention_kernels.tilepy:12"), 86)
    assert ours["kernels"] == {"tile": {"attn_fwd": 1}, "foreign": {"cudnn_sdpa_fprop_kernel0_0": 1}}
    assert ours["passed"] is False
    clean = _verdict("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n9 passed in 1.0s\n", 0)
    assert clean["errors"] == 0
    assert clean["passed"] is True


def test_memcheck_reports_are_attributed_to_the_tile_kernel_named() -> None:
    out = (
        "========= Invalid __shared__ write of size 8 bytes\n"
        "=========     at qkv_prep_rows+0x4540 in _qwen3_kernels.tilepy:136\n"
        "=========     by thread (64,0,0) in block (12,1,0)\n"
        "=========         Device Frame: qkv_prep_rows+0x3500 in _qwen3_kernels.tilepy:216\n"
        "========= ERROR SUMMARY: 1 error\n"
        "1 failed in 3.0s\n"
    )
    result = _verdict(out, 86)
    assert result["kernels"] == {"tile": {"qkv_prep_rows": 1}, "foreign": {}}
    assert result["passed"] is False
