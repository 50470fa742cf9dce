"""``@tile.function``: marks a Python function as a device helper that kernels inline at each call.

Invariant: the decorator returns the same function object (still callable from Python) with the marker attribute
``__tile_function__`` set; the compiler inlines only marked functions, so an unmarked call is a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["MARKER", "function", "is_function"]

MARKER = "__tile_function__"
F = TypeVar("F", bound=Callable[..., object])


def function(fn: F) -> F:
    """Mark ``fn`` as a device helper that kernels may call; it is inlined at each call site.

    Parameters
    ----------
    fn
        A plain Python function whose body uses only the kernel language.

    Returns
    -------
    The same function, marked.
    """
    setattr(fn, MARKER, True)
    return fn


def is_function(obj: object) -> bool:
    """True for functions marked with `function`."""
    return callable(obj) and getattr(obj, MARKER, False) is True
