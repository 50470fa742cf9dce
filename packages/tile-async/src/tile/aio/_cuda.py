"""CUDA execution contexts: the protocol over ``tile.core`` streams and events.

``tile.core`` is imported on first use, never at ``import tile.aio``, so host-only use needs no GPU stack.
A :class:`CudaContext` wraps one ``tile.core.Stream``. Completions are blocking-sync events (a waiter
thread sleeps in ``cuEventSynchronize`` instead of spinning). Host work enqueued on a CUDA stream is a
``cuLaunchHostFunc`` callback; a failure in it is kept by the context and raised by the next ``query``,
``synchronize`` or completion of that context, like the host streams do. Graph capture uses
``cuStreamBeginCapture`` in thread-local mode, so an unsafe driver call from this thread during capture
fails instead of silently corrupting the graph.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
import weakref
from collections.abc import Callable, Hashable
from types import ModuleType
from typing import Any

from tile.aio import _lock, _waiter
from tile.aio._context import (
    BUILTIN_CONTEXTS,
    RECORDING_CONTEXTS,
    Completion,
    DoneCallback,
    ExecutionContext,
    call_back,
)
from tile.aio._errors import CaptureError, ContextMismatchError, OpTypeError
from tile.aio._uncopyable import Uncopyable
from tile.bindings import check, driver

__all__ = [
    "CudaCompletion",
    "CudaContext",
    "CudaRecorder",
    "device",
    "is_device",
    "new_context",
    "wrap_stream",
    "wrapped",
]


_core: list[ModuleType] = []


def core() -> ModuleType:
    """Return ``tile.core`` (imported on first call)."""
    if not _core:
        import tile.core

        _core.append(tile.core)
    return _core[0]


def device(ordinal: int) -> Hashable:
    """Return ``tile.core.Device(ordinal)`` (one object per ordinal)."""
    dev: Hashable = core().Device(ordinal)
    return dev


def is_device(obj: object) -> bool:
    """True when ``obj`` is a ``tile.core.Device`` (False without importing tile.core when it is not loaded)."""
    module = sys.modules.get("tile.core")
    return module is not None and isinstance(obj, module.Device)


def new_context(dev: Hashable) -> CudaContext:
    """A context on a new non-blocking stream of ``dev``."""
    return CudaContext(core().Stream(dev))


_wrapped: weakref.WeakValueDictionary[int, CudaContext] = weakref.WeakValueDictionary()
# The contexts of the streams wrapped last, held strongly: a context nobody else holds would otherwise die after each
# ``op.sync_on(stream)`` and be rebuilt by the next. Each entry keeps its stream alive until evicted, so it stays small.
_recent: dict[int, CudaContext] = {}
_RECENT_CAP = 16


def wrapped(obj: object) -> CudaContext | None:
    """The context of ``obj`` when it is a ``tile.core.Stream`` wrapped lately (no type checks), else None."""
    ctx = _recent.get(id(obj))
    return ctx if ctx is not None and ctx._stream is obj else None


def wrap_stream(obj: object) -> CudaContext:
    """A context for a ``tile.core.Stream`` or anything ``tile.core.Stream.borrow`` accepts (the same context
    object each time for the same stream object, so host-work errors are not lost between wrappers)."""
    if isinstance(obj, bool) or not (isinstance(obj, int) or hasattr(obj, "__cuda_stream__")):
        raise OpTypeError("the stream argument", "an ExecutionContext or a CUDA stream", type(obj).__name__)
    tc = core()
    stream = obj if isinstance(obj, tc.Stream) else tc.Stream.borrow(obj)
    ctx = _wrapped.get(id(stream))
    if ctx is None or ctx.stream is not stream:
        ctx = _wrapped[id(stream)] = CudaContext(stream)
    if len(_recent) >= _RECENT_CAP:  # ever-new streams must not stay alive without bound
        _recent.clear()
    _recent[id(stream)] = ctx  # the stream is alive (ctx holds it): its id names it until evicted
    return ctx


class CudaCompletion(Completion):
    """A blocking-sync event recorded on a CUDA context."""

    __slots__ = ("_ctx", "event")

    def __init__(self, event: Any, ctx: CudaContext) -> None:
        self.event = event
        self._ctx = ctx

    def query(self) -> bool:
        if not self.event.query():
            return False
        self._ctx.raise_host_error()
        return True

    def wait(self) -> None:
        self.event.synchronize()
        self._ctx.raise_host_error()

    def add_done_callback(self, fn: DoneCallback) -> None:
        try:
            done = self.query()
        except Exception as exc:  # done, with a failure: that is the callback's argument
            call_back(fn, exc)
            return
        if done:
            call_back(fn, None)
        else:
            _waiter.submit(self, fn)


class CudaContext(ExecutionContext):
    """Execution context over one ``tile.core.Stream``.

    Parameters
    ----------
    stream : tile.core.Stream
        The stream; the context does not own it.
    """

    __slots__ = ("__weakref__", "_device", "_error", "_raw", "_stream")

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._device: Hashable = stream.device
        self._error: BaseException | None = None
        self._raw: Any = None

    def __repr__(self) -> str:
        return f"CudaContext(stream={self._stream.handle:#x}, device={self._device!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CudaContext) and other._stream.handle == self._stream.handle

    def __hash__(self) -> int:
        return hash(self._stream.handle)

    @property
    def stream(self) -> Any:
        """The ``tile.core.Stream``."""
        return self._stream

    @property
    def device(self) -> Hashable:
        return self._device

    @property
    def raw_stream(self) -> Any:
        """The stream as a ``cuda.bindings`` ``CUstream`` (made once)."""
        if self._raw is None:
            self._raw = driver().CUstream(self._stream.handle)
        return self._raw

    def enqueue(self, fn: Callable[[], object]) -> None:
        _launch_host_func(self, fn)

    def open_stream(self) -> Any:
        """`raw_stream` for enqueuing work: raises tile.core's `StreamClosedError` once the stream was closed (its
        handle names a destroyed stream, or one the driver made since)."""
        if self._stream.closed:
            raise core().StreamClosedError(
                f"{self._stream!r} was closed: nothing can be enqueued on it; run the work on a context of an open "
                "stream (tile.aio.CudaContext(tile.core.Stream()))"
            )
        return self.raw_stream

    def record(self) -> Completion:
        event = core().Event(self._device, timing=False, blocking_sync=True)
        self._stream.record(event)
        return CudaCompletion(event, self)

    def wait(self, completion: Completion) -> None:
        if isinstance(completion, CudaCompletion):
            self._stream.wait(completion.event)
        else:  # a host completion: hold the stream in a host callback until it is done
            self.enqueue(completion.wait)

    def synchronize(self) -> None:
        self._stream.synchronize()
        if self._error is not None:
            self.raise_host_error()

    def query(self) -> bool:
        if not self._stream.query():
            return False
        self.raise_host_error()
        return True

    def raise_host_error(self) -> None:
        """Raise (and clear) the failure of host work enqueued on this context, if any."""
        error = self._error
        if error is not None:
            self._error = None
            raise error

    def note_host_error(self, error: BaseException) -> None:
        """Keep a host work failure for the next observer (the first one wins)."""
        if self._error is None:
            self._error = error

    def has_host_error(self) -> bool:
        """True while a host work failure waits to be reported (later host work is skipped)."""
        return self._error is not None


# -- host functions -------------------------------------------------------------------------------------------

_HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pending: dict[int, tuple[CudaContext, Callable[[], object]]] = {}
_keys = itertools.count(1)  # user data 0 would be NULL


def _trampoline(key: int | None) -> None:
    """Runs on a driver thread (ctypes takes the GIL); finds the Python work by its key.

    All of it runs marked as a host function for tile.core, the drop of the work (``fn`` may hold the last reference
    to a buffer) included: a finalizer firing here queues its release instead of calling the driver, which CUDA
    forbids inside a host function."""
    from tile.core import host_callback  # the real tile.core: host work only runs for CUDA contexts

    with host_callback():
        _run_host_work(key or 0)


def _run_host_work(key: int) -> None:
    ctx, fn = _pending.pop(key)
    if ctx.has_host_error():
        return
    previous = _lock.set_held(True)
    try:
        fn()
    except BaseException as exc:  # reported by the context's next query/synchronize/completion
        # SystemExit & co. too, as a host stream's worker keeps them: out of a ctypes callback they were printed and
        # dropped, and the op whose host function stopped half-way reported success (review 36).
        ctx.note_host_error(exc)
    finally:
        _lock.set_held(previous)


_c_trampoline = _HostFn(_trampoline)  # module-level: must outlive every callback the driver may still call


def _launch_host_func(ctx: CudaContext, fn: Callable[[], object]) -> None:
    d = driver()
    key = next(_keys)
    _pending[key] = (ctx, fn)
    address = ctypes.cast(_c_trampoline, ctypes.c_void_p).value
    try:
        ctx.open_stream()  # the closed stream's own message
        with ctx.stream.in_use() as raw:  # a close meanwhile (a finalizer, another thread) waits for the call
            check(d.cuLaunchHostFunc(raw, d.CUhostFn(address), key), "cuLaunchHostFunc")
    except BaseException:
        del _pending[key]
        raise


# -- capture --------------------------------------------------------------------------------------------------


class CudaRecorder(CudaContext):
    """A CUDA context whose stream is being captured into a graph (thread-local capture mode)."""

    __slots__ = ("_open",)

    def __init__(self, target: CudaContext) -> None:
        super().__init__(target.stream)
        self._open = False
        d = driver()
        self._device.make_current()  # type: ignore[attr-defined]  # a tile.core.Device
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self.open_stream()  # the closed stream's own message
        with target.stream.in_use() as raw:  # a close meanwhile waits for the call
            check(d.cuStreamBeginCapture(raw, mode), "cuStreamBeginCapture")
        self._open = True
        core().begin_thread_capture()  # tile.core relaxes this thread's own waits and allocations on other streams

    @property
    def capturing(self) -> bool:
        return self._open  # until the capture ends: values it handed out then can tell the capture is over

    def enqueue(self, fn: Callable[[], object]) -> None:
        raise CaptureError("host work on a CUDA stream", "a host callback would run at every replay")

    def record(self) -> Completion:
        raise CaptureError("recording a completion", "events recorded during a capture cannot be waited on")

    def wait(self, completion: Completion) -> None:
        completion.wait()  # work from outside the capture: wait now, so every replay starts after it

    def synchronize(self) -> None:
        raise CaptureError("synchronizing", "a stream being captured cannot be synchronized")

    def query(self) -> bool:
        raise CaptureError("querying", "a stream being captured cannot be queried")

    def finish(self) -> CudaGraphExec:
        """End the capture, check the graph holds no allocation or free, and instantiate it."""
        graph = self._end()
        try:
            _refuse_memory_nodes(graph)
        except BaseException:
            check(driver().cuGraphDestroy(graph), "cuGraphDestroy")
            raise
        return CudaGraphExec(graph, self._device, self._stream)

    def abort(self) -> None:
        """End the capture and throw the partial graph away."""
        graph = self._end(ok=False)
        if graph is not None:
            check(driver().cuGraphDestroy(graph), "cuGraphDestroy")

    def _end(self, ok: bool = True) -> Any:
        if self._open:
            core().end_thread_capture()
        self._open = False
        d = driver()
        try:
            with self._stream.in_use() as raw:  # a close meanwhile (a finalizer, another thread) waits for the call
                result = d.cuStreamEndCapture(raw)
        except core().StreamClosedError:  # closed during the capture: nothing to end on a destroyed handle
            if not ok:
                return None
            raise
        if not ok:
            return result[1] if result[0] == 0 and int(result[1]) != 0 else None
        return check(result, "cuStreamEndCapture")


def _refuse_memory_nodes(graph: Any) -> None:
    """Raise CaptureError when work enqueued during the capture (by any path, e.g. a ``tile.core`` allocation
    on the capture stream inside a ``with_context`` function) became an allocation or free node."""
    d = driver()
    _, count = check(d.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    if not count:
        return
    nodes, _ = check(d.cuGraphGetNodes(graph, count), "cuGraphGetNodes")
    kinds = d.CUgraphNodeType
    refused = {kinds.CU_GRAPH_NODE_TYPE_MEM_ALLOC: "allocates", kinds.CU_GRAPH_NODE_TYPE_MEM_FREE: "frees"}
    for node in nodes:
        verb = refused.get(check(d.cuGraphNodeGetType(node), "cuGraphNodeGetType"))
        if verb is not None:
            raise CaptureError("work enqueued during the capture", f"it {verb} device memory on the capture stream")


BUILTIN_CONTEXTS.update((CudaContext, CudaRecorder))  # their completions are CUDA events: real
RECORDING_CONTEXTS.add(CudaRecorder)


class CudaGraphExec(Uncopyable):
    """An instantiated CUDA graph, uploaded to the device, replayed on any stream of its device."""

    __slots__ = ("_closed", "_device", "_driver", "_exec", "_graph")

    kind = "cuda"

    def __init__(self, graph: Any, dev: Hashable, stream: Any) -> None:
        """Instantiate ``graph`` and upload it on ``stream`` (the ``tile.core.Stream`` it was captured on)."""
        d = self._driver = driver()  # kept: a graph destroyed late must reach the driver that made it
        self._graph = graph
        self._device = dev
        self._closed = False
        try:
            self._exec = check(d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        except BaseException:
            check(d.cuGraphDestroy(graph), "cuGraphDestroy")
            raise
        with stream.in_use() as raw:  # a close meanwhile (a finalizer, another thread) waits for the upload
            check(d.cuGraphUpload(self._exec, raw), "cuGraphUpload")

    def replay(self, ctx: ExecutionContext) -> None:
        """Launch the graph on ``ctx`` (a CUDA context of the same device)."""
        if not isinstance(ctx, CudaContext) or ctx.device != self._device:
            raise ContextMismatchError("a CUDA graph launch", f"a CUDA stream of {self._device!r}", repr(ctx))
        ctx.open_stream()  # the closed stream's own message
        with ctx.stream.in_use() as raw:  # a close meanwhile (a finalizer, another thread) waits for the launch
            check(self._driver.cuGraphLaunch(self._exec, raw), "cuGraphLaunch")

    def close(self) -> None:
        """Destroy the executable and the graph, once (no launch may be pending)."""
        if self._closed:
            return
        self._closed = True
        d = self._driver
        check(d.cuGraphExecDestroy(self._exec), "cuGraphExecDestroy")
        check(d.cuGraphDestroy(self._graph), "cuGraphDestroy")
