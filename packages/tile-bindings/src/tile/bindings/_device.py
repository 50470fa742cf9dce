"""Driver and device queries: count, handles, names, attributes, memory, driver version.

Invariants: every query initialises the driver lazily and goes through :func:`check`; a device ordinal
outside ``[0, device_count())`` raises :class:`InvalidDeviceError` before any driver call that would use it;
attribute names are the ``CU_DEVICE_ATTRIBUTE_*`` suffixes, case-insensitive.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from tile.bindings._driver import check, driver
from tile.bindings._errors import TileError

__all__ = [
    "InvalidDeviceError",
    "compute_capability",
    "device_attribute",
    "device_count",
    "device_handle",
    "device_name",
    "device_total_memory",
    "driver_version",
    "set_query_guard",
]

_GUARD: list[Callable[[], None] | None] = [None]  # run before each query's driver calls (`set_query_guard`)


def set_query_guard(guard: Callable[[], None] | None) -> None:
    """Run ``guard()`` before the driver calls of every query of this module (None: no guard); it raises to refuse.

    tile.core sets one that raises ``HostFunctionError`` inside a CUDA host function, where CUDA forbids driver calls
    (it fails them or deadlocks): these queries are what ``tile.core.Device`` asks the driver for its ordinal, name,
    attributes and memory. The raw ``driver()`` module is not guarded: its calls are the caller's own.
    """
    _GUARD[0] = guard


def _driver() -> Any:
    """`driver`, after the guard (`set_query_guard`)."""
    guard = _GUARD[0]
    if guard is not None:
        guard()
    return driver()


class InvalidDeviceError(TileError, ValueError):
    """A device ordinal or attribute name that does not exist on this machine."""


def driver_version() -> tuple[int, int]:
    """Return the CUDA version the driver supports, as ``(major, minor)`` (e.g. ``(13, 0)`` for driver 580)."""
    version = int(check(_driver().cuDriverGetVersion(), "cuDriverGetVersion"))
    return version // 1000, (version % 1000) // 10


def device_count() -> int:
    """Return how many CUDA devices are visible."""
    return int(check(_driver().cuDeviceGetCount(), "cuDeviceGetCount"))


def device_handle(ordinal: int) -> Any:
    """Return the ``CUdevice`` for ``ordinal``.

    Raises
    ------
    InvalidDeviceError
        When ``ordinal`` is not an int in ``[0, device_count())``.
    """
    count = device_count()
    given = ordinal
    # An exact int: an int subclass's comparisons could pass any ordinal (operator.index copies its true value).
    ordinal = operator.index(given) if isinstance(given, int) and not isinstance(given, bool) else -1
    if not 0 <= ordinal < count:
        raise InvalidDeviceError(
            f"device {given!r} does not exist: this machine has {count} device(s), ordinals 0..{count - 1}; "
            "check CUDA_VISIBLE_DEVICES"
        )
    return check(_driver().cuDeviceGet(ordinal), "cuDeviceGet")


def _attribute_enum(name: str) -> Any:
    module = _driver()
    key = "CU_DEVICE_ATTRIBUTE_" + name.upper().removeprefix("CU_DEVICE_ATTRIBUTE_")
    try:
        return getattr(module.CUdevice_attribute, key)
    except AttributeError:
        raise InvalidDeviceError(
            f"unknown device attribute {name!r}: use a CU_DEVICE_ATTRIBUTE_* suffix such as 'multiprocessor_count'"
        ) from None


def device_attribute(ordinal: int, name: str) -> int:
    """Return one device attribute.

    Parameters
    ----------
    ordinal : int
        The device.
    name : str
        A ``CU_DEVICE_ATTRIBUTE_*`` name or its suffix, any case: ``"multiprocessor_count"``, ``"L2_CACHE_SIZE"``.
    """
    handle = device_handle(ordinal)
    return int(check(_driver().cuDeviceGetAttribute(_attribute_enum(name), handle), "cuDeviceGetAttribute"))


def device_name(ordinal: int) -> str:
    """Return the device's marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
    raw = check(_driver().cuDeviceGetName(256, device_handle(ordinal)), "cuDeviceGetName")
    return bytes(raw).split(b"\0", 1)[0].decode(errors="replace")


def compute_capability(ordinal: int) -> tuple[int, int]:
    """Return ``(major, minor)``, e.g. ``(9, 0)`` for an H100."""
    return (
        device_attribute(ordinal, "compute_capability_major"),
        device_attribute(ordinal, "compute_capability_minor"),
    )


def device_total_memory(ordinal: int) -> int:
    """Return the device's total memory in bytes."""
    return int(check(_driver().cuDeviceTotalMem(device_handle(ordinal)), "cuDeviceTotalMem"))
