"""The package map's one-way dependencies hold at import time.

Each package is imported in a fresh interpreter and the modules it pulled in are checked: nothing from a
layer above it (or from the other stack), and for ``tile.ir`` nothing from CUDA or numpy at all, so the
standalone toolkit stays pure Python.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Import name -> the Tile packages it may load (itself included), per docs/architecture.md.
# tile.errors (the one error root and the shared guards on trusted handles) sits under both stacks and loads nothing.
_FRONTEND = {"tile.errors", "tile.ir", "tile.bindings", "tile.core", "tile.aio", "tile.compiler", "tile.frontend"}
ALLOWED = {
    "tile.errors": {"tile.errors"},
    "tile.ir": {"tile.errors", "tile.ir"},
    "tile.bindings": {"tile.errors", "tile.bindings"},
    "tile.core": {"tile.errors", "tile.bindings", "tile.core"},
    "tile.aio": {"tile.errors", "tile.bindings", "tile.core", "tile.aio"},
    "tile.compiler": {"tile.errors", "tile.ir", "tile.bindings", "tile.compiler"},
    "tile.frontend": _FRONTEND,
    "tile.kernels": _FRONTEND | {"tile.kernels"},
}
TILE_PACKAGES = set(ALLOWED)


def _modules_after_import(name: str) -> set[str]:
    code = f"import json, sys; import {name}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def _tile_packages_in(modules: set[str]) -> set[str]:
    return {pkg for pkg in TILE_PACKAGES if any(m == pkg or m.startswith(pkg + ".") for m in modules)}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_package_loads_only_its_own_layers(name: str) -> None:
    loaded = _tile_packages_in(_modules_after_import(name))
    assert name in loaded
    assert loaded <= ALLOWED[name], f"{name} pulled in {sorted(loaded - ALLOWED[name])}"


def test_tile_ir_loads_no_cuda_and_no_numpy() -> None:
    modules = _modules_after_import("tile.ir")
    offenders = sorted(m for m in modules if m.split(".")[0] in {"cuda", "numpy", "ml_dtypes", "nvidia"})
    assert offenders == []


def test_tile_is_a_namespace_package() -> None:
    code = "import tile, json; print(json.dumps([getattr(tile, '__file__', None), len(list(tile.__path__))]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    file, n_paths = json.loads(out.stdout)
    assert file is None, "a tile/__init__.py exists somewhere: `tile` must stay a PEP 420 namespace"
    assert n_paths >= 1
