"""Fixtures shared by the adversarial reviews: ``path`` runs a test once per launch path (the pure-Python one, and the
compiled one where the extension is built), switched in-process and restored after; ``gpu`` runs a test on the GPU
backend and restores the CPU one; ``sim`` is tile.core's simulated driver in its strict form (asynchronous, nothing
run before something waits for it, and at the end no driver bug seen and no deferred release left), ``vec_add`` its
built-in kernel; ``kernels`` is a module holding ``scale_by_const`` (``z = x * c`` for a ``Const[float]`` ``c``). A
review that needs another simulator or other kernels defines its own ``sim`` or ``kernels``."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import tile.core as tc
import tile.frontend as tile
from tile.aio import HostStream
from tile.aio.testing import interrupted_waits
from tile.core import _reaper
from tile.core.testing import SimDriver, simulated, sm90_cubin
from tile.frontend import _accel

if str(Path(__file__).parent) not in sys.path:  # the sibling helpers, also when one test file runs alone
    sys.path.insert(0, str(Path(__file__).parent))

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


SCALE_BY_CONST = """
import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32


@tile.entry
def scale_by_const(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], c: Const[float]):
    z.store(tile.load_tile_like(x, z) * c)
"""


@pytest.fixture(scope="module")
def kernels(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``scale_by_const`` compiled from a file of its own per test module."""
    from helpers_adversarial import load_source  # beside the tests (on sys.path above)

    name = f"{request.module.__name__.rsplit('.', 1)[-1]}_kernels"
    return load_source(name, SCALE_BY_CONST, tmp_path_factory.mktemp(name))


@pytest.fixture
def gated() -> Iterator[tuple[HostStream, threading.Event, list[int]]]:
    """`tile.aio.testing.interrupted_waits`: a gated worker host stream, and one interrupted ``synchronize()`` per
    entry of the list (the reviews of parked runs, 35 and 36, and ``test_frontend_interrupt.py``)."""
    with interrupted_waits() as gated:
        yield gated
