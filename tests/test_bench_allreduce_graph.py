"""``benchmarks/bench_allreduce_graph.py`` on the CPU (gloo, the interpreter), under torchrun's two ranks.

Issue 19: the benchmark died of SIGABRT on two GPUs with nothing printed. What is checked here is the part that makes
the next failure say where: every rank logs its steps, a contender that fails on every rank is reported in its row
and the run goes on to its end, and one that fails on some ranks only (the others waiting in a collective it left)
ends the run within the agreement timeout with exit status 1 instead of hanging until NCCL's watchdog aborts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_allreduce_graph.py"


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TILE_INTERPRET="1")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    return subprocess.run(
        [*torchrun, str(SCRIPT), "--smoke", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_smoke_times_the_tile_contender_and_every_rank_logs_its_steps() -> None:
    done = _run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"contender": "tile_nccl", "us_per_all_reduce"' in done.stdout
    for rank in (0, 1):
        for step in ("tile_nccl: check and capture", "tile_nccl: timing", "tile_nccl: done", "exit 0"):
            assert f"[rank {rank} " in done.stderr
            assert any(line.startswith(f"[rank {rank} ") and step in line for line in done.stderr.splitlines()), step


def test_a_contender_failing_on_every_rank_is_reported_and_the_run_ends_cleanly() -> None:
    done = _run("--fail-on", "0:tile_nccl,1:tile_nccl")
    assert done.returncode == 1, done.stdout + done.stderr
    row = next(line for line in done.stdout.splitlines() if '"contender": "tile_nccl"' in line)
    assert "rank 0: RuntimeError: --fail-on" in row
    assert "rank 1: RuntimeError: --fail-on" in row
    assert "us_per_all_reduce" not in row
    assert "leaving the process group" in done.stderr  # (both ranks left the group together)
    assert "stopped" not in done.stderr


def test_a_contender_failing_on_one_rank_stops_the_run_within_the_timeout() -> None:
    done = _run("--fail-on", "1:tile_nccl", "--agree-timeout", "8", timeout=120)
    assert done.returncode != 0, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert any(
        line.startswith("[rank 1 ") and "check and capture failed: RuntimeError: --fail-on" in line for line in lines
    )
    assert any(
        line.startswith("[rank 1 ") and "stopped: the ranks did not all report within 8 s" in line for line in lines
    )
    assert not any(line.startswith("[rank 1 ") and "leaving the process group" in line for line in lines)


def test_unknown_contenders_are_refused_before_anything_starts() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "tile_nccl,nccl_tile"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "unknown contenders ['nccl_tile']" in done.stderr
