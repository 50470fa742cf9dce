"""Which kernel-launch path tile.frontend takes on this machine, for ``tile-doctor``: compiled or pure Python.

tile.frontend's repeated-launch hot path is a C extension (``tile/frontend/_fastlaunch*.so``, built by the package's
build hook) with a pure-Python fallback that ``TILE_PURE_PYTHON=1`` forces (see ``tile.frontend._accel``). This layer
sits below tile.frontend and must not import it, so it finds and loads the extension file itself.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path

__all__ = ["PURE_ENV", "launch_path"]

PURE_ENV = "TILE_PURE_PYTHON"  # the same switch tile.frontend._accel reads


def _extensions() -> list[Path]:
    import tile

    found: list[Path] = []
    for root in tile.__path__:
        found.extend(sorted(Path(root, "frontend").glob("_fastlaunch*.so")))
    return found


def launch_path() -> str:
    """One line: ``compiled (<file>)`` or ``pure Python (<why>)``. Never raises."""
    forced = os.environ.get(PURE_ENV, "").strip()
    if forced not in ("", "0"):
        return f"pure Python ({PURE_ENV}={forced} forces it)"
    try:
        paths = _extensions()
    except Exception as exc:  # a report never raises
        return f"unknown (the tile namespace could not be searched: {exc})"
    if not paths:
        return (
            "pure Python (the compiled extension tile/frontend/_fastlaunch is not built: reinstall tile-frontend "
            "with a C compiler present)"
        )
    path = paths[0]
    try:
        loader = importlib.machinery.ExtensionFileLoader("tile.frontend._fastlaunch", str(path))
        spec = importlib.util.spec_from_file_location("tile.frontend._fastlaunch", path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        if not hasattr(module, "admit_move"):
            return f"pure Python ({path} has no admit_move: rebuild tile-frontend)"
    except Exception as exc:  # an unloadable build (wrong architecture, missing symbol)
        return f"pure Python ({path} does not load: {exc})"
    return f"compiled ({path})"
