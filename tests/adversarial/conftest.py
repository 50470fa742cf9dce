"""Fixtures shared by the adversarial reviews: ``path`` runs a test once per launch path (the pure-Python one, and the
compiled one where the extension is built), switched in-process and restored after; ``gpu`` runs a test on the GPU
backend and restores the CPU one; ``sim`` is tile.core's simulated driver in its strict form (asynchronous, nothing
run before something waits for it, and at the end no driver bug seen and no deferred release left), ``vec_add`` its
built-in kernel. A review that needs another simulator defines its own ``sim``."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import tile.core as tc
import tile.frontend as tile
from tile.core import _reaper
from tile.core.testing import SimDriver, simulated, sm90_cubin
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


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    """The simulated driver, lazily asynchronous; after the test every queue drained, every deferred release run."""
    with simulated(asynchronous=True) as driver:
        driver.eagerness = 0.0  # nothing runs before something waits for it
        yield driver
        gc.collect()
        _reaper.drain()
        driver.drain_all()
    assert driver.bugs == [], driver.bugs
    assert _reaper.pending() == 0, "a deferred release never ran"


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")
