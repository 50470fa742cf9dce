"""Lazy device operations for Tile: ``DeviceOp``, combinators, scheduling, asyncio and graphs.

A :class:`DeviceOp` describes device work and the value it produces; building one enqueues nothing.
Execute it with ``.sync()``, ``.sync_on(stream)``, ``await op`` or ``.schedule(policy)``, or capture it
with ``.graph()``. Its output is handed back only after its work completed, and its inputs stay owned
by it until then (also when an ``await`` is cancelled). An op runs at most once; ``.shared()`` shares one
result. A nested ``.sync()`` while this thread executes an op raises :class:`ExecutionLockError`.

Ops run on an :class:`ExecutionContext` (stream-like: ``enqueue``/``record``/``wait``/``synchronize``/
``query``). Two kinds exist: CUDA streams (over ``tile.core``; made by the scheduling functions, or by
passing a ``tile.core.Stream`` to ``sync_on``) and :class:`HostStream` (work runs on the CPU in order, for
the interpreter backend and GPU-free tests). Graph capture works on both: a CUDA graph on CUDA streams, a
recorded list of host work replayed in order on host streams.

Public API
----------
Ops and combinators
    :class:`DeviceOp` (``then``, ``map``, ``shared``, ``unzip``, ``sync``, ``sync_on``, ``await``,
    ``schedule``, ``graph``), :func:`value`, :func:`empty`, :func:`zip`, :func:`collect`,
    :func:`with_context`, :func:`host_call`; :class:`Scheduled`.
Device work
    :func:`launch` (a ``tile.core.Function``), :func:`copy`, :func:`alloc`, :func:`free`.
Scheduling
    :class:`SchedulingPolicy`, :class:`RoundRobin`, :class:`SingleStream`, :func:`stream_pool`,
    :func:`default_policy`, :func:`set_default_policy`, :func:`device`, :func:`default_device`,
    :func:`set_default_device`, :func:`use_device`, :data:`HOST`.
Contexts
    :class:`ExecutionContext`, :class:`Completion` (``DoneCallback``), :class:`HostStream`, :class:`CudaContext`,
    :func:`as_context` (wraps a ``tile.core.Stream`` or a foreign stream).
Graphs
    :func:`capture`, :class:`Graph` (``launch``, ``update``, ``output``, ``close``).
Errors (all derive from ``TileError``, Tile's one root ``tile.errors.TileError``, and a builtin)
    :class:`OpConsumedError`, :class:`ExecutionLockError`, :class:`CaptureError`,
    :class:`ContextMismatchError`, :class:`EventLoopError`, :class:`OpTypeError`, :class:`CopyError`,
    :class:`ClosedError`, :class:`KnobError`, :class:`UncopyableError` (ops, graphs, contexts, completions and
    policies refuse ``copy.copy``, ``copy.deepcopy`` and pickling: each owns work or a stream).

Environment: ``TILE_AIO_SPIN_US`` (await's poll budget, default 20), ``TILE_AIO_POOL_SIZE`` (default 4),
``TILE_AIO_DEVICE`` (``cuda:0`` or ``host``).

Example
-------
>>> import tile.aio as aio
>>> with aio.use_device("host"):
...     a, b = aio.value(2), aio.value(3)
...     aio.zip(a, b).map(lambda ab: ab[0] * ab[1]).sync()
6
"""

from tile.aio._combinators import collect, empty, host_call, value, with_context, zip
from tile.aio._context import HOST, Completion, DoneCallback, ExecutionContext, HostDevice
from tile.aio._cuda import CudaContext
from tile.aio._device_ops import alloc, copy, free, launch
from tile.aio._errors import (
    CaptureError,
    ClosedError,
    ContextMismatchError,
    CopyError,
    EventLoopError,
    ExecutionLockError,
    KnobError,
    OpConsumedError,
    OpTypeError,
    UncopyableError,
)
from tile.aio._graph import Graph, capture
from tile.aio._host import HostStream
from tile.aio._lock import held as executing
from tile.aio._op import DeviceOp, Scheduled
from tile.aio._policy import (
    RoundRobin,
    SchedulingPolicy,
    SingleStream,
    as_context,
    default_device,
    default_policy,
    device,
    set_default_device,
    set_default_policy,
    stream_pool,
    use_device,
)
from tile.bindings import TileError

__all__ = [
    "HOST",
    "CaptureError",
    "ClosedError",
    "Completion",
    "ContextMismatchError",
    "CopyError",
    "CudaContext",
    "DeviceOp",
    "DoneCallback",
    "EventLoopError",
    "ExecutionContext",
    "ExecutionLockError",
    "Graph",
    "HostDevice",
    "HostStream",
    "KnobError",
    "OpConsumedError",
    "OpTypeError",
    "RoundRobin",
    "Scheduled",
    "SchedulingPolicy",
    "SingleStream",
    "TileError",
    "UncopyableError",
    "alloc",
    "as_context",
    "capture",
    "collect",
    "copy",
    "default_device",
    "default_policy",
    "device",
    "empty",
    "executing",
    "free",
    "host_call",
    "launch",
    "set_default_device",
    "set_default_policy",
    "stream_pool",
    "use_device",
    "value",
    "with_context",
    "zip",
]
