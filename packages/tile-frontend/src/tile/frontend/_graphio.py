"""Host data into and out of a graph between replays: `graph_write` and `graph_read`.

A captured graph bakes its pointers in, so per-replay inputs (a token id, a position) live in tensors the graph reads,
and new values must be copied into them between replays; results the graph writes must be copied out between replays.
Both copies are ops run through ``graph.update(...)``, which orders them after the graph's previous launch and before
its next one, so they never overlap a replay.

Safety: `graph_write` writes a live tensor only when every other Tile handle overlapping its memory is one this graph
captured (the views its launches read), so nothing but the graph's replays can read the memory, and those are ordered;
the tensor is moved into the op (and held against new borrows) until the copy is done, then handed back. `graph_read`
reads a handle this graph captured (an output of its launches), which nothing but its replays writes. Anything else is
refused with `BorrowError` / `InFlightError` before a byte moves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tile.aio
from tile.aio import ClosedError, DeviceOp, ExecutionContext, Graph
from tile.frontend._dtypes import numpy_dtype
from tile.frontend._errors import IN_FLIGHT, ArgumentError, BackendError, BorrowError, InFlight, InFlightError
from tile.frontend._launch import require_builtin_context
from tile.frontend._partition import Partition
from tile.frontend._site import user_site
from tile.frontend._storage import OWNED, overlapping
from tile.frontend._tensor import Tensor

__all__ = ["graph_read", "graph_write"]


def _captured_by(handle: object, graph: Graph[Any]) -> bool:
    fate = getattr(handle, "_fate", None)
    return isinstance(fate, InFlight) and fate[0] == "captured" and graph.recorded_on(fate.ctx)


def _require_graph(op: str, graph: object) -> None:
    """Raise `ArgumentError` unless ``graph`` is a tile.aio ``Graph`` (its exact class): which handles it captured
    (``recorded_on``) decides what the op may write or read, and its ``update`` orders the op with its replays, so an
    object that only looks like a graph could exempt any captured handle and run the copy mid-replay."""
    if type(graph) is not Graph:
        raise ArgumentError(
            f"{op}: graph is a {type(graph).__name__}; pass the tile.aio.Graph that op.graph(stream) returned"
        )


def graph_write(graph: Graph[Any], dst: Tensor, data: object) -> DeviceOp[Tensor]:
    """An op copying host ``data`` into ``dst`` between two replays of ``graph`` (ordered by ``graph.update``).

    Parameters
    ----------
    graph
        An open graph whose captured launches read ``dst`` (through views the capture took).
    dst
        A live, contiguous tensor; moved into the op: use the tensor the op returns (``.sync_on(graph.context)``).
    data
        Anything ``numpy.asarray`` takes, of ``dst``'s shape; converted to ``dst``'s dtype.

    Raises
    ------
    BorrowError
        Some other live handle (not captured by ``graph``) overlaps ``dst``, or ``dst`` is read-only foreign memory.
    ArgumentError
        ``graph`` is not a tile.aio ``Graph``.
    ClosedError
        ``graph`` was closed (checked before ``dst`` is moved).
    ArgumentError
        ``dst`` is not contiguous, or ``data`` has another shape or is not numbers (nothing is moved).
    """
    site = user_site()
    _require_graph("graph_write", graph)
    if graph.closed:
        raise ClosedError("graph_write: this graph", "capture the op again")
    if not isinstance(dst, Tensor):
        raise ArgumentError(f"graph_write: dst is a {type(dst).__name__}; pass the tensor the graph's launches read")
    try:  # numpy's own conversion errors become the typed one (a user __array__'s error is the user's)
        values = np.ascontiguousarray(np.asarray(data), dtype=numpy_dtype(dst.dtype))
    except (ValueError, TypeError, OverflowError) as error:
        raise ArgumentError(
            f"graph_write: data ({type(data).__name__}) cannot be converted to {dst.dtype.name} values: {error}; pass "
            f"numbers, a list of numbers or a numpy array of shape {list(dst.shape)}"
        ) from None
    if values.shape != dst.shape:
        raise ArgumentError(
            f"graph_write: data has shape {list(values.shape)}, {dst._describe()} has {list(dst.shape)}"
        )
    if not dst.is_contiguous:
        raise ArgumentError(f"graph_write: {dst._describe()} is a strided view; write a contiguous tensor")
    with OWNED:
        storage = dst._check()
        if storage.readonly:
            raise BorrowError(f"graph_write: {dst._describe()} borrows read-only foreign memory")
        lo, hi = dst._byte_range()
        others = [h for h in overlapping(storage, lo, hi, exclude=(dst,)) if not _captured_by(h, graph)]
        if others:
            listed = "; ".join(h._describe() for h in others[:4])
            del others
            raise BorrowError(
                f"graph_write at {site}: {dst._describe()} is also viewed by handles the graph did not capture "
                f"({listed}); a write between replays may only race with nothing, so drop them first"
            )
        storage.settle()  # what a former consumer of an export queued on the memory finishes before the copy writes it
        moved = dst._hand_over(("graph_write", f"moved into graph_write at {site}"))
        storage.hold(moved, f"graph_write at {site}")
        storage.pending += 1
    return graph.update(_Write(moved, values))


def graph_read(graph: Graph[Any], src: Tensor | Partition) -> DeviceOp[Tensor]:
    """An op copying ``src``, a tensor or partition ``graph`` captured (from ``graph.output``, or handed on in its
    chain), into a new host tensor between two replays (ordered by ``graph.update``); its output is that tensor
    (``.sync_on(graph.context).to_numpy()``; in flight until the copy is done).

    Raises
    ------
    InFlightError
        ``src`` is not a handle this graph captured (a live handle is read with ``to_numpy()``).
    """
    _require_graph("graph_read", graph)
    if not _captured_by(src, graph):
        raise InFlightError(
            f"graph_read: {src!r}",
            "not captured by this graph",
            "read live tensors with .to_numpy(); pass graph_read what the graph's launches wrote (graph.output)",
        )
    tensor = src._tensor if isinstance(src, Partition) else src
    if not tensor.is_contiguous:
        raise ArgumentError(f"graph_read: {tensor._describe()} is a strided view; read a contiguous tensor")
    return graph.update(_Read(tensor))


def _host_bytes(tensor: Tensor) -> np.ndarray[Any, Any]:
    storage = tensor._storage
    assert storage.host is not None
    lo, hi = (b - storage.address for b in tensor._byte_range())
    return storage.host[lo:hi]


def _device_bytes(tensor: Tensor, writable: bool) -> Any:
    """A byte ``tile.core.DeviceView`` of a device tensor's (contiguous) elements, made without the handle check: the
    op owns the tensor (a write) or the graph does and the op is ordered with its replays (a read)."""
    from tile import core

    storage = tensor._storage
    lo, hi = tensor._byte_range()
    return core.DeviceView(
        lo,
        np.dtype(np.uint8),
        (hi - lo,),
        (1,),
        device=storage.device,  # type: ignore[arg-type]  # device storage always holds a tile.core.Device
        owner=storage.buffer if storage.owned else storage.keepalive,
        buffer=storage.buffer if storage.owned else None,
        readonly=not writable,
    )


def _device_side(op: DeviceOp[Any], tensor: Tensor, ctx: ExecutionContext) -> Any:
    """The stream of ``ctx`` if it can copy ``tensor``'s memory (None for host memory on a host stream); only on
    tile.aio's own contexts, which say truthfully when the copy is done."""
    require_builtin_context(op, ctx)
    on_host = tensor._storage.host is not None
    if on_host and ctx.device is tile.aio.HOST:
        return None
    stream = getattr(ctx, "stream", None)
    if on_host or stream is None:
        raise BackendError(f"{op._describe()} ran on {ctx!r}, which cannot reach {tensor._describe()}'s memory")
    return stream


