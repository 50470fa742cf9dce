"""The environment variables tile-async reads, typed, in one place (nothing else reads ``os.environ``).

``TILE_AIO_SPIN_US``: how long ``await op`` polls for completion before handing the wait to a waiter thread
(microseconds, default 20; 0 disables the spin).
``TILE_AIO_POOL_SIZE``: streams in a device's default round-robin pool (default 4).
``TILE_AIO_DEVICE``: the default device when none is chosen: ``cuda:N`` (default ``cuda:0``) or ``host``.
Values are read at call time, so tests and long-lived processes see changes.
"""

from __future__ import annotations

import os

from tile.aio._errors import KnobError

__all__ = ["default_device_spec", "pool_size", "spin_budget_ns"]


def _int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise KnobError(name, raw, f"an integer >= {minimum}") from None
    if value < minimum:
        raise KnobError(name, raw, f"an integer >= {minimum}")
    return value


def spin_budget_ns() -> int:
    """Return ``TILE_AIO_SPIN_US`` in nanoseconds."""
    return _int("TILE_AIO_SPIN_US", 20, 0) * 1000


def pool_size() -> int:
    """Return ``TILE_AIO_POOL_SIZE``."""
    return _int("TILE_AIO_POOL_SIZE", 4, 1)


def default_device_spec() -> str:
    """Return ``TILE_AIO_DEVICE`` (``cuda:0`` when unset); its syntax is checked where it is parsed."""
    return os.environ.get("TILE_AIO_DEVICE", "").strip() or "cuda:0"
