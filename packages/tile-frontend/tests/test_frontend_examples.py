"""Every script in examples/ runs as a subprocess and prints its OK line: on the CPU interpreter everywhere, and on
the GPU (``TILE_BACKEND=gpu``) where one is visible. ``python -m tile.frontend.demo`` runs the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_frontend_python import run_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def _run(args: list[str], backend: dict[str, str]) -> str:
    return run_python(args, backend, cwd=EXAMPLES.parent)


def test_every_example_is_listed_in_the_readme() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert len(SCRIPTS) >= 10
    assert [s for s in SCRIPTS if f"`{s}`" not in readme] == []


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_on_the_interpreter(script: str) -> None:
    out = _run([str(EXAMPLES / script)], {"TILE_INTERPRET": "1"})
    assert "on cpu" in out.splitlines()[-1]
    assert out.rstrip().endswith("OK")


@pytest.mark.gpu
@pytest.mark.requires_tileiras
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_on_the_gpu(script: str) -> None:
    out = _run([str(EXAMPLES / script)], {"TILE_BACKEND": "gpu"})
    assert "on gpu" in out.splitlines()[-1]
    assert out.rstrip().endswith("OK")


def test_demo_on_the_interpreter() -> None:
    out = _run(["-m", "tile.frontend.demo"], {"TILE_INTERPRET": "1"})
    assert "backend: cpu" in out
    assert out.count("OK") >= 5


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_demo_on_the_gpu() -> None:
    out = _run(["-m", "tile.frontend.demo"], {"TILE_BACKEND": "gpu"})
    assert "backend: gpu" in out
