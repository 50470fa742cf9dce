"""Backend selection: kernels run on the GPU (tile.core + tileiras) or on the CPU interpreter (tile.ir.interp).

Invariants: the choice is made once per process, lazily: ``tile.set_backend`` wins, then ``TILE_INTERPRET`` /
``TILE_BACKEND``, then auto-detection (GPU when a CUDA device is visible, else CPU with a one-line notice on
stderr). New tensors are allocated on the chosen backend; a launch runs where its arguments live. Choosing the CPU
backend also makes the host ``tile.aio``'s process-wide default device, so ``.sync()`` and ``await`` on any op
(combinators included, from any thread) need no GPU.
"""

from __future__ import annotations

import sys

import tile.aio
from tile.frontend import _knobs
from tile.frontend._errors import BackendError

__all__ = ["backend", "gpu_available", "set_backend"]

_BACKENDS = ("cpu", "gpu")
_chosen: str | None = None


def gpu_available() -> bool:
    """True when a CUDA driver and at least one device are usable (never raises)."""
    import tile.bindings as tb

    try:
        return tb.driver_available() and tb.device_count() > 0
    except tb.TileError:
        return False


def set_backend(name: str) -> None:
    """Choose where kernels run and tensors live: ``"cpu"`` (the interpreter) or ``"gpu"``.

    Tensors made before the switch stay where they are; launching them on the other backend is a `BackendError`.
    """
    global _chosen  # noqa: PLW0603  # the process-wide backend, set once or by this explicit call
    if name not in _BACKENDS:
        raise BackendError(f"unknown backend {name!r}: use 'cpu' or 'gpu'")
    if name == "gpu" and not gpu_available():
        raise BackendError("no CUDA GPU is visible here: use tile.set_backend('cpu') to run on the interpreter")
    _chosen = name
    tile.aio.set_default_device("host" if name == "cpu" else "cuda", process=True)


def backend() -> str:
    """The current backend, ``"cpu"`` or ``"gpu"`` (resolved on first use, see the module docstring)."""
    if _chosen is not None:
        return _chosen
    choice = _knobs.backend_choice()
    if choice == "auto":
        choice = "gpu" if gpu_available() else "cpu"
        if choice == "cpu" and not _knobs.quiet():
            print("tile: no GPU found; running kernels on the CPU interpreter (TILE_INTERPRET=1)", file=sys.stderr)
    set_backend(choice)
    return choice
