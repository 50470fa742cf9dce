"""A failed ``tile.assert_`` whose message and file path hold printf conversions (``%s``, ``%n``) prints them as
written, on the CPU interpreter and on the GPU, where tileiras makes both part of a ``vprintf`` format (see
``tile.ir._format_text``): the compiler escapes them, so the device reports an assert, not a fault from ``%s`` reading
memory past the format's arguments. Each runs in a subprocess (a device assert ends the process's CUDA context)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_frontend_python import run_python

MESSAGE = "100% %s%n%s%s%s end"
SCRIPT = f"""
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

@tile.entry
def checked(z: Mut[Tensor[f32, "B"]]):
    tile.assert_(tile.block_id()[0] < PASSING_BLOCKS, {MESSAGE!r})
    z.store(tile.full((B,), 1.0, f32))


z = tile.zeros(f32, [256]).partition([128])
try:
    (z,) = checked(z).sync()
except tile.TileError as exc:
    print(type(exc).__name__)
    print(exc)
else:
    print("no error", z.unpartition().numpy().sum())
"""


def _run(tmp_path: Path, backend: dict[str, str], blocks: int) -> tuple[str, Path]:
    folder = tmp_path / "p%s%n dir"
    folder.mkdir()
    script = folder / "pct.py"
    script.write_text(SCRIPT.replace("PASSING_BLOCKS", str(blocks)))
    # No disk cache: it is keyed by the source text, and a kernel cached from another folder would name that path.
    return run_python([str(script)], backend | {"TILE_CACHE_DIR": "off"}, timeout=300), script


def test_the_interpreter_prints_the_message_and_path_as_written(tmp_path: Path) -> None:
    out, script = _run(tmp_path, {"TILE_INTERPRET": "1"}, blocks=1)
    assert out.startswith("KernelAssertionError")
    assert f"kernel assertion failed: {MESSAGE} (at {script}:7:" in out
    assert "%%" not in out


def test_a_passing_assert_with_conversions_in_its_text_runs_on_the_interpreter(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, {"TILE_INTERPRET": "1"}, blocks=2)
    assert out.strip() == "no error 256.0"


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_a_passing_assert_with_conversions_in_its_text_runs_on_the_gpu(tmp_path: Path) -> None:
    out, _ = _run(tmp_path, {"TILE_BACKEND": "gpu"}, blocks=2)
    assert out.strip() == "no error 256.0"


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_a_failed_assert_prints_its_text_as_written_on_the_gpu(tmp_path: Path) -> None:
    """The device's printf line is the DILoc path, the line, the block and the message, each as written."""
    out, script = _run(tmp_path, {"TILE_BACKEND": "gpu"}, blocks=1)
    assert f"{script}:7: tile block: [1, 0, 0], position: []: {MESSAGE}" in out
    assert "CudaError" in out
    # tileiras lowers the assert to a vprintf and a trap: the H200's driver reports the trap as
    # CUDA_ERROR_LAUNCH_FAILED (seen in the GPU tier); __assertfail would give CUDA_ERROR_ASSERT.
    assert "CUDA_ERROR_LAUNCH_FAILED" in out or "CUDA_ERROR_ASSERT" in out
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" not in out
