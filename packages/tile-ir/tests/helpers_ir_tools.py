"""Locating and running NVIDIA's tileirdisasm / tileiras (the oracles of the writer) for tile-ir tests.

The tools come from ``TILE_TILEIRAS`` (tileirdisasm is looked up beside it), the ``nvidia-cuda-tileiras`` pip
package (``nvidia/cu13/bin``) or PATH, the discovery order of docs/compiler/toolchain-and-caches.md. They run with
CUDA_HOME removed: a foreign CUDA_HOME makes tileiras 13.5 fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["compile_cubin", "disassemble", "tool_path"]


def tool_path(name: str) -> Path | None:
    """Return the path of tileiras/tileirdisasm, or None when not installed."""
    if configured := os.environ.get("TILE_TILEIRAS"):
        candidate = Path(configured).with_name(name)
        if candidate.is_file():
            return candidate
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "cu13" / "bin" / name
        if candidate.is_file():
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False)


def disassemble(data: bytes, *flags: str) -> subprocess.CompletedProcess[str]:
    """Run tileirdisasm on `data` (with extra `flags`, e.g. -g); rc 0 means NVIDIA's reader and verifier accept it."""
    path = tool_path("tileirdisasm")
    assert path is not None, "tileirdisasm not installed"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.tilebc"
        src.write_bytes(data)
        return _run([str(path), *flags, str(src)])


def compile_cubin(data: bytes, arch: str) -> tuple[subprocess.CompletedProcess[str], bytes]:
    """Compile bytecode with tileiras for `arch` (e.g. sm_90); returns the process and the cubin bytes."""
    path = tool_path("tileiras")
    assert path is not None, "tileiras not installed"
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.tilebc", Path(tmp) / "out.cubin"
        src.write_bytes(data)
        proc = _run([str(path), f"--gpu-name={arch}", "-o", str(out), str(src)])
        return proc, out.read_bytes() if out.exists() else b""
