"""Kernel launches with arguments packed and checked once, then relaunched by one ``cuLaunchKernel`` call.

Invariants: :func:`prepare` does every check (argument count and sizes against the kernel, pointer devices,
live buffers, open stream, grid and block extents) and orders the stream after the buffers' allocations;
:class:`PreparedLaunch` then relaunches with one guard - a process-wide invalidation epoch bumped by every buffer
free and stream close - so a freed buffer or closed stream is caught before the driver while the common path stays
a single comparison. Launches on a buffer's home stream need no tracking; on another stream, one event per launch
is recorded so the buffer's free waits for it - except while that stream captures a graph: an event recorded in a
capture cannot be queried or waited on afterwards (``CUDA_ERROR_CAPTURED_EVENT``) and guards nothing, since the
capture runs no work; whoever replays the graph keeps its buffers alive until the replays are done (tile.aio's
``Graph`` holds them until it is closed, and closing waits for the last launch).

A prepared launch keeps the driver's whole argument list: the kernel (a ``CUkernel``, which the driver resolves in
the stream's context), grid, block, the raw stream and a ``kernelParams`` array built once from the packed values
(:func:`~tile.core._params.kernel_params`), so a relaunch converts nothing.

A launch prepared with ``pdl=True`` (programmatic dependent launch, sm_90+) calls ``cuLaunchKernelEx`` instead, with
one launch attribute, ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``: the kernel may then *start* before
the kernel before it on the stream has finished (under stream capture the graph edge becomes programmatic). That is
only correct for a kernel that waits for its predecessors (``griddepcontrol.wait``) before it touches memory they
write, which tile.core cannot see in a cubin: ``pdl`` therefore needs ``unchecked=True``, the caller's promise
(tile.frontend gives it only for kernels its compiler built with that wait). Launches without ``pdl`` are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tile.bindings import check
from tile.bindings import driver as _driver
from tile.core import _keepalive, _plan, _reaper
from tile.core._args import pack_args, pack_launch
from tile.core._buffer import use_lock
from tile.core._errors import (
    LaunchArgumentError,
    StreamClosedError,
    UseAfterFreeError,
    WrongTypeError,
    factory_error,
)
from tile.core._final import Exact, Frozen
from tile.core._layout import as_index
from tile.core._module import Function
from tile.core._nocopy import Uncopyable
from tile.core._params import kernel_params, param_block
from tile.core._reaper import RUNNING as _RUNNING
from tile.core._stream import Stream, as_stream, invalidation

__all__ = ["PreparedLaunch", "launch", "prepare"]


_UINT = 2**32  # the driver takes each extent and the shared memory size as a C unsigned int


def _dim3(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    if type(value) is int and 1 <= value < _UINT:  # the common case of a 1-D grid or block, without the checks below
        return (value, 1, 1)
    given = (value,) if isinstance(value, int) else tuple(value)
    dims = tuple(as_index(d) if isinstance(d, int) else None for d in given)  # exact ints: no lying comparisons
    if not 1 <= len(dims) <= 3 or any(d is None or not 1 <= d < _UINT for d in dims):
        raise LaunchArgumentError(f"{what} {value!r} is invalid: give 1 to 3 positive ints below 2**32")
    x, y, z = (*dims, 1, 1)[:3]
    return (x, y, z)  # type: ignore[return-value]  # no None left: checked just above


def _shared_mem(value: object) -> int:
    size = as_index(value)
    if size is None or not 0 <= size < _UINT:
        raise LaunchArgumentError(
            f"shared_mem={value!r} is invalid: give the dynamic shared memory in bytes (an int >= 0)"
        )
    return size


class PreparedLaunch(Frozen, Uncopyable, metaclass=Exact):
    """A checked, packed launch; call it to enqueue the kernel again with the same arguments.

    It keeps every buffer and borrowed view it points into alive; final, and its fields are read-only (the relaunch
    guard rechecks ``buffers`` and ``stream``: see ``tile.core._final``).
    """

    _copy_fix = "prepare another launch with tile.core.prepare(...)"
    _frozen = frozenset({"block", "buffers", "function", "grid", "stream"})

    __slots__ = (
        "_call",
        "_epoch",
        "_keep",
        "_launch",
        "_params",
        "_shared",
        "block",
        "buffers",
        "function",
        "grid",
        "stream",
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise factory_error("PreparedLaunch", "tile.core.prepare(...)")

    @classmethod
    def _make(
        cls,
        function: Function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        packed: Any,
        *,
        stream: Stream,
        shared_mem: int,
        epoch: int,
        pdl: bool = False,
    ) -> PreparedLaunch:
        """Made by `prepare` only, which has checked and normalized ``grid`` and ``block`` and packed the arguments
        under the invalidation ``epoch`` read before its checks."""
        self = cls.__new__(cls)
        self._setup(function, grid, block, packed, stream=stream, shared_mem=shared_mem, epoch=epoch, pdl=pdl)
        return self

    def _setup(
        self,
        function: Function,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        packed: Any,
        *,
        stream: Stream,
        shared_mem: int,
        epoch: int,
        pdl: bool = False,
    ) -> None:
        self.function, self.stream, self.buffers = function, stream, packed.buffers
        self.grid, self.block = grid, block
        self._keep = packed.views  # borrowed views: the launch reads their producers' memory at every call
        self._params, address = kernel_params(packed)
        d = _reaper.driver()
        kernel = function.cu_function  # a CUkernel: launched in the stream's context
        if pdl and stream.device.compute_capability >= (9, 0):  # older GPUs have no PDL: launched as usual
            self._launch = d.cuLaunchKernelEx
            self._call: tuple[Any, ...] = (_pdl_config(d, grid, block, shared_mem, stream), kernel, address, 0)
        else:
            self._launch = d.cuLaunchKernel
            self._call = (kernel, *self.grid, *self.block, shared_mem, d.CUstream(stream.handle), address, 0)
        self._shared = tuple(b for b in self.buffers if b.stream is not stream)
        # The epoch the checks were made under, read before them: a free or close since (a finalizer the collector
        # ran at one of the allocations above, whose release waits for this thread's use window) makes the first
        # call recheck. The epoch read here would vouch for a buffer freed after its check (review 39).
        self._epoch = epoch

    def __repr__(self) -> str:
        return f"<PreparedLaunch {self.function.name} grid={self.grid} block={self.block} on {self.stream!r}>"

    def __call__(self) -> None:
        """Enqueue the kernel on the prepared stream."""
        if _reaper.RUNNING[0]:  # (tile.frontend's compiled relaunch leaves a call to this method then)
            _reaper.refuse_in_host_function(repr(self))
        with use_lock:  # a free on another thread comes before the guard or after the launch is recorded
            if self._epoch != invalidation[0]:
                self._revalidate()
            result = self._launch(*self._call)
            if result[0] != 0:
                check(result, "cuLaunchKernel")
            if self._shared or self._keep:
                _track(self.stream, self._shared, self._keep)

    def _revalidate(self) -> None:
        epoch = invalidation[0]  # before the checks, as `prepare`'s (review 39): a free after them rechecks next call
        if self.stream.closed:
            raise StreamClosedError(f"{self!r}: its stream was closed; prepare the launch again on an open stream")
        for buffer in self.buffers:
            if buffer.closed:
                raise UseAfterFreeError(f"{self!r}: argument {buffer!r} was freed; prepare with live buffers")
        if self.function._closed:
            raise UseAfterFreeError(f"{self!r}: its module was unloaded; load it again and prepare a new launch")
        self._epoch = epoch


def _pdl_config(
    d: Any, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, stream: Stream
) -> Any:
    """``cuLaunchKernelEx``'s ``CUlaunchConfig`` for a launch with programmatic stream serialization allowed."""
    attribute = d.CUlaunchAttribute()
    attribute.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    config = d.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = shared_mem
    config.hStream = d.CUstream(stream.handle)
    config.attrs = [attribute]
    config.numAttrs = 1
    return config


