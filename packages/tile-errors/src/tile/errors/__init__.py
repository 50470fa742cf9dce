"""The one root of every error Tile raises.

Tile has two bottom layers that share no other package: tile-ir (pure Python, no CUDA) and tile-bindings (the CUDA
driver). Both derive every exception they define from `TileError`, and every package above them re-exports this
same class as its own ``TileError``, so ``except tile.frontend.TileError`` catches whatever any Tile package raised:
a verifier error, an interpreter data race, a compile error or a driver error. ``except`` matches on the real class
hierarchy (``__mro__``), not on virtual subclasses, which is why the root is one class in one tiny package instead of
a root per stack joined afterwards.

Invariants: this package imports nothing and defines nothing else; each concrete error also derives from the builtin a
caller would naturally catch (``ValueError``, ``TypeError``, ``RuntimeError``...), so ``except`` clauses written
against the builtin keep working.
"""

from __future__ import annotations

__all__ = ["TileError"]


class TileError(Exception):
    """Root of every error any Tile package raises (tile-ir, tile-bindings, tile-core, tile-async, tile-compiler,
    tile-frontend); each package re-exports it as its own ``TileError``."""
