"""Fixtures of the tile-frontend tests: the CPU backend, the kernel modules of ``tests/kernels`` by path, and
``path``, which runs a test once per launch path (pure Python, and compiled where the extension is built).

Kernel modules are kernel-language source (shape strings are const generics, not Python names), so they live in
``tests/kernels`` and are loaded here by path instead of being imported by the typed test modules.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import tile.frontend as tile
from tile.frontend import _accel

KERNELS = Path(__file__).resolve().parent / "kernels"


def load_kernels(name: str) -> ModuleType:
    """Import ``tests/kernels/<name>.py`` once and return the module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, KERNELS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _cpu_backend(request: pytest.FixtureRequest) -> None:
    """Every test not marked gpu (or multi_gpu) runs on the CPU interpreter backend."""
    if request.node.get_closest_marker("gpu") is None and request.node.get_closest_marker("multi_gpu") is None:
        tile.set_backend("cpu")


@pytest.fixture(scope="session")
def k() -> ModuleType:
    """The frontend test kernels (``tests/kernels/fe_kernels.py``)."""
    return load_kernels("fe_kernels")


@pytest.fixture(scope="session")
def sk() -> ModuleType:
    """The sub-tile test kernels (``tests/kernels/subtile_kernels.py``)."""
    return load_kernels("subtile_kernels")


@pytest.fixture(scope="session")
def gk() -> ModuleType:
    """The tuple-parameter test kernels (``tests/kernels/group_kernels.py``)."""
    return load_kernels("group_kernels")


@pytest.fixture(scope="session")
def globk() -> ModuleType:
    """The compile-time globals test kernels (``tests/kernels/global_kernels.py``)."""
    return load_kernels("global_kernels")


@pytest.fixture(scope="session")
def gather_k() -> ModuleType:
    """The checked-gather test kernels (``tests/kernels/gather_kernels.py``)."""
    return load_kernels("gather_kernels")


_BUILT = pytest.mark.skipif(_accel.compiled() is None, reason=_accel.reason())


@pytest.fixture(params=["pure", pytest.param("compiled", marks=_BUILT)])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs once per launch path, switched in-process and restored after."""
    previous = _accel.use(request.param)
    yield request.param
    _accel.use(previous)
