"""Thin, checked access to the CUDA driver for the Tile runtime stack.

The driver is loaded and initialised lazily, on the first call that needs it, from any thread; importing this
package touches no driver. Every driver result goes through :func:`check`, which turns a failure into a
:class:`CudaError` carrying the ``CUresult`` code, its name, the driver's message and the call that failed.

Public API
----------
Errors
    :class:`TileError` (root of the runtime stack: bindings, core, aio), :class:`CudaError`,
    :class:`DriverNotFoundError`, :class:`InvalidDeviceError`.
Driver
    :func:`driver` (the initialised ``cuda.bindings.driver`` module), :func:`check`, :func:`error_for`,
    :func:`driver_available` (never raises), :func:`driver_unavailable_reason`, :func:`driver_version`.
Devices
    :func:`device_count`, :func:`device_handle`, :func:`device_attribute`, :func:`device_name`,
    :func:`compute_capability`, :func:`device_total_memory`.
Environment
    :func:`environment_report` (:class:`EnvironmentReport`, :class:`DeviceInfo`), :func:`find_tileiras`,
    :func:`tileiras_candidates` (:class:`TileirasLocation`); ``python -m tile.bindings`` / ``tile-doctor``.

Example
-------
>>> import tile.bindings as tb
>>> if tb.driver_available():
...     d = tb.driver()
...     count = tb.check(d.cuDeviceGetCount(), "cuDeviceGetCount")
"""

from tile.bindings._device import (
    InvalidDeviceError,
    compute_capability,
    device_attribute,
    device_count,
    device_handle,
    device_name,
    device_total_memory,
    driver_version,
    set_query_guard,
)
from tile.bindings._driver import check, driver, driver_available, driver_unavailable_reason, error_for
from tile.bindings._errors import CudaError, DriverNotFoundError, TileError
from tile.bindings._report import DeviceInfo, EnvironmentReport, environment_report
from tile.bindings._tileiras import TileirasLocation, find_tileiras, tileiras_candidates

__all__ = [
    "CudaError",
    "DeviceInfo",
    "DriverNotFoundError",
    "EnvironmentReport",
    "InvalidDeviceError",
    "TileError",
    "TileirasLocation",
    "check",
    "compute_capability",
    "device_attribute",
    "device_count",
    "device_handle",
    "device_name",
    "device_total_memory",
    "driver",
    "driver_available",
    "driver_unavailable_reason",
    "driver_version",
    "environment_report",
    "error_for",
    "find_tileiras",
    "set_query_guard",
    "tileiras_candidates",
]
