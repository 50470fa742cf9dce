"""The README's example runs as written (on the CPU interpreter here) and prints True."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs() -> None:
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue() == "True\n"
