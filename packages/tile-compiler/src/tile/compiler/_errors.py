"""The root of tile-compiler's errors, shared by both of Tile's error hierarchies.

Tile has two bottom layers that share no package: tile-ir (the toolchain stack's root ``tile.ir.TileError``) and
tile-bindings (the runtime stack's root ``tile.bindings.TileError``). tile-compiler is the first layer that sees
both, so its errors derive from both roots: code written against the runtime stack (tile.frontend users catching
``tile.frontend.TileError``) and code written against tile-ir alike catch a compile error without knowing which
layer raised it.
"""

from __future__ import annotations

import tile.bindings
import tile.ir

__all__ = ["TileError"]


class TileError(tile.ir.TileError, tile.bindings.TileError):
    """Root of every error tile-compiler raises; an instance of both ``tile.ir.TileError`` and
    ``tile.bindings.TileError``."""
