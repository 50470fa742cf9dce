"""``python -m tile.ir`` and the ``tile-ir`` console script: see `tile.ir._cli`."""

from __future__ import annotations

import sys

from tile.ir._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
