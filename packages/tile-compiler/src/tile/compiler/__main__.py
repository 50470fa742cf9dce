"""``python -m tile.compiler`` and the ``tile`` console script: the compile-only command line (see `_cli`)."""

from __future__ import annotations

from tile.compiler._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
