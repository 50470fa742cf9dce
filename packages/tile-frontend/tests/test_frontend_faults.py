"""A tile index the compiler cannot bound before launch is checked in the kernel: on the CPU interpreter a failed check
is a `KernelFaultError` with the access, its line and its block; on the GPU it is CUDA's illegal-address fault, whose
message points at ``TILE_DEBUG_GUARDS=1`` (a device-side assert printing the access) and the interpreter, and whose
note names the launch that was waited for. Each runs in a subprocess
(a GPU fault ends the process's CUDA context)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_frontend_python import run_python

SCRIPT = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


@tile.entry
def shifted(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.partition((B,)).load((tile.block_id()[0] + 1,)))  # the last block reads one tile past the end


try:
    shifted(tile.zeros(f32, [1024]).partition([128]), tile.ones(f32, [1024])).sync()
except tile.TileError as exc:
    print(type(exc).__name__)
    print(exc)
    print(*getattr(exc, "__notes__", []), sep="\\n")
else:
    print("no error")
"""


def _run(tmp_path: Path, backend: dict[str, str]) -> str:
    script = tmp_path / "fault.py"
    script.write_text(SCRIPT)
    return run_python([str(script)], backend, timeout=300)


def test_a_failed_in_kernel_index_check_on_the_interpreter(tmp_path: Path) -> None:
    out = _run(tmp_path, {"TILE_INTERPRET": "1"})
    assert out.startswith("KernelAssertionError")
    assert "tile index out of range for x.partition((128,)) at " in out
    assert "fault.py:8" in out
    if sys.version_info >= (3, 11):
        assert "reported while waiting for the launch of shifted at " in out


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_a_failed_in_kernel_index_check_on_the_gpu(tmp_path: Path) -> None:
    out = _run(tmp_path, {"TILE_BACKEND": "gpu"})
    assert out.startswith("CudaError")
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in out
    assert "rerun with TILE_DEBUG_GUARDS=1" in out
    assert "TILE_INTERPRET=1" in out
    assert "reported while waiting for the launch of shifted at " in out


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_debug_guards_name_the_failed_access_on_the_gpu(tmp_path: Path) -> None:
    """With ``TILE_DEBUG_GUARDS=1`` the GPU's guard is a device-side assert that prints the access and its line."""
    out = _run(tmp_path, {"TILE_BACKEND": "gpu", "TILE_DEBUG_GUARDS": "1"})
    assert "CudaError" in out  # the device's printf reaches stdout before Python's buffered lines
    assert "tile index out of range for x.partition((128,)) at " in out
    assert "fault.py:8" in out
