"""A child Python process that compiles with its own ``TILE_CACHE_DIR`` and prints one JSON object (the disk-cache
tests' second process: what one process compiled, another must find)."""

from __future__ import annotations

import json
import subprocess
import sys


def spawn(code: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """Start ``python -c code *args`` with ``env``; collect it with `json_result`."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def json_result(proc: subprocess.Popen[str], timeout: int) -> dict[str, object]:
    """The JSON object the child printed (it must exit cleanly within ``timeout`` seconds)."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return dict(json.loads(out))
