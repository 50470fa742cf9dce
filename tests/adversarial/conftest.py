"""Fixtures shared by the adversarial reviews: ``path`` runs a test once per launch path (the pure-Python one, and the
compiled one where the extension is built), switched in-process and restored after; ``gpu`` runs a test on the GPU
backend and restores the CPU one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tile.frontend as tile
from tile.frontend import _accel

PATHS = ["pure", pytest.param("compiled", marks=pytest.mark.skipif(_accel.compiled() is None, reason=_accel.reason()))]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs once per launch path, switched in-process and restored after."""
    previous = _accel.use(request.param)
    yield request.param
    _accel.use(previous)


@pytest.fixture
def gpu() -> Iterator[None]:
    """The test runs on the GPU backend; the CPU one is restored after."""
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")
