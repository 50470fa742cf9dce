"""Repository-wide pytest configuration: the `gpu`, `multi_gpu`, `requires_tileiras` and `requires_cutile` markers,
the `missing` fixture and the `race` fixture; tests marked `gpu`/`multi_gpu` run on tile.frontend's GPU backend.

The resources are probed once per session, and only when a collected test asks for them. A test whose
resource is missing is skipped, unless the matching "require" variable is set, in which case it fails:
``TILE_REQUIRE_GPU=1`` on the GPU machine (a GPU run that silently skips is no GPU run),
``TILE_REQUIRE_TILEIRAS=1`` in CI, where tier 2 (tileiras without a GPU) must really run, and
``TILE_REQUIRE_CUTILE=1`` wherever cuTile Python (``cuda-tile``, the peer whose exports tile.ir's tests read) is a
declared test dependency (nox sets it for those packages; scripts/dev.sh sets it). A test that finds a narrower
piece missing (the pip distribution of tileiras, tileirdisasm beside it) calls the `missing` fixture, which obeys
the same variables instead of skipping unconditionally.
``TILE_REQUIRE_MULTI_GPU=1`` on a 2-GPU machine (its own variable: a one-GPU run with ``TILE_REQUIRE_GPU=1`` skips the
``multi_gpu`` tests).

The markers themselves are registered once, in the root ``pyproject.toml``.

Compiled kernels go to a fresh temporary disk cache (``TILE_CACHE_DIR``), one per pytest process (each xdist worker
has its own), removed at the end: the suite never reads or fills the user's ``~/.cache/tile``, and a stale entry
there cannot hide a compiler change. Tests that need a particular cache still set their own.

``race`` tests a check-then-act step for thread safety: `Race.meet_in` makes a function wait until two threads are
inside it (at most a timeout), and `Race.run` runs a call in two threads at once. Placed between a state test and
the state change, the meeting point makes an unguarded step fail every time (both threads pass the test) and a
guarded one pass (the guard keeps the second thread out, the wait times out, and the second thread then sees the
changed state).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import pytest

_TEST_CACHE: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point the compiler's disk cache at a temporary folder for this pytest process (see the module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="tile-test-cache-"))
    _TEST_CACHE.append(folder)
    os.environ["TILE_CACHE_DIR"] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _TEST_CACHE:
        shutil.rmtree(_TEST_CACHE.pop(), ignore_errors=True)


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


@functools.cache
def _multi_gpu_reason() -> str | None:
    """Return why two GPUs cannot be used, or None when they can."""
    if (reason := _gpu_reason()) is not None:
        return reason
    from cuda.bindings import driver

    _, count = driver.cuDeviceGetCount()
    return None if count >= 2 else f"only {count} CUDA device(s); multi_gpu tests need 2"


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


@functools.cache
def _cutile_reason() -> str | None:
    if importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.tile") is not None:
        return None
    return "cuTile Python is not installed (pip install cuda-tile)"


_PROBES = {
    "gpu": (_gpu_reason, "TILE_REQUIRE_GPU"),
    "multi_gpu": (_multi_gpu_reason, "TILE_REQUIRE_MULTI_GPU"),
    "requires_tileiras": (_tileiras_reason, "TILE_REQUIRE_TILEIRAS"),
    "requires_cutile": (_cutile_reason, "TILE_REQUIRE_CUTILE"),
}


def pytest_report_header(config: pytest.Config) -> str:
    """Which tile.frontend launch path this run takes (compiled, or pure Python: ``TILE_PURE_PYTHON=1``)."""
    try:
        from tile.frontend import _accel
    except ImportError as exc:  # a package's own environment without tile-frontend
        return f"tile launch path: n/a ({exc})"
    return f"tile launch path: {_accel.reason()}"


def _skip_or_fail(marker: str, reason: str) -> NoReturn:
    """Skip for `reason`, or fail when the variable requiring `marker`'s resource is set."""
    require_var = _PROBES[marker][1]
    required = _flag(require_var) or (marker == "requires_tileiras" and _flag("TILE_REQUIRE_GPU"))
    if required:
        pytest.fail(f"{marker} test cannot run: {reason} ({require_var}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (or fail, when required) tests whose hardware or toolchain is missing."""
    for marker, (probe, _require_var) in _PROBES.items():
        if item.get_closest_marker(marker) is None:
            continue
        reason = probe()
        if reason is not None:
            _skip_or_fail(marker, reason)


@pytest.fixture(autouse=True)
def _gpu_tests_run_on_the_gpu(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``gpu`` or ``multi_gpu`` runs on tile.frontend's GPU backend, whatever an earlier test in this
    process chose (the packages' fixtures switch to the CPU interpreter, and a GPU test that found it kept would time
    the interpreter or pass without touching the GPU); the previous backend is restored after."""
    marked = request.node.get_closest_marker("gpu") or request.node.get_closest_marker("multi_gpu")
    if marked is None or importlib.util.find_spec("tile.frontend") is None:
        yield
        return
    import tile.frontend as tile

    previous = tile.backend()
    tile.set_backend("gpu")
    try:
        yield
    finally:
        tile.set_backend(previous)


@pytest.fixture
def missing() -> Callable[[str, str], NoReturn]:
    """``missing(marker, reason)``: skip the test, or fail it when `marker`'s resource is required here."""
    return _skip_or_fail


class Race:
    """Two threads at once (see the module docstring)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, timeout: float = 0.3) -> None:
        self._monkeypatch, self._timeout = monkeypatch, timeout

    def meet_in(self, owner: Any, name: str) -> list[Any]:
        """Patch ``owner.name`` so each call waits until a second one is inside it (or the timeout passes); return
        the first argument of every call, in call order (for a method: the object it was called on)."""
        inside, real = threading.Barrier(2), getattr(owner, name)
        seen: list[Any] = []

        def meeting(*args: Any, **kwargs: Any) -> Any:
            seen.append(args[0] if args else None)
            with contextlib.suppress(threading.BrokenBarrierError):  # timed out: a guard kept the other thread out
                inside.wait(timeout=self._timeout)
            return real(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, meeting)
        return seen

    def run(self, call: Callable[[], Any]) -> list[Any]:
        """Call ``call`` in two threads released together; each result is its return value or the exception it
        raised (one per thread)."""
        start = threading.Barrier(2)

        def started() -> Any:
            start.wait()
            return call()

        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(started) for _ in range(2)]
        return [f.exception() or f.result() for f in futures]


@pytest.fixture
def race(monkeypatch: pytest.MonkeyPatch) -> Race:
    """Two-thread interleavings of a check-then-act step (see `Race`)."""
    return Race(monkeypatch)
