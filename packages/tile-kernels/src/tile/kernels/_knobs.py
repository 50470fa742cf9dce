"""The environment variables tile-kernels reads, typed, in one place (nothing else here reads ``os.environ``).

``TILE_AUTOTUNE``: ``1`` (default) times the candidate configs of a kernel the first time it meets a shape bucket on
the GPU and keeps the winner; ``0`` always uses the kernel's deterministic default config.
``TILE_QUIET``: ``1`` silences the one-line notice printed while a kernel is being tuned.
The autotuner's records live under the compile cache directory (``TILE_CACHE_DIR``, see `tile.compiler.knobs`);
when that cache is off, winners are kept in memory only.
"""

from __future__ import annotations

import os
from pathlib import Path

from tile.compiler import knobs as compiler_knobs
from tile.frontend import ArgumentError

__all__ = ["autotune_enabled", "cache_dir", "cache_shared", "quiet"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in _TRUE | _FALSE:
        raise ArgumentError(f"{name}={raw!r} is not a boolean; set it to 1 or 0")
    return value in _TRUE


def autotune_enabled() -> bool:
    """Return ``TILE_AUTOTUNE`` (default on)."""
    return _flag("TILE_AUTOTUNE", True)


def quiet() -> bool:
    """Return ``TILE_QUIET``."""
    return _flag("TILE_QUIET", False)


def cache_shared() -> bool:
    """Return ``TILE_CACHE_SHARED`` (see `tile.compiler.knobs`): also trust root-owned cache folders and files."""
    return compiler_knobs().cache_shared


def cache_dir() -> Path | None:
    """Where autotuning records go: ``<TILE_CACHE_DIR>/autotune``, or None when the disk cache is off."""
    base = compiler_knobs().cache_dir
    return None if base is None else base / "autotune"
