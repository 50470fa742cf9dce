"""``scripts/gpu-check.sh`` fails loudly: any step that fails makes it exit non-zero and say which.

The GPU machine is stood in for by shims on PATH: an ``nvidia-smi`` that prints a device and a ``python3`` whose
pytest run passes or fails as the test asks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def _shims(folder: Path, pytest_status: int) -> Path:
    folder.mkdir()
    (folder / "nvidia-smi").write_text(
        "#!/bin/sh\necho 'name, driver_version, memory.total'\necho 'H100, 580, 80 GiB'\n"
    )
    (folder / "python3").write_text(
        f'#!/bin/sh\ncase "$*" in *pytest*) echo "pytest $*"; exit {pytest_status};; esac\nexit 0\n'
    )
    for shim in folder.iterdir():
        shim.chmod(0o755)
    return folder


def _run(tmp_path: Path, pytest_status: int, *args: str) -> subprocess.CompletedProcess[str]:
    shims = _shims(tmp_path / "bin", pytest_status)
    env = {**os.environ, "PATH": f"{shims}:/usr/bin:/bin", "OUT": str(tmp_path / "out")}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False)


def test_a_failing_test_run_fails_the_script(tmp_path: Path) -> None:
    done = _run(tmp_path, 1, "tests")
    assert done.returncode == 1
    assert "gpu-check: FAILED: gpu tests" in done.stderr


def test_a_passing_test_run_passes(tmp_path: Path) -> None:
    done = _run(tmp_path, 0, "tests")
    assert done.returncode == 0, done.stderr
    assert "gpu-check: all tests checks passed" in done.stdout
    assert (tmp_path / "out" / "gpu-tests.log").read_text().startswith("pytest -m pytest -m gpu")


@pytest.mark.parametrize(("args", "message"), [(["nonsense"], "usage:"), (["sanitize"], "compute-sanitizer not found")])
def test_what_cannot_run_is_said(tmp_path: Path, args: list[str], message: str) -> None:
    if args == ["sanitize"] and shutil.which("compute-sanitizer", path="/usr/bin:/bin"):
        pytest.skip("compute-sanitizer is installed system-wide here")
    done = _run(tmp_path, 0, *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_without_a_gpu_driver_it_says_so(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has a GPU driver system-wide")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")}
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 2
    assert "nvidia-smi not found" in done.stderr
