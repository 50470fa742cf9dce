"""Where the ``tileiras`` assembler would be found, in the documented search order, without running a compile.

Order: ``TILE_TILEIRAS``, the pip package ``nvidia-cuda-tileiras`` (``nvidia/cu13/bin/tileiras``, located through
its distribution metadata so nothing under ``cuda``/``nvidia`` is imported), ``PATH``, ``$CUDA_HOME/bin``.
Invariants: discovery never raises and never imports CUDA; the version is read from the pip metadata when
that is where the binary came from, else from ``tileiras --version`` (a few milliseconds), else left unknown.
Running tileiras on Tile IR belongs to tile-compiler.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tile.bindings import _knobs

__all__ = ["TileirasLocation", "find_tileiras", "tileiras_candidates"]

_PIP_DISTRIBUTION = "nvidia-cuda-tileiras"
_PIP_RELATIVE = "nvidia/cu13/bin/tileiras"
_VERSION_RE = re.compile(r"release [0-9.]+, V([0-9][0-9.]*)")


@dataclass(frozen=True)
class TileirasLocation:
    """One place ``tileiras`` was looked for.

    Attributes
    ----------
    path : Path
        The candidate file.
    source : str
        Which rule produced it: ``"TILE_TILEIRAS"``, ``"nvidia-cuda-tileiras"``, ``"PATH"`` or ``"CUDA_HOME"``.
    usable : bool
        Whether it is an executable file.
    version : str or None
        Its version (``"13.5.37"``) when cheaply known.
    """

    path: Path
    source: str
    usable: bool
    version: str | None = None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _pip_candidate() -> tuple[Path, str] | None:
    try:
        dist = importlib.metadata.distribution(_PIP_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(_PIP_RELATIVE))), dist.version


def _probe_version(path: Path) -> str | None:
    try:
        done = subprocess.run(
            [str(path), "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
            env=_knobs.tool_environment(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = _VERSION_RE.search(done.stdout)
    return match.group(1) if match else None


def tileiras_candidates(
    *, probe_versions: bool = False, environ: Mapping[str, str] | None = None
) -> list[TileirasLocation]:
    """Return every place looked at, in search order (usable or not).

    Parameters
    ----------
    probe_versions : bool
        Run ``tileiras --version`` on usable candidates whose version the pip metadata does not give.
    environ : Mapping[str, str], optional
        Where ``TILE_TILEIRAS``, ``PATH`` and ``CUDA_HOME`` are read; this process's environment by default
        (tile-compiler passes the settings it was given).
    """
    raw: list[tuple[Path, str, str | None]] = []
    if override := _knobs.tileiras_override(environ):
        raw.append((override, "TILE_TILEIRAS", None))
    if pip := _pip_candidate():
        raw.append((pip[0], _PIP_DISTRIBUTION, pip[1]))
    if on_path := shutil.which("tileiras", path=_knobs.search_path(environ)):
        raw.append((Path(on_path), "PATH", None))
    if home := _knobs.cuda_home(environ):
        raw.append((home / "bin" / "tileiras", "CUDA_HOME", None))
    found = []
    for path, source, known in raw:
        usable = _is_executable(path)
        version = known if usable else None
        if usable and version is None and probe_versions:
            version = _probe_version(path)
        found.append(TileirasLocation(path, source, usable, version))
    return found


def find_tileiras(*, probe_version: bool = False) -> TileirasLocation | None:
    """Return the first usable ``tileiras`` in search order, or None when there is none.

    Parameters
    ----------
    probe_version : bool
        Fill in ``version`` by running ``tileiras --version`` when the pip metadata does not give it.
    """
    for candidate in tileiras_candidates():
        if candidate.usable:
            if probe_version and candidate.version is None:
                return TileirasLocation(candidate.path, candidate.source, True, _probe_version(candidate.path))
            return candidate
    return None
