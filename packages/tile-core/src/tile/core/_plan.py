"""Launch plans: what a checked `tile.core.launch` of one kernel with one signature works out once and reuses.

A plan belongs to one `Function` and one signature object (an exact tuple of exact strs, so the same object always
names the same kinds; the function's parameter layout is read-only). It holds:

- the packing: one ``struct.Struct`` for the argument cells and a reusable parameter block whose ``void*`` array,
  pointing at the cells, is written once; a launch packs its values into the cells and passes the same address (the
  driver copies the arguments when ``cuLaunchKernel`` is called, and the block is only written and launched under
  ``use_lock``, by one launch at a time: a launch made while the block is being filled takes the full path);
- the pointer arguments of the last launch that took the full path, as weak references, with their addresses, the
  buffers they point into, the stream and the process-wide invalidation epoch (bumped by every buffer free, stream
  close and module unload) of that launch.

A launch hits the plan only when its arguments are an exact list or tuple (reading them runs no user code after the
guards), its stream is the remembered one, the epoch is unchanged and each pointer argument is the very object
remembered (identity, not equality: a lying ``__eq__`` cannot match). Then every pointer check the full path made
still holds: the objects are final and their fields read-only (same device, address, buffer; a view's ``readonly``
too, so one refused for a ``"ptr"`` parameter stays refused), none was freed and no stream was closed since (the
epoch), and each buffer's ordering after its home stream was made for this stream
(`DeviceBuffer._before_use` does it once per stream until a close). Scalars are rechecked at every launch: an int
kind takes an exact ``int`` (``struct`` refusing one out of its range), f64 an exact ``float``, and f16, bf16 and f32
run their kind's converter first (the full path's checks; it may run a value's own methods, so before the guards);
any other value sends the launch down the full path, which raises the full path's errors. A launch of the very
scalar objects of the last planned launch (held by the plan, so ``is`` cannot meet another object at their address)
packs nothing. The test of the arguments and the launch are straight-line code generated per signature
(`tile.core._plancode`); tile.core._fastcore, where built, makes the same test of a repeat of the very same objects
in C.
"""

from __future__ import annotations

import ctypes
import operator
import struct
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from tile.core._args import KINDS, POINTER_KINDS
from tile.core._buffer import DeviceBuffer
from tile.core._params import CELL
from tile.core._plancode import Launcher, launcher
from tile.core._stream import Stream
from tile.core._view import DeviceView

__all__ = ["LaunchPlan", "new_plan", "plan_for"]

# Kinds whose exact Python type packs through ``struct`` to the same bytes as the kind's converter would give (ints
# range-checked by ``struct``; a float is a C double as is). Other kinds are always converted, to their carrier type.
_EXACT = dict.fromkeys(("i8", "i16", "u8", "u16", "i32", "i64", "u32", "u64"), int) | {"f64": float}


