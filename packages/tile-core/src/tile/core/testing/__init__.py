"""A simulated CUDA driver for testing code over the real ``tile.core`` on a machine without a GPU.

:func:`simulated` installs a :class:`SimDriver` as the ``cuda.bindings.driver`` that ``tile.bindings`` hands out (and
stands in for the ``cuda.core`` entry points tile.core uses: ``ObjectCode.from_cubin`` and ``Stream.from_handle``),
so ``Device``, ``Stream``, ``Event``, ``DeviceBuffer``, copies and launches are the real ones. Device memory is host
memory; the built-in ``vec_add`` kernel (and any kernel added with :meth:`SimDriver.add_kernel`) really moves bytes.

With ``asynchronous=True`` streams queue their work and run it only when the host synchronizes or queries, or when
a seeded scheduler runs some of it early on a later driver call: a missing wait or a too-early free then shows as
wrong bytes or an entry in :attr:`SimDriver.bugs` (a free while queued work still touches the memory, an access
outside every live allocation, or a driver call made inside a host function, which CUDA forbids). Tests should
assert ``driver.bugs == []`` at the end. Streams can be captured into graphs (``cuStreamBeginCapture`` ...
``cuGraphLaunch``, see ``tile.core.testing._graphs``): a captured graph's :class:`SimGraph` (``driver.graphs``,
``driver.execs``) lists its nodes, and each replay runs them on the launch stream.

Test tier only: nothing in ``tile.core`` imports this module.
"""

from __future__ import annotations

import gc
import struct
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

from tile.core.testing._driver import VEC_ADD_SIGNATURE, SimDriver, SimKernel, vec_add_body
from tile.core.testing._graphs import SimGraph
from tile.core.testing._streams import SimStreams, Work

__all__ = [
    "VEC_ADD_SIGNATURE",
    "SimDriver",
    "SimGraph",
    "SimKernel",
    "SimStreams",
    "Work",
    "counting_calls",
    "simulated",
    "sm90_cubin",
    "vec_add_body",
]


def sm90_cubin() -> bytes:
    """A CUDA ELF header (ABI 8, sm_90): all tile.core's arch check reads; the simulator loads any kernel from it."""
    header = bytearray(64)
    header[:4], header[4], header[5], header[8] = b"\x7fELF", 2, 1, 8
    struct.pack_into("<H", header, 18, 190)
    struct.pack_into("<I", header, 48, 90 << 8)
    return bytes(header)


def _core_fakes(sim: SimDriver) -> dict[str, Any]:
    """``cuda.core`` stand-ins: a cubin holding the simulator's kernels, and stream views."""

    def from_cubin(image: bytes, name: str = "") -> Any:
        def get_kernel(kernel_name: str) -> SimKernel:
            if kernel_name not in sim.kernels:
                raise RuntimeError("CUDA_ERROR_NOT_FOUND: named symbol not found")
            return sim.kernels[kernel_name]

        return SimpleNamespace(get_kernel=get_kernel)

    return {
        "ObjectCode": SimpleNamespace(from_cubin=from_cubin),
        "Stream": SimpleNamespace(from_handle=lambda handle: SimpleNamespace(handle=handle)),
    }


@contextmanager
def simulated(devices: int = 1, *, asynchronous: bool = False, seed: int = 0) -> Iterator[SimDriver]:
    """Run ``tile.core`` over a fresh :class:`SimDriver` inside the block; restore the real driver after it.

    On exit the simulator drains the work still queued and collects the devices, streams and buffers made inside
    (while it is installed), so no finalizer ever hands a simulated handle to a real driver. Not thread-safe
    against other users of tile.core: install it from a test, not from a library."""
    import cuda.core

    import tile.core as tc
    from tile.bindings import _driver
    from tile.core import _buffer, _reaper

    sim = SimDriver(devices, asynchronous=asynchronous, seed=seed)
    fakes = _core_fakes(sim)
    saved_state = (_driver._state.module, _driver._state.failure)
    saved_core = {name: getattr(cuda.core, name) for name in fakes}
    saved_instances, saved_deferred = tc.Device._instances, _buffer._deferred
    _driver._state.module, _driver._state.failure = sim, None  # type: ignore[assignment]  # a module stand-in
    tc.Device._instances, _buffer._deferred = {}, []
    for name, fake in fakes.items():
        setattr(cuda.core, name, fake)
    try:
        yield sim
    finally:
        tc.Device._instances.clear()
        gc.collect()
        _reaper.drain()  # handles the collection finalized release at a safe point (see tile.core._reaper)
        sim.drain_all()
        _driver._state.module, _driver._state.failure = saved_state
        tc.Device._instances, _buffer._deferred = saved_instances, saved_deferred
        for name, original in saved_core.items():
            setattr(cuda.core, name, original)


@contextmanager
def counting_calls(driver: Any) -> Iterator[Counter[str]]:
    """Count every driver call (``cu*``) made through ``driver`` inside the block, by name.

    ``driver`` is a :class:`SimDriver` or the real ``cuda.bindings.driver`` module (``tile.bindings.driver()``): its
    functions are wrapped for the block only, and the calls and their results are the driver's own. tile.core looks
    the driver's functions up at each call, except a `tile.core.PreparedLaunch`, which keeps ``cuLaunchKernel``:
    prepare the launches to count inside the block.
    """
    counts: Counter[str] = Counter()
    names = [name for name in dir(driver) if name.startswith("cu") and name[2:3].isupper()]
    own = {name: vars(driver)[name] for name in names if name in vars(driver)}

    def counted(name: str, call: Any) -> Any:
        def call_counted(*args: Any) -> Any:
            counts[name] += 1
            return call(*args)

        return call_counted

    for name in names:
        setattr(driver, name, counted(name, getattr(driver, name)))
    try:
        yield counts
    finally:
        for name in names:
            if name in own:
                setattr(driver, name, own[name])
            else:
                delattr(driver, name)
