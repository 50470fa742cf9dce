"""Graphs: capture an op once, replay it many times.

``capture(op, on)`` executes ``op`` on a recording context instead of running it: on a CUDA context the
stream is captured into a CUDA graph (instantiated and uploaded); on a host stream the host work is
recorded as a list of functions (a faithful emulation: replay enqueues the same functions in the same
order, reading the same buffers). Nothing runs during capture; then/map functions run once, at capture.

A graph keeps the captured op tree (its inputs, which the recorded work reads and writes) and its output
until it is closed. ``graph.launch()`` is an op whose output is that same output. Every replay writes it, so
while the graph is open the output belongs to the graph: values that own memory refuse to be read, viewed,
freed or passed to a launch (tile.frontend's handles are *captured*, see ``tile.frontend._launch``), and
``close()`` (which waits for the last replay) hands them back live: replays and reads never overlap.
Pointers are baked in, so inputs change by copying into the captured buffers: ``graph.update(copy(buffer, new_data))``.
Launches and updates of one graph are ordered among themselves even across streams (a launch on another
stream first waits for the previous one). Refusals happen before anything is recorded where the op tree
shows them (an allocation, a free, a ``with_context`` not marked capturable, a graph launch, a first run
of a shared op); ops found only at capture time (returned by a ``then`` function) abort the capture. In
both cases no graph is made and :class:`CaptureError` says which op and why.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from tile.aio import _cuda, _lock
from tile.aio._context import BUILTIN_CONTEXTS, HOST, RECORDING_CONTEXTS, Completion, ExecutionContext, refuse_recorder
from tile.aio._errors import CaptureError, ClosedError, ContextMismatchError
from tile.aio._host import HostStream
from tile.aio._op import DeviceOp, Site, caller_site
from tile.aio._uncopyable import Uncopyable

__all__ = ["Graph", "capture", "capture_on"]

T = TypeVar("T")
U = TypeVar("U")


class _Replay(Protocol):
    kind: str

    def replay(self, ctx: ExecutionContext) -> None: ...
    def close(self) -> None: ...


class _HostReplay:
    """A recorded list of host work."""

    __slots__ = ("_work",)

    kind = "host"

    def __init__(self, work: tuple[Callable[[], object], ...]) -> None:
        self._work = work

    def replay(self, ctx: ExecutionContext) -> None:
        for fn in self._work:
            ctx.enqueue(fn)

    def close(self) -> None:
        self._work = ()


class _HostRecorder(ExecutionContext):
    """Records the host work enqueued on it instead of running it."""

    __slots__ = ("_open", "_work")

    def __init__(self) -> None:
        self._work: list[Callable[[], object]] = []
        self._open = True

    @property
    def device(self) -> Hashable:
        return HOST

    @property
    def capturing(self) -> bool:
        return self._open  # until finish() or abort(): values it handed out then can tell the capture is over

    def enqueue(self, fn: Callable[[], object]) -> None:
        self._work.append(fn)

    def record(self) -> Completion:
        raise CaptureError("recording a completion", "a completion inside a capture would never be reached")

    def wait(self, completion: Completion) -> None:
        completion.wait()  # work from outside the capture: wait now, so every replay starts after it

    def synchronize(self) -> None:
        raise CaptureError("synchronizing", "a context being captured cannot be synchronized")

    def query(self) -> bool:
        raise CaptureError("querying", "a context being captured cannot be queried")

    def finish(self) -> _HostReplay:
        self._open = False
        work, self._work = tuple(self._work), []
        return _HostReplay(work)

    def abort(self) -> None:
        self._open = False
        self._work.clear()


BUILTIN_CONTEXTS.add(_HostRecorder)
RECORDING_CONTEXTS.add(_HostRecorder)


class Graph(Uncopyable, Generic[T]):
    """A captured op: :meth:`launch` replays it; :meth:`update` runs an op ordered with the launches.

    Made by :func:`capture` or ``op.graph()``. Close it (or use ``with``) to free the graph and hand the
    captured inputs back. A graph that is garbage-collected unclosed frees its driver objects and, once its last
    launch (or update) is done, releases the captured op as ``close()`` would (`_close_quietly`): nothing can launch
    it any more, and its memory and shared values go back without blocking the collector.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_context",
        "_finalizer",
        "_held",
        "_mutex",
        "_output",
        "_recorder",
        "_replay",
    )
    _copy_fix = "use the graph itself (launch it as often as you like), or capture the op again for a second graph"

    def __init__(
        self, op: DeviceOp[T], output: T, replay: _Replay, ctx: ExecutionContext, recorder: object = None
    ) -> None:
        self._held = _Held(op)  # the captured op and the last launch's context, shared with the finalizer
        self._recorder = recorder
        self._output = output
        self._replay = replay
        self._context = ctx
        self._closed = False
        self._mutex = threading.RLock()  # re-entrant: an update may itself launch this graph
        self._finalizer = weakref.finalize(self, _close_quietly, replay, self._held)
        self._finalizer.atexit = False  # at exit the driver tears everything down itself

    @property
    def output(self) -> T:
        """The captured op's output (the buffers the graph reads and writes).

        While the graph is open they belong to it (Tile handles refuse every use with ``InFlightError``); after
        :meth:`close` they are live.
        """
        return self._output

    @property
    def context(self) -> ExecutionContext:
        """The context the graph was captured on."""
        return self._context

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (launches and updates then raise ``ClosedError``)."""
        return self._closed

    def recorded_on(self, ctx: object) -> bool:
        """Whether ``ctx`` is the recording context this graph was captured on: the context that ops executed during
        the capture saw (a library that marks what a capture took, as tile.frontend's handles do, can tell which
        graph took it)."""
        return ctx is not None and ctx is self._recorder

    @property
    def kind(self) -> str:
        """``"cuda"`` for a CUDA graph, ``"host"`` for a recorded host op list."""
        return self._replay.kind

    def launch(self) -> DeviceOp[T]:
        """Return an op that replays the graph.

        Returns
        -------
        DeviceOp
            Replays on the context it is executed on (a CUDA stream of the graph's device for a CUDA graph,
            any context for a host graph); its output is :attr:`output`.
        """
        return _GraphLaunch(self)

    def update(self, op: DeviceOp[U]) -> DeviceOp[U]:
        """Return an op that runs ``op`` ordered after the previous launch or update of this graph and before
        the next one.

        Parameters
        ----------
        op : DeviceOp
            Typically ``tile.aio.copy(captured_buffer, new_data)``: pointers are baked into the graph, so new
            inputs go into the captured buffers. Moved into the result.

        Returns
        -------
        DeviceOp
            The ordered op; its output is ``op``'s.
        """
        op._claim("moved into Graph.update()", caller_site())
        return _GraphUpdate(self, op)

    def close(self) -> T:
        """Wait for the last launch, free the graph and release the captured op (idempotent).

        Returns
        -------
        object
            :attr:`output`, now handed back: no replay can write it any more.
        """
        with self._mutex:
            if self._closed:
                return self._output
            self._closed = True
            held = self._held
            last, held.last = held.last, None
        failure: Exception | None = None
        try:
            if last is not None:
                last._observe().wait()
        except Exception as exc:  # the work failed: it is over (reported after the release)
            failure = exc
        except BaseException:
            # A KeyboardInterrupt while waiting: the last launch may still run, so nothing goes back. The graph stays
            # open as it was (close() again, or drop it: its finalizer releases once the launch is done). Releasing
            # here handed the captured handles back under a running replay (review 36).
            with self._mutex:
                self._closed = False
                if held.last is None:
                    held.last = last
            raise
        self._finalizer.detach()
        op, held.op = held.op, None
        try:
            self._replay.close()
        finally:
            if op is not None:
                op._release()
        if failure is not None:
            raise failure
        return self._output

    def __enter__(self) -> Graph[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ordered(self, ctx: ExecutionContext, work: Callable[[], U]) -> U:
        """Enqueue ``work`` on ``ctx`` after the previous launch/update of this graph (the lock is held while
        enqueuing, so a launch from another thread cannot slip between the wait and the work)."""
        with self._mutex:
            if self._closed:
                raise ClosedError("this graph", "capture the op again")
            held = self._held
            last, held.last = held.last, ctx
            if last is not None and last != ctx:
                ctx.wait(last._observe())
            return work()

    def _replay_on(self, ctx: ExecutionContext) -> T:
        self._replay.replay(ctx)
        return self._output


class _Held:
    """What an open graph holds: the captured op, and the context of its last launch or update (whose completion
    covers every replay: each waits for the one before it). Shared with the graph's finalizer, which must not hold
    the graph itself."""

    __slots__ = ("last", "op")

    def __init__(self, op: DeviceOp[Any]) -> None:
        self.op: DeviceOp[Any] | None = op
        self.last: ExecutionContext | None = None


def _close_quietly(replay: _Replay, held: _Held) -> None:
    """Finalizer of a graph nobody closed: free it (a replay still running completes first: a CUDA graph is freed
    once it is done), and release the captured op once the last launch is done, in the completion's callback (the
    collector never blocks). If that completion cannot be recorded, the op stays held: never released early.
    Failures here have nobody to be reported to."""
    with contextlib.suppress(Exception):
        replay.close()
    op, held.op = held.op, None
    last, held.last = held.last, None
    if op is None:
        return

    def release(_error: object = None) -> None:
        with contextlib.suppress(Exception):
            op._release()

    if last is None:  # never launched: nothing of it runs
        release()
        return
    with contextlib.suppress(Exception):
        last._observe().add_done_callback(release)


class _GraphLaunch(DeviceOp[T]):
    __slots__ = ("_graph",)

    def __init__(self, graph: Graph[T]) -> None:
        super().__init__()
        self._graph = graph

    def _execute(self, ctx: ExecutionContext) -> T:
        graph = self._graph
        return graph._ordered(ctx, lambda: graph._replay_on(ctx))

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        return "a graph launch cannot be recorded into another graph"

    def _drop(self) -> None:
        del self._graph


class _GraphUpdate(DeviceOp[U]):
    __slots__ = ("_graph", "_inner")

    def __init__(self, graph: Graph[Any], inner: DeviceOp[U]) -> None:
        super().__init__()
        self._graph = graph
        self._inner = inner

    def _execute(self, ctx: ExecutionContext) -> U:
        inner = self._inner
        return self._graph._ordered(ctx, lambda: inner._run_in(ctx))

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return (self._inner,)

    def _drop(self) -> None:
        del self._graph, self._inner


def capture(op: DeviceOp[T], on: object = None) -> Graph[T]:
    """Capture ``op`` into a graph (see the module docstring).

    Parameters
    ----------
    op : DeviceOp
        The op to record; it is consumed (the graph owns it until closed).
    on : ExecutionContext or tile.core.Stream, optional
        Where to capture; default: the default policy's next context. Replays may run on any context of
        the same device (and kind: CUDA graphs on CUDA streams).

    Raises
    ------
    CaptureError
        When the op tree contains an op that cannot be captured; nothing is recorded.
    """
    from tile.aio import _policy

    _lock.check("capture()")
    ctx = _policy.default_policy().next_context() if on is None else _policy.as_context(on)
    return capture_on(op, ctx, caller_site())


def capture_on(op: DeviceOp[T], ctx: ExecutionContext, site: Site) -> Graph[T]:
    """Capture ``op`` on ``ctx`` (``site``: where the user asked, for error messages)."""
    refuse_recorder(ctx, "graph capture")  # (a CUDA recorder is a CudaContext: a capture inside a capture)
    if not isinstance(ctx, (HostStream, _cuda.CudaContext)):
        raise ContextMismatchError("graph capture", "a host stream or a CUDA stream", repr(ctx))
    if (found := op._first_refusal(ctx)) is not None:
        culprit, reason = found
        raise CaptureError(culprit._describe(), reason)
    _lock.acquire("capture")
    try:
        op._claim("captured into a graph", site)
        recorder: _HostRecorder | _cuda.CudaRecorder
        recorder = _HostRecorder() if isinstance(ctx, HostStream) else _cuda.CudaRecorder(ctx)
        try:
            output = op._run_in(recorder)
        except BaseException:
            recorder.abort()
            op._release()
            raise
        try:
            replay: _Replay = recorder.finish()
        except BaseException:  # instantiation failed: nothing was recorded that could run
            op._release()
            raise
    finally:
        _lock.release()
    return Graph(op, output, replay, ctx, recorder)
