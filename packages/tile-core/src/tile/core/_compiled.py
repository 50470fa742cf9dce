"""Which `tile.core.launch` runs: the compiled one (``_fastcore``, an optional C extension) or the pure-Python one.

Both make the same checks in the same order and raise the same errors: the compiled launch handles only a launch that
repeats its function's planned launch with the very same objects on the plan's stream (see ``_fastcore.c``) and hands
every other call, unchanged, to the pure-Python `tile.core._launch.launch`. The extension is used when it was built
(tile-core's build hook, ``hatch_build.py``, does it); ``TILE_PURE_PYTHON=1`` (the switch tile.frontend reads too)
selects the pure-Python launch.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from tile.bindings import _driver, check
from tile.core._launch import launch as pure_launch
from tile.core._module import Function
from tile.core._plan import LaunchPlan
from tile.core._reaper import RUNNING
from tile.core._stream import invalidation, use_lock

__all__ = ["PURE_ENV", "bind", "compiled_launch", "launch", "reason"]

PURE_ENV = "TILE_PURE_PYTHON"
"""Set to ``1`` to run the pure-Python launch."""


def _load() -> tuple[Callable[..., None] | None, str]:
    forced = os.environ.get(PURE_ENV, "").strip()
    if forced not in ("", "0"):
        return None, f"pure Python ({PURE_ENV}={forced})"
    try:
        from tile.core import _fastcore  # type: ignore[attr-defined, unused-ignore]  # built or not
    except ImportError as error:
        return None, f"pure Python (the compiled extension is not built: {error})"
    bind(pure_launch)
    launch: Callable[..., None] = _fastcore.launch
    return launch, f"compiled ({_fastcore.__file__})"


def bind(fallback: Callable[..., None]) -> None:
    """Make ``fallback`` the launch the compiled one hands every other call to (tests count its calls with it)."""
    from tile.core import _fastcore  # type: ignore[attr-defined, unused-ignore]  # built: only with compiled_launch

    # ``_driver._state.module``: what ``tile.bindings.driver()`` returns once initialised (None before: the pure
    # path initialises it or raises), read without a Python call; LaunchPlan's slots are read by offset.
    _fastcore.bind(fallback, use_lock, invalidation, RUNNING, _driver._state, check, LaunchPlan, Function)


compiled_launch, reason = _load()
"""The compiled launch when it is in use, else None; and one line saying which launch runs and why."""
launch: Callable[..., None] = compiled_launch or pure_launch