def _getter(indices: tuple[int, ...]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """``operator.itemgetter`` that always returns a tuple (also of one item or none)."""
    if len(indices) > 1:
        return operator.itemgetter(*indices)
    if indices:
        (index,) = indices
        return lambda values: (values[index],)
    return lambda values: ()


# The generated launch code per signature (an exact tuple of exact strs): made once, as a function whose plan is an
# argument, so a function launched with alternating signatures (a new plan each time) compiles no code per plan.
_LAUNCHERS: dict[tuple[str, ...], Launcher] = {}


def _launcher(signature: tuple[str, ...], pointers: tuple[int, ...], scalars: tuple[int, ...]) -> Launcher:
    converters = {i: KINDS[signature[i]].convert for i in scalars if signature[i] not in _EXACT}
    # The exact type each scalar may have on the plan's path: an exact int or float, or its converter's carrier.
    types = {i: _EXACT.get(signature[i]) or type(KINDS[signature[i]].convert(0.0)) for i in scalars}
    run = _LAUNCHERS[signature] = launcher(pointers, scalars, converters, types)
    return run


def _no_stream() -> None:
    return None


def _unset(*args: object) -> Any:
    raise AssertionError("a plan launch reads the driver's cuLaunchKernel first")


class LaunchPlan:
    """The reusable packing of one (function, signature) and the pointer checks of its latest full-path launch.

    The parameter block holds the scalar cells (packed per launch), then the pointer cells (written when pointers
    are remembered), then the ``void*`` array, whose entry ``i`` points at parameter ``i``'s cell (written once).
    """

    __slots__ = (
        "_call",
        "_last",
        "_pointer_cells",
        "_pointers",
        "_refs",
        "_scalar_cells",
        "address",
        "block",
        "busy",
        "driver",
        "driver_launch",
        "epoch",
        "fixed",
        "kernel",
        "raw",
        "run",
        "shared",
        "signature",
        "stream",
        "views",
    )

    run: Launcher
    busy: bool  # while the block is being launched: a launch made meanwhile (a finalizer's) takes the full path
    kernel: Any  # the function's CUkernel, read when the pointers were remembered

    def __init__(self, signature: tuple[str, ...]) -> None:
        """A plan for ``signature``, whose kinds were checked against the kernel's layout."""
        n = len(signature)
        self.signature = signature
        pointers = tuple(i for i, kind in enumerate(signature) if kind in POINTER_KINDS)
        scalars = tuple(i for i, kind in enumerate(signature) if kind not in POINTER_KINDS)
        self._pointers = _getter(pointers)
        self._scalar_cells = struct.Struct("<" + "".join(CELL[signature[i]] for i in scalars))
        self._pointer_cells = struct.Struct(f"<{len(pointers)}Q")
        self.block = (ctypes.c_uint64 * (2 * n or 1))()
        base = ctypes.addressof(self.block)
        cell = {index: base + 8 * k for k, index in enumerate(scalars + pointers)}
        struct.pack_into(f"<{n}Q", self.block, 8 * n, *(cell[i] for i in range(n)))
        self.address = base + 8 * n
        # What the compiled launch (tile.core._fastcore) reads, in one field: the signature, its length, whether every
        # scalar packs as itself (no converter), the positions of the pointers and of the scalars (whose objects
        # ``_refs`` and ``_last`` hold, in that order) and the ``kernelParams`` address.
        plain = all(signature[i] in _EXACT for i in scalars)
        self.fixed = (signature, n, plain, pointers, scalars, self.address)
        # ``run(plan, args, stream, driver, shared_mem, *grid, *block)``: the hit test and launch (see _plancode).
        self.run = _LAUNCHERS.get(signature) or _launcher(signature, pointers, scalars)
        self._last: tuple[Any, ...] | None = None  # the scalar objects whose values the block's cells hold
        self._refs: tuple[weakref.ref[Any], ...] = ()  # the remembered pointer arguments
        # Weak, as the pointers: a plan keeps no buffer or stream alive (the arguments of a hit hold them).
        self.shared: tuple[weakref.ref[DeviceBuffer], ...] = ()  # the buffers of other streams: records the launch
        self.views: tuple[weakref.ref[DeviceView], ...] = ()  # borrowed views: held until the launch completes
        self.stream: Callable[[], Stream | None] = _no_stream  # a weak reference once remembered
        self.epoch, self.busy, self.kernel = -1, False, None
        self.raw: Any = None  # the remembered stream's ``_raw`` handle, which the compiled launch passes
        self.driver: object = None  # the driver module `driver_launch` (its ``cuLaunchKernel``) was read from
        self.driver_launch: Callable[..., Any] = _unset
        self._call: tuple[Any, ...] | None = None  # the driver arguments of the compiled launch's last launch

    def remember(  # noqa: PLR0917  # the full path's results, passed on
        self,
        args: Sequence[Any],
        values: Sequence[Any],
        buffers: Sequence[DeviceBuffer],
        stream: Stream,
        kernel: Any,
        views: Sequence[DeviceView] = (),
        *,
        epoch: int,
    ) -> None:
        """Keep the pointer checks of a launch that took the full path (the caller holds ``use_lock``): its pointer
        arguments, their checked addresses in ``values``, the ``buffers`` ordered for ``stream``, the function's
        ``kernel`` handle (valid until its module is unloaded, which bumps the epoch), the borrowed ``views`` (which
        a launch holds until it completes: among the arguments a hit matches by identity), and the invalidation
        ``epoch`` read before the pointers were checked: a free, close or unload since then (a finalizer the collector
        ran at an allocation after the checks, whose free is refused by later checks only) makes the next launch take
        the full path. Raw addresses and the arguments of a launch made while the block is in use are not kept."""
        self.epoch = -1
        objects = self._pointers(args)
        if self.busy or not all(type(obj) is DeviceBuffer or type(obj) is DeviceView for obj in objects):
            return
        self._refs = tuple(weakref.ref(obj) for obj in objects)
        self._pointer_cells.pack_into(self.block, self._scalar_cells.size, *self._pointers(values))
        self.shared = tuple(weakref.ref(b) for b in buffers if b.stream is not stream)
        self.views = tuple(weakref.ref(v) for v in views)
        self.stream, self.raw, self.kernel, self.epoch = weakref.ref(stream), stream._raw, kernel, epoch


def plan_for(function: Any, signature: object) -> LaunchPlan | None:
    """The plan of ``function`` for ``signature`` when it has one (the latest signature it was launched with)."""
    plan: LaunchPlan | None = function.__dict__.get("_launch_plan")
    if plan is not None and plan.signature is signature:
        return plan
    return None


def new_plan(function: Any, signature: object, kinds: tuple[str, ...]) -> LaunchPlan | None:
    """A plan for ``function`` and ``signature`` (whose checked kinds are ``kinds``), kept as the function's latest;
    None for a signature that is not an exact tuple of exact strs (the same object might name other kinds later)."""
    if type(signature) is not tuple or signature != kinds or not all(type(kind) is str for kind in signature):
        return None
    plan = function.__dict__["_launch_plan"] = LaunchPlan(signature)
    return plan