def prepare(  # the launch's own options, all keyword-only
    function: Function,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: Sequence[Any],
    *,
    stream: object = None,
    shared_mem: int = 0,
    signature: Sequence[str] | None = None,
    unchecked: bool = False,
    pdl: bool = False,
) -> PreparedLaunch:
    """Check and pack a launch once; the result relaunches cheaply.

    Parameters
    ----------
    function : Function
        The kernel.
    grid, block : int or tuple of int
        Blocks in the grid and threads per block (Tile IR kernels use block ``(1, 1, 1)``).
    args : sequence
        One value per kernel parameter: DeviceBuffer / DeviceView for pointers (an int address only with
        ``unchecked``), numbers for scalars.
    stream : Stream or stream-like, optional
        Default: the device's default stream.
    shared_mem : int
        Dynamic shared memory in bytes.
    signature : sequence of str, optional
        Argument kinds (``"ptr"``, ``"cptr"``, ``"i8"`` ... ``"u64"``, ``"f16"``, ``"bf16"``, ``"f32"``, ``"f64"``:
        see ``KINDS``). A read-only `DeviceView` is taken only for a ``"cptr"`` parameter (one the kernel only reads);
        for ``"ptr"``, or without a signature, it is a `LaunchArgumentError`.
    unchecked : bool
        Let ``"ptr"`` and ``"cptr"`` parameters take int device addresses, which no check can vouch for (the launch
        trusts them to name live memory of the device, large enough for the kernel): the greppable opt-out, like
        ``@tile.entry(unchecked=True)``. Without it an int address is a `LaunchArgumentError`.
    pdl : bool
        Launch with programmatic stream serialization (``cuLaunchKernelEx``; sm_90+, elsewhere a plain launch): the
        kernel may start before the previous kernel on the stream ends. Only for kernels that execute
        ``griddepcontrol.wait`` before touching any memory a predecessor writes, which no check here can see: it
        needs ``unchecked=True`` (`LaunchArgumentError` otherwise). tile.frontend sets it for ``@tile.entry(pdl=True)``.
    """
    if _reaper.RUNNING[0]:  # before any stream ordering or use tracking
        _reaper.refuse_in_host_function(f"prepare({function!r})")
    if type(function) is not Function:
        raise _not_a_function(function)
    if type(pdl) is not bool:
        raise LaunchArgumentError(f"pdl={pdl!r} must be True or False")
    if pdl and not unchecked:
        raise LaunchArgumentError(
            f"pdl=True lets {function.name} start before the kernel before it ends, which is only safe when the kernel "
            "waits for it (griddepcontrol.wait) before touching memory; tile.core cannot check a cubin for that, so "
            "pass unchecked=True to vouch for it (or compile with @tile.entry(pdl=True), whose launches do)"
        )
    dims = _dim3(grid, "grid"), _dim3(block, "block")  # bad extents fail before any stream ordering is enqueued
    shared_mem = _shared_mem(shared_mem)
    device = function.module.device
    chosen = as_stream(stream, device)
    with use_lock:  # no free or close between the pointers' checks and the guard's epoch: see use_lock
        epoch = invalidation[0]  # before the checks: what the prepared launch's guard vouches for
        chosen._check_open()  # again under the lock: another thread may have closed it since `as_stream`
        packed = pack_args(args, signature, device=device, expected=function.param_layout, unchecked=unchecked)
        for buffer in packed.buffers:
            buffer._before_use(chosen)
        return PreparedLaunch._make(function, *dims, packed, stream=chosen, shared_mem=shared_mem, epoch=epoch, pdl=pdl)


