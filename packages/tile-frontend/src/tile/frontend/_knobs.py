"""The environment variables tile-frontend reads, typed, in one place (nothing else reads ``os.environ``).

``TILE_INTERPRET``: ``1`` runs every kernel on the CPU interpreter (the CPU backend), as ``tile.set_backend("cpu")``.
``TILE_BACKEND``: ``cpu``, ``gpu`` or ``auto`` (default): the backend when ``TILE_INTERPRET`` is not set.
``TILE_QUIET``: ``1`` silences the one-line notice printed when no GPU is found and the CPU backend is chosen.
Values are read when the backend is first resolved.
``TILE_DEBUG_GUARDS``: ``1`` compiles kernels (at their next compile for a new argument layout) with
``CompileOptions(debug_guards=True)``: a failed tile-index guard on the GPU prints which access failed.
``TILE_PDL``: ``1`` compiles every kernel (at its next compile for a new argument layout) as
``@tile.entry(pdl=True)``: programmatic dependent launch, each kernel waiting for its predecessors at entry (safe for
every kernel; for timing the overlap on a whole program, e.g. a decode step, without editing its kernels).
"""

from __future__ import annotations

import os

from tile.frontend._errors import BackendError

__all__ = ["backend_choice", "debug_guards", "pdl", "quiet"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_BACKENDS = ("auto", "cpu", "gpu")


def _flag(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw not in _TRUE | _FALSE:
        raise BackendError(f"{name}={raw!r} is not a boolean; set it to 1 or 0")
    return raw in _TRUE


def backend_choice() -> str:
    """Return ``"cpu"``, ``"gpu"`` or ``"auto"`` from ``TILE_INTERPRET`` and ``TILE_BACKEND``."""
    if _flag("TILE_INTERPRET"):
        return "cpu"
    raw = os.environ.get("TILE_BACKEND", "").strip().lower() or "auto"
    if raw not in _BACKENDS:
        raise BackendError(f"TILE_BACKEND={raw!r} is not one of {', '.join(_BACKENDS)}")
    return raw


def quiet() -> bool:
    """Return ``TILE_QUIET``."""
    return _flag("TILE_QUIET")


def debug_guards() -> bool:
    """Return ``TILE_DEBUG_GUARDS``."""
    return _flag("TILE_DEBUG_GUARDS")


def pdl() -> bool:
    """Return ``TILE_PDL``."""
    return _flag("TILE_PDL")
