"""Repository-wide pytest configuration: the `gpu` and `requires_tileiras` markers.

Both resources are probed once per session, and only when a collected test asks for them. A test whose
resource is missing is skipped, unless the matching "require" variable is set, in which case it fails:
``TILE_REQUIRE_GPU=1`` on the GPU machine (a GPU run that silently skips is no GPU run), and
``TILE_REQUIRE_TILEIRAS=1`` in CI, where tier 2 (tileiras without a GPU) must really run.

The markers themselves are registered once, in the root ``pyproject.toml``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from pathlib import Path

import pytest


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@functools.cache
def _gpu_reason() -> str | None:
    """Return why no GPU can be used, or None when one can."""
    if importlib.util.find_spec("cuda.bindings") is None:
        return "cuda-bindings is not installed"
    from cuda.bindings import driver

    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # without libcuda, cuda-bindings raises its own loader errors, not a CUresult
        return f"no CUDA driver library ({exc})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"no usable CUDA driver (cuInit: {err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA device"
    return None


def _tileiras_candidates() -> list[Path]:
    found: list[Path] = []
    if env := os.environ.get("TILE_TILEIRAS"):
        found.append(Path(env))
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found.append(Path(root) / "cu13" / "bin" / "tileiras")
    if on_path := shutil.which("tileiras"):
        found.append(Path(on_path))
    if cuda_home := os.environ.get("CUDA_HOME"):
        found.append(Path(cuda_home) / "bin" / "tileiras")
    return found


@functools.cache
def _tileiras_reason() -> str | None:
    if any(p.is_file() and os.access(p, os.X_OK) for p in _tileiras_candidates()):
        return None
    return "tileiras not found (pip install nvidia-cuda-tileiras, or set TILE_TILEIRAS)"


_PROBES = {
    "gpu": (_gpu_reason, "TILE_REQUIRE_GPU"),
    "requires_tileiras": (_tileiras_reason, "TILE_REQUIRE_TILEIRAS"),
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or fail, when required) tests whose hardware or toolchain is missing."""
    for marker, (probe, require_var) in _PROBES.items():
        if item.get_closest_marker(marker) is None:
            continue
        reason = probe()
        if reason is None:
            continue
        required = _flag(require_var) or (marker == "requires_tileiras" and _flag("TILE_REQUIRE_GPU"))
        if required:
            pytest.fail(f"{marker} test cannot run: {reason} ({require_var}=1 forbids skipping)", pytrace=False)
        pytest.skip(reason)
