"""Which launch path runs: the compiled hot path (``_fastlaunch``, a C extension) or the pure-Python one.

Both paths do the same checks and moves on the same Python objects (the extension reads and writes the handles'
own slots), so they interoperate and accept and reject exactly the same calls; the compiled path handles only the
common case of a repeated launch and leaves every other call, and every error, to the pure path (`_plan`). The
extension is chosen when it was built (the package's build hook does it); ``TILE_PURE_PYTHON=1`` forces the pure
path, and `use` switches in-process (benchmarks and tests comparing both).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

__all__ = ["PURE_ENV", "active", "call", "claim_run", "compiled", "drop", "execute", "reason", "replay", "sync", "use"]

PURE_ENV = "TILE_PURE_PYTHON"
"""Set to ``1`` to force the pure-Python launch path."""


_FUNCTIONS = (
    *("bind", "bind_core", "bind_links", "bind_run", "call", "claim_run", "drop", "execute", "release_links"),
    *("replay", "run_links", "sync", "then"),
)
"""What this version of the Python side calls in the extension."""


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(PURE_ENV, "").strip() not in ("", "0"):
        return None, f"pure Python ({PURE_ENV}={os.environ[PURE_ENV]})"
    try:
        from tile.frontend import _fastlaunch  # type: ignore[attr-defined, unused-ignore]  # built or not
    except ImportError as error:
        return None, f"pure Python (the compiled extension is not built: {error})"
    missing = [name for name in _FUNCTIONS if not hasattr(_fastlaunch, name)]
    if missing:  # built from older sources (an editable install after a pull): never mix it with these modules
        where = getattr(_fastlaunch, "__file__", "?")
        return None, (
            f"pure Python (the compiled extension at {where} is stale: it lacks {', '.join(missing)}; "
            f"rebuild it with `python packages/tile-frontend/hatch_build.py` or reinstall tile-frontend)"
        )
    return _fastlaunch, "compiled"


_module, _reason = _load()
# The compiled functions while the compiled path is active, else None; each is read per launch (one module attribute).
call: Any = None
"""``_fastlaunch.call``: `Kernel.__call__` on the kernel's latest plan: the call site, then, holding `OWNERSHIP`,
`Plan.admit` + `Plan.hand_over` + the `Launch` (`_plan.launch_again`'s work in one step)."""
replay: Any = None
"""``_fastlaunch.replay``: `Plan.enqueue`'s packing and relaunch."""
drop: Any = None
"""``_fastlaunch.drop``: `Launch._drop`'s hand-back, under `OWNERSHIP`."""
execute: Any = None
"""``_fastlaunch.execute``: `Launch._execute` of a repeated GPU launch on the same context."""
sync: Any = None
"""``_fastlaunch.sync``: tile.aio's `run_sync` of a plain `Launch` (lock, claim, execute, wait, hand-back) in one step;
NotImplemented when the generic path must run it (it then raises the typed error)."""
claim_run: Any = None
"""``_fastlaunch.claim_run``: a ``.then()`` step's claim and execution of the launch its function returned, one step."""


def _activate(module: ModuleType | None) -> None:
    global call, replay, drop, execute, sync, claim_run  # noqa: PLW0603  # the process-wide path, read per launch
    call = module.call if module is not None else None
    claim_run = module.claim_run if module is not None else None
    sync = module.sync if module is not None else None
    replay = module.replay if module is not None else None
    drop = module.drop if module is not None else None
    execute = module.execute if module is not None else None
    from tile.aio import _combinators  # tile.aio's chains run their launches through this path too

    if module is None:
        _combinators.use_compiled(None, None)
    else:
        _combinators.use_compiled(module.run_links, module.release_links, module.then)


def compiled() -> ModuleType | None:
    """The loaded extension module (whether or not it is active), or None."""
    return _module


def active() -> str:
    """``"compiled"`` or ``"pure"``: the path launches take now."""
    return "compiled" if call is not None else "pure"


def reason() -> str:
    """Why the active path is active (for ``tile-doctor`` and bug reports)."""
    return "compiled (tile.frontend._fastlaunch)" if call is not None else _reason


def use(path: str) -> str:
    """Switch launches to ``"compiled"`` or ``"pure"``; return the previous path.

    Raises
    ------
    ValueError
        For another name, or ``"compiled"`` when the extension is not loaded (the message says why).
    """
    global _reason  # noqa: PLW0603  # why the process-wide path is what it is
    previous = active()
    if path == "pure":
        _activate(None)
        _reason = "pure Python (tile.frontend._accel.use('pure'))"
    elif path == "compiled":
        if _module is None:
            raise ValueError(f"the compiled launch path is not available: {_reason}")
        _activate(_module)
    else:
        raise ValueError(f"unknown launch path {path!r}: use 'compiled' or 'pure'")
    return previous


_BOUND = (
    *("Tensor", "Partition", "Shared", "Storage", "Plan", "Launch", "InFlight", "IN_FLIGHT", "PLAIN", "FOREIGN"),
    *("OURS", "OWNERSHIP", "NEG_ZERO"),
)


def bind(**classes: Any) -> None:
    """Give the extension the classes and registries it tests, the user-site prefixes and the ownership lock (called
    once by `_plan`), and activate it."""
    if _module is not None:
        from tile.aio import HOST, _cuda, _lock, _op, _run
        from tile.aio import _combinators as _c
        from tile.aio._context import BUILTIN_CONTEXTS
        from tile.bindings import check
        from tile.core import _launch, _reaper, _stream

        _module.bind(*(classes[name] for name in _BOUND))
        _module.bind_run(_lock._state, _run._note_waited_for, _op._CLAIMING, _cuda.CudaContext)
        _module.bind_core(_launch.PreparedLaunch, _stream.use_lock, _stream.invalidation, check, _reaper.RUNNING)
        _module.bind_links(_c._Link, _c.Then, _c.Map, _c._RETURNED, BUILTIN_CONTEXTS, HOST, _op._then_fate)
        if _reason == "compiled":
            _activate(_module)
