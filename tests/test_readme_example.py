"""The kernel shown in the README runs as printed (on the CPU interpreter here) and computes x + y."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_kernel_runs_and_prints_the_sum(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README shows no Python example"
    script = tmp_path / "readme_example.py"
    script.write_text(blocks[0])
    env = {**os.environ, "TILE_INTERPRET": "1", "TILE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()[-1]  # numpy's summary of the 1024 values: [2. 2. 2. ... 2. 2. 2.]
    values = re.findall(r"-?\d+\.\d*", printed)
    assert printed.startswith("[")
    assert len(values) >= 6
    assert {float(v) for v in values} == {2.0}
