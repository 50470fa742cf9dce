"""tile-compiler's error root: `tile.errors.TileError`, the one root of every Tile package's errors.

tile-compiler is the first layer that sees both of Tile's bottoms (tile-ir and tile-bindings); both derive their
errors from the same `tile.errors.TileError`, re-exported here unchanged, so ``tile.compiler.TileError is
tile.ir.TileError is tile.bindings.TileError`` and a compile error is caught by whichever spelling a caller uses.
"""

from __future__ import annotations

from tile.ir import TileError  # tile.errors.TileError, through the layer tile-compiler declares

__all__ = ["TileError"]
