"""Python in a fresh process with a chosen Tile backend: for the tests that need one (examples, GPU faults)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_python(args: list[str], backend: dict[str, str], *, cwd: Path | None = None, timeout: int = 600) -> str:
    """Run ``python *args`` with the ``TILE_*`` environment replaced by ``backend``; its stdout (it must succeed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILE_")} | backend | {"TILE_QUIET": "1"}
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=cwd
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
