"""The command-line tools as a user runs them: ``tile``, ``tile-ir``, ``tile-doctor`` and the demo.

Each runs in a fresh interpreter (``python -m``, what the console scripts call): ``--version`` answers, a closed
standard output (``| head``) ends the tool quietly instead of in a BrokenPipe traceback, the demo explains itself
under ``--help`` and runs on the CPU interpreter on a machine without tileiras, and ``tile compile`` names the
``@tile.entry`` kernels of a file when asked for one it lacks.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Runs a module's main() on a machine without tileiras: no override, no pip package, nothing on PATH.
HIDE_TILEIRAS = """
import runpy, sys, tile.bindings._tileiras as t
t._pip_candidate = lambda: None
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""

ADD = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))
"""

TOOLS = {  # module, distribution, what --version starts with
    "tile": ("tile.compiler", "tile-compiler", "tile (tile-compiler) "),
    "tile-ir": ("tile.ir", "tile-ir", "tile-ir "),
    "tile-doctor": ("tile.bindings", "tile-bindings", "tile-doctor (tile-bindings) "),
}


def _python(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        check=False,
        timeout=timeout,
    )


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_cli_answers_version(tool: str) -> None:
    module, distribution, prefix = TOOLS[tool]
    done = _python("-m", module, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(prefix)
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "(not installed"
    assert version in done.stdout


@pytest.fixture(scope="module")
def kernel_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A kernel source file and the bytecode of its kernel (compiled for the CPU target, no tileiras needed)."""
    folder = tmp_path_factory.mktemp("kernel")
    kernel = folder / "k.py"
    kernel.write_text(ADD)
    argv = ["compile", f"{kernel}::add", "--arch", "cpu", "--const", "B=128", "--emit", "bytecode", "--no-cache"]
    build = _python("-m", "tile.compiler", *argv, "-o", str(folder))
    assert build.returncode == 0, build.stderr
    return kernel, folder / "add.tilebc"


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (["-m", "tile.bindings"], 141),
        (["-m", "tile.compiler", "cache", "info"], 141),
        (["-m", "tile.compiler", "compile", "{kernel}::add", "--arch", "cpu", "--emit", "ir", "-o", "-"], 141),
        (["-m", "tile.ir", "info", "{bytecode}"], 141),
        (["-m", "tile.frontend.demo"], 141),
        # argparse drops what it cannot print under --help and --version and exits 0 itself.
        (["-m", "tile.bindings", "--help"], 0),
        (["-m", "tile.compiler", "--version"], 0),
        (["-m", "tile.ir", "--help"], 0),
        (["-m", "tile.frontend.demo", "--help"], 0),
    ],
    ids=lambda value: " ".join(value[1:3]) if isinstance(value, list) else str(value),
)
def test_a_closed_stdout_ends_quietly(
    argv: list[str], status: int, kernel_files: tuple[Path, Path], tmp_path: Path
) -> None:
    kernel, bytecode = kernel_files
    argv = [a.format(kernel=kernel, bytecode=bytecode) for a in argv]
    if "compile" in argv:
        argv += ["--const", "B=128"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader (`head`) is gone before the tool writes its first byte
    env = dict(os.environ, TILE_CACHE_DIR=str(tmp_path / "cache"), TILE_INTERPRET="1")
    try:
        done = subprocess.run(
            [sys.executable, *argv], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, check=False
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert "Broken pipe" not in done.stderr
    assert done.returncode == status


def test_the_demo_explains_itself() -> None:
    done = _python("-m", "tile.frontend.demo", "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: python -m tile.frontend.demo")
    assert "--small" in done.stdout
    assert "backend" not in done.stdout, "--help must not run the demo"
    bad = _python("-m", "tile.frontend.demo", "--big")
    assert bad.returncode == 2
    assert "unrecognized arguments: --big" in bad.stderr


def test_the_demo_runs_on_the_cpu_without_tileiras(tmp_path: Path) -> None:
    env = dict(os.environ, TILE_INTERPRET="1", PATH=str(tmp_path), TILE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TILE_TILEIRAS", None)
    env.pop("CUDA_HOME", None)
    done = _python("-c", HIDE_TILEIRAS, "tile.frontend.demo", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "backend: cpu" in done.stdout
    assert "ownership  both misuses rejected before anything ran: OK" in done.stdout


def test_tile_compile_lists_the_entry_kernels(tmp_path: Path) -> None:
    source = tmp_path / "kernels.py"
    source.write_text(
        textwrap.dedent(
            """
            import tile.frontend as tile
            from tile.frontend import Mut, Tensor, f32


            @tile.function
            def twice(t):
                return t + t


            def host_helper():
                return 1


            @tile.entry
            def double(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
                z.store(twice(tile.load_tile_like(x, z)))


            @tile.entry
            def copy(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
                z.store(tile.load_tile_like(x, z))
            """
        )
    )
    done = _python("-m", "tile.compiler", "compile", f"{source}::nope", "--arch", "cpu")
    assert done.returncode == 2
    assert "has no kernel named 'nope'; its @tile.entry kernels: double, copy" in done.stderr
    assert "twice" not in done.stderr
    assert "host_helper" not in done.stderr
