"""The environment variables tile-bindings reads, typed, in one place (nothing else reads ``os.environ``).

``TILE_TILEIRAS``: an explicit path to the ``tileiras`` assembler, searched first.
``CUDA_HOME``: a CUDA toolkit root, searched last for ``bin/tileiras``.
``PATH``: searched for ``tileiras`` between the pip package and ``CUDA_HOME``.
Values are read at call time so tests and long-lived processes see changes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["cuda_home", "search_path", "tileiras_override", "tool_environment"]


def _path(name: str, environ: Mapping[str, str] | None) -> Path | None:
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return Path(value).expanduser() if value else None


def tileiras_override(environ: Mapping[str, str] | None = None) -> Path | None:
    """Return ``TILE_TILEIRAS`` as a path, or None when unset or empty (``environ`` defaults to ours)."""
    return _path("TILE_TILEIRAS", environ)


def cuda_home(environ: Mapping[str, str] | None = None) -> Path | None:
    """Return ``CUDA_HOME`` as a path, or None when unset or empty (``environ`` defaults to ours)."""
    return _path("CUDA_HOME", environ)


def search_path(environ: Mapping[str, str] | None = None) -> str | None:
    """Return ``PATH`` (None when unset), for ``shutil.which`` (``environ`` defaults to ours)."""
    return (os.environ if environ is None else environ).get("PATH")


def tool_environment() -> dict[str, str]:
    """Return the environment for running ``tileiras``: ours without ``CUDA_HOME``.

    tileiras 13.5 fails with "failed to compile Tile IR program" under a foreign ``CUDA_HOME``; without it, it
    finds its own ``ptxas`` and ``libnvvm`` beside itself.
    """
    return {key: value for key, value in os.environ.items() if key != "CUDA_HOME"}