class _Write(DeviceOp[Tensor]):
    __slots__ = ("_lent", "_ran", "_tensor", "_values")

    def __init__(self, tensor: Tensor, values: np.ndarray[Any, Any]) -> None:
        super().__init__()
        self._tensor: Tensor | None = tensor
        self._values = values
        self._lent: InFlight | None = None
        self._ran = False

    def _describe(self) -> str:
        return "graph_write"

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        return "it copies host data between replays; run it with graph.update(), outside any capture"

    def _execute(self, ctx: ExecutionContext) -> Tensor:
        tensor, values = self._tensor, self._values
        assert tensor is not None, "an op executes once"
        self._ran = True
        stream = _device_side(self, tensor, ctx)
        raw = values.reshape(-1).view(np.uint8)
        if stream is None:
            target = _host_bytes(tensor)

            def run() -> None:
                target[:] = raw

            ctx.enqueue(run)
        else:
            from tile import core

            core.copy(_device_bytes(tensor, writable=True), raw, stream=stream, sync=False)
        self._lent = _lend(tensor, self, ctx)
        return tensor

    def _drop(self) -> None:
        with OWNED:
            tensor, self._tensor = self._tensor, None
            if tensor is not None:
                if tensor._fate is self._lent:
                    tensor._fate = None  # the copy is done: the tensor is live again
                tensor._storage.unhold(tensor)
                tensor._storage.release()

    def __del__(self) -> None:
        # Dropped without ever running (also inside an update that never ran): no copy is pending, so the memory's
        # hold and pending count go now.
        if self._tensor is not None and not self._ran:
            self._drop()


class _Read(DeviceOp[Tensor]):
    __slots__ = ("_lent", "_out", "_tensor")

    def __init__(self, tensor: Tensor) -> None:
        super().__init__()
        self._tensor: Tensor | None = tensor
        self._out: Tensor | None = None
        self._lent: InFlight | None = None

    def _describe(self) -> str:
        return "graph_read"

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        return "it copies to the host between replays; run it with graph.update(), outside any capture"

    def _execute(self, ctx: ExecutionContext) -> Tensor:
        from tile.frontend._create import empty

        tensor = self._tensor
        assert tensor is not None, "an op executes once"
        out = self._out = empty(tensor.dtype, list(tensor.shape), device="cpu")
        target = _host_bytes(out)
        stream = _device_side(self, tensor, ctx)
        if stream is None:
            source = _host_bytes(tensor)

            def run() -> None:
                target[:] = source

            ctx.enqueue(run)
        else:
            from tile import core

            core.copy(target, _device_bytes(tensor, writable=False), stream=stream, sync=False)
        self._lent = _lend(out, self, ctx)
        return out

    def _drop(self) -> None:
        with OWNED:
            out, self._out, self._tensor = self._out, None, None
            if out is not None and out._fate is self._lent:
                out._fate = None  # the copy is done: the host tensor is live


def _lend(tensor: Tensor, op: DeviceOp[Any], ctx: ExecutionContext) -> InFlight:
    """Give ``tensor`` (an op's output) the in-flight fate until the op's work is done, as a launch does: whoever gets
    it early (a ``.then()`` function) can only pass it to a launch."""
    fate = InFlight.make(IN_FLIGHT, f"handed on by {op._describe()} before its copy was done", ctx, "")
    tensor._fate = fate
    return fate
