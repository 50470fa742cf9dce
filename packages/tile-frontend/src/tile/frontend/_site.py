"""Where user code called into tile.frontend: the ``file:line`` that ownership errors name.

Invariant: the reported frame is the innermost one outside Tile's packages (every ``tile`` package directory:
tile.frontend, tile.aio, whose combinators call back into it, and the libraries on top such as tile.kernels) and
outside ``contextlib`` (whose context managers, ``tile.partitioned`` in an ``ExitStack``, exit for the caller), so
messages point at the user's launch or partition line however deep the call.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import tile
import tile.aio

__all__ = ["OURS", "user_site"]

OURS = tuple(
    dict.fromkeys(
        [
            str(Path(__file__).resolve().parent),
            str(Path(tile.aio.__file__ or ".").resolve().parent),
            *(str(Path(p).resolve()) + "/" for p in tile.__path__),  # every installed tile package (namespace dirs)
            str(Path(contextlib.__file__ or ".").resolve()),
        ]
    )
)


_IS_OURS: dict[str, bool] = {}
"""Whether a file name lies under `OURS`, per file name seen: a pure function of the name (OURS is fixed at import),
so an entry can never go stale. It spares the prefix tests of each frame of each walk (a view made inside a
tile.kernels call walks half a dozen of Tile's frames)."""


def _ours(filename: str) -> bool:
    found = _IS_OURS.get(filename)
    if found is None:
        found = _IS_OURS[filename] = filename.startswith(OURS)
    return found


def user_site() -> str:
    """Return ``"file:line"`` of the innermost caller outside tile.frontend and tile.aio."""
    frame = sys._getframe(1)
    is_ours = _IS_OURS.get
    while frame.f_back is not None:
        filename = frame.f_code.co_filename
        ours = is_ours(filename)
        if ours is None:
            ours = _ours(filename)
        if not ours:
            break
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