def launch(
    function: Function,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: Sequence[Any],
    *,
    stream: object = None,
    shared_mem: int = 0,
    signature: Sequence[str] | None = None,
    unchecked: bool = False,
) -> None:
    """Check, pack and enqueue one launch (see :func:`prepare` for the parameters).

    The same checks and stream ordering as ``prepare(...)()``, without making the `PreparedLaunch` (its driver
    argument list and invalidation guard serve relaunches only): a checked launch costs its checks and one
    ``cuLaunchKernel``. With a ``signature`` tuple, the function keeps a launch plan (``tile.core._plan``): a launch
    repeating the last one's buffers and views on its stream, with nothing freed, closed or unloaded since, reuses
    their checks and ordering and packs only its scalars (each still checked) into a reusable parameter block.
    """
    if _RUNNING[0]:  # before any stream ordering or use tracking
        _reaper.refuse_in_host_function(f"launch({function!r})")
    if type(function) is not Function:
        raise _not_a_function(function)
    if (
        type(grid) is int
        and 1 <= grid < _UINT
        and type(block) is int
        and 1 <= block < _UINT
        and type(shared_mem) is int
        and 0 <= shared_mem < _UINT
    ):  # a 1-D grid and block: `_extents`'s common case, inline
        gx, gy, gz, bx, by, bz = grid, 1, 1, block, 1, 1
    else:
        gx, gy, gz, bx, by, bz, shared_mem = _extents(grid, block, shared_mem)  # before any stream ordering
    plan = function._launch_plan  # `_plan.plan_for`, inline
    if plan is not None and plan.signature is signature and stream is not None and plan.stream() is stream:
        # The stream of the plan's last launch, which `as_stream` passed then for this function's device: it still
        # would while the epoch is unchanged (a close bumps it, under the lock), which the plan tests under the lock;
        # else the full path rechecks that it is open, as `as_stream` would (the same error).
        chosen: Stream = stream  # type: ignore[assignment]  # a Stream: the plan's weak reference names one
    else:
        chosen = as_stream(stream, function.module.device)
    with use_lock:  # from the pointers' liveness checks until the launch is enqueued and recorded: see use_lock
        if plan is not None and plan.signature is signature:
            # The same pointers, nothing freed, closed or unloaded since: one packing and the driver call (see _plan).
            result = plan.run(plan, args, chosen, _driver(), shared_mem, gx, gy, gz, bx, by, bz)
            if result is not None:
                if result[0] != 0:
                    check(result, "cuLaunchKernel")
                if plan.shared or plan.views:
                    _track_planned(plan, chosen)
                return
        _launch_full(function, (gx, gy, gz, bx, by, bz, shared_mem), args, chosen, signature, unchecked)


