"""Fixtures of the tile-kernels tests: the CPU backend for every test not marked ``gpu``, and a private autotune
cache directory so no test reads or writes the user's records."""

from __future__ import annotations

from pathlib import Path

import pytest

import tile.frontend as tile


@pytest.fixture(autouse=True)
def _cpu_backend(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("gpu") is None:
        tile.set_backend("cpu")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.mktemp("tile-cache")
    monkeypatch.setenv("TILE_CACHE_DIR", str(path))
    monkeypatch.setenv("TILE_QUIET", "1")
    return path
