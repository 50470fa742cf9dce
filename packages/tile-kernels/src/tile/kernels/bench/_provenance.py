"""Where a measurement came from: the device, the backend, the versions, the time, the run's settings."""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
from typing import Any

import tile.frontend as tile

__all__ = ["DISTRIBUTIONS", "device_name", "provenance", "versions"]

DISTRIBUTIONS = (
    "tile-errors",
    "tile-bindings",
    "tile-core",
    "tile-async",
    "tile-ir",
    "tile-compiler",
    "tile-frontend",
    "tile-kernels",
    "cuda-tile",
    "cuda-bindings",
    "nvidia-cuda-tileiras",
    "torch",
    "numpy",
)
"""The distributions whose versions `versions` records (None for one not installed)."""


def versions() -> dict[str, str | None]:
    """Python's version and each of `DISTRIBUTIONS`' (None when not installed)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def device_name() -> str:
    """The GPU's name on the GPU backend; ``"CPU interpreter (<machine>)"`` on the CPU backend."""
    if tile.backend() == "cpu":
        return f"CPU interpreter ({platform.machine() or 'unknown machine'})"
    import tile.core as tc

    return str(tc.Device(0).name)


def provenance(**settings: Any) -> dict[str, Any]:
    """The device, backend, versions and UTC time now, with ``settings`` (the run's seed, order, ...)."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {"device": device_name(), "backend": tile.backend(), "versions": versions(), "time": now, **settings}