def _not_a_function(function: object) -> WrongTypeError:
    """The error for a launch of something that is not a `Function`: an object that only looks like one (its own
    ``cu_function``, ``param_layout`` and ``module``) would choose the kernel handle and the parameter layout the
    arguments are checked against, so the driver would read parameters the checks never saw (review 39)."""
    return WrongTypeError(
        f"{type(function).__name__} is not a tile.core.Function: launch a kernel got from module.function(name)"
    )


def _track_planned(plan: _plan.LaunchPlan, stream: Stream) -> None:
    """`_track` for a launch the plan made: its buffers of other streams and its borrowed views, the very objects of
    the launch's arguments (the plan matched them by identity, so its weak references name live objects)."""
    _track(stream, [ref() for ref in plan.shared], [ref() for ref in plan.views])


def _extents(grid: object, block: object, shared_mem: object) -> tuple[int, int, int, int, int, int, int]:
    """`launch`'s grid, block and shared memory size, checked (`LaunchArgumentError`) in that order."""
    gx, gy, gz = _dim3(grid, "grid")  # type: ignore[arg-type]  # _dim3 refuses what is no int or sequence of ints
    bx, by, bz = _dim3(block, "block")  # type: ignore[arg-type]  # (the same)
    return gx, gy, gz, bx, by, bz, _shared_mem(shared_mem)


def _launch_full(  # noqa: PLR0917  # launch's own arguments, passed on
    function: Function,
    extents: tuple[int, int, int, int, int, int, int],
    args: Sequence[Any],
    chosen: Stream,
    signature: Sequence[str] | None,
    unchecked: bool,
) -> None:
    """A checked launch's full path (the caller holds ``use_lock``): the stream open, every argument checked and
    packed, the launch enqueued and recorded for the buffers of other streams."""
    epoch = invalidation[0]  # before the checks: what the plan they leave vouches for
    if chosen._closed:  # again under the lock: another thread may have closed it since `as_stream`
        chosen._check_open()
    kernel = function.cu_function  # raises once the module was unloaded
    device = function.module.device
    shared, views, cells, address = _checked_params(function, args, signature, chosen, device, unchecked, kernel, epoch)
    result = _reaper.driver().cuLaunchKernel(kernel, *extents, chosen._raw, address, 0)
    del cells  # kept alive until the driver has copied the arguments
    if result[0] != 0:
        check(result, "cuLaunchKernel")
    if shared or views:
        _track(chosen, shared, views)


def _checked_params(  # noqa: PLR0917  # launch's own arguments, passed on
    function: Function,
    args: Sequence[Any],
    signature: Sequence[str] | None,
    chosen: Stream,
    device: Any,
    unchecked: bool,
    kernel: Any,
    epoch: int,
) -> tuple[Sequence[Any], Sequence[Any], object, int]:
    """A checked launch's full path (the caller holds ``use_lock``): every argument checked and packed, the buffers
    ordered for ``chosen``, and the checks kept in the function's plan for the launches that repeat them, under
    ``epoch``, read before any check (a free or close after it makes the next launch check again). Returns the
    buffers of other streams (to record the launch for), the borrowed views (held until the kernel completes), and
    the parameter block and its ``kernelParams`` address."""
    args = tuple(args)  # read once: a sequence of the user's own could hand out other items (or free) when read again
    kinds, values, buffers, views = pack_launch(
        args, signature, device=device, expected=function.param_layout, unchecked=unchecked
    )
    if invalidation[0] != epoch:  # a value's own method (a converter's __float__) freed or closed something
        _recheck(chosen, buffers)
    shared = []
    for buffer in buffers:
        buffer._before_use(chosen)
        if buffer.stream is not chosen:
            shared.append(buffer)
    block, address = param_block(kinds, values)  # the block holds the cells ``address`` points at
    plan = _plan.plan_for(function, signature) or _plan.new_plan(function, signature, kinds)
    if plan is not None:
        plan.remember(args, values, buffers, chosen, kernel, views, epoch=epoch)
    return shared, views, block, address


def _recheck(stream: Stream, buffers: Sequence[Any]) -> None:
    stream._check_open()
    for buffer in buffers:
        if buffer.closed:
            raise UseAfterFreeError(f"argument {buffer!r} was freed while the launch's arguments were packed")


def _track(stream: Stream, shared: Sequence[Any], views: Sequence[Any] = ()) -> None:
    """Record the launch just enqueued on ``stream`` for buffers of other streams, so their frees wait for it, and
    hold the borrowed views it uses (their producers) until it completes (``tile.core._keepalive``: the caller may
    drop them at once). Not during a capture, whose events guard nothing: see the module docstring."""
    if not stream.is_capturing():
        if views:
            _keepalive.prune(stream)  # before the new record: what completed since may go
        event = stream._record_mark()  # one event per stream, re-recorded: no create, destroy or pruning queries
        for buffer in shared:
            buffer._uses.add_event(event)
        if views:
            _keepalive.hold(stream, event, views)
