# ruff: noqa: N802 - the simulator mirrors the CUDA driver's function names (cuStreamBeginCapture, ...)
"""Stream capture and graphs for the simulated driver: what a capture records, and replays that run it.

While a stream captures (``cuStreamBeginCapture``), the work enqueued on it is not run but kept, in call order, as the
graph's nodes: kernels, copies, memsets, host functions, stream-ordered allocations and frees. An event recorded there
and waited for by a captured stream is an edge of the graph, not a node (as in the driver); a stream that waits for
such an event joins the capture, and its later work is captured too, until ``cuStreamEndCapture`` on the origin
stream, which refuses a joined stream whose last work no captured stream waited for
(``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``). Querying or synchronizing an event last recorded in a capture is
``CUDA_ERROR_CAPTURED_EVENT``, and a capturing stream cannot be queried.

``cuGraphLaunch`` enqueues the graph's nodes on the launch stream, in capture order (a valid order of the captured
edges), as one piece of work each: the memory checks of :mod:`._driver` see each replay's kernels, and an asynchronous
simulator runs them when the host waits, as a GPU would. ``SimGraph.kinds`` lists a graph's node kinds: what a replay
costs the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuda.bindings import driver as real

from tile.core.testing._streams import OK, SimStreams, Work

# What each captured kind of work is in the graph (record and wait are edges between nodes, not nodes).
NODE_TYPES = {
    "kernel": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL,
    "memcpy": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY,
    "memset": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET,
    "host": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST,
    "alloc": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC,
    "free": real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_FREE,
}
_EDGES = ("record", "wait")
_ERR = real.CUresult


@dataclass(eq=False)
class SimGraph:
    """A captured graph: its origin stream and the captured work, in call order (records and waits included)."""

    origin: int
    work: list[Work] = field(default_factory=list)
    streams: set[int] = field(default_factory=set)  # the origin and every stream that joined the capture

    @property
    def nodes(self) -> list[Work]:
        """The graph's nodes (the captured work other than event records and waits, which are its edges)."""
        return [w for w in self.work if w.kind not in _EDGES]

    @property
    def kinds(self) -> list[str]:
        """Each node's kind (kernel, memcpy, memset, host, alloc, free), in capture order."""
        return [w.kind for w in self.nodes]

    def unjoined(self) -> list[int]:
        """The joined streams whose last captured work is not an event record a later captured wait waits for."""
        waited = {w.waits_for for w in self.work if w.kind == "wait"}
        found = []
        for stream in sorted(self.streams - {self.origin}):
            last = next((w for w in reversed(self.work) if w.stream == stream), None)
            if last is None or last.kind != "record" or last.record not in waited:
                found.append(stream)
        return found


class SimGraphs(SimStreams):
    """Capture and graph entry points of the simulated driver (mixed into :class:`SimDriver`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capture_of: dict[int, SimGraph] = {}  # capturing stream -> its capture
        self.captured_records: dict[int, SimGraph] = {}  # record id -> the capture that holds it
        self.graphs: dict[int, SimGraph] = {}  # live graphs (cuGraphDestroy removes)
        self.execs: dict[int, SimGraph] = {}  # live executables (cuGraphExecDestroy removes)
        self.node_kinds: dict[int, str] = {}  # node handle -> kind

    def enqueue(self, work: Work) -> None:
        capture = self.capture_of.get(work.stream)
        if capture is None:
            super().enqueue(work)
            return
        capture.work.append(work)  # not run: a node (or an edge) of the graph
        if work.record is not None:
            self.captured_records[work.record] = capture

    def _captured(self, event: Any) -> bool:
        record = self.latest_record.get(int(event))
        return record is not None and record in self.captured_records

    # -- capture ----------------------------------------------------------------------------------------------

    def cuStreamBeginCapture(self, stream: Any, mode: Any) -> tuple[Any]:
        st = int(stream)
        if st in self.capture_of:
            return (_ERR.CUDA_ERROR_ILLEGAL_STATE,)
        self.capture_of[st] = SimGraph(st, streams={st})
        self.capturing.add(st)
        self.log.append(("begin_capture", st))
        return (OK,)

    def cuStreamEndCapture(self, stream: Any) -> tuple[Any, Any]:
        st = int(stream)
        capture = self.capture_of.get(st)
        if capture is None:
            return _ERR.CUDA_ERROR_ILLEGAL_STATE, None
        if capture.origin != st:
            return _ERR.CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, None
        for joined in capture.streams:  # the capture ends either way (an unjoined one is invalidated)
            del self.capture_of[joined]
            self.capturing.discard(joined)
        self.log.append(("end_capture", st))
        if capture.unjoined():
            return _ERR.CUDA_ERROR_STREAM_CAPTURE_UNJOINED, None
        handle = next(self.ids)
        self.graphs[handle] = capture
        for node in capture.nodes:
            self.node_kinds[id(node)] = node.kind
        return OK, real.CUgraph(handle)

    def cuStreamWaitEvent(self, stream: Any, event: Any, flags: int) -> tuple[Any]:
        st, capture = int(stream), self.captured_records.get(self.latest_record.get(int(event), -1))
        if capture is not None and self.capture_of.get(st, capture) is not capture:
            return (_ERR.CUDA_ERROR_STREAM_CAPTURE_ISOLATION,)  # an event of another capture
        if capture is not None and st not in self.capture_of:  # waiting for captured work: the stream joins
            self.capture_of[st] = capture
            capture.streams.add(st)
            self.capturing.add(st)
        return super().cuStreamWaitEvent(stream, event, flags)

    def cuEventQuery(self, event: Any) -> tuple[Any]:
        if self._captured(event):
            return (_ERR.CUDA_ERROR_CAPTURED_EVENT,)
        return super().cuEventQuery(event)

    def cuEventSynchronize(self, event: Any) -> tuple[Any]:
        if self._captured(event):
            return (_ERR.CUDA_ERROR_CAPTURED_EVENT,)
        return super().cuEventSynchronize(event)

    def cuStreamQuery(self, stream: Any) -> tuple[Any]:
        if int(stream) in self.capture_of:
            return (_ERR.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        return super().cuStreamQuery(stream)

    # -- graphs -----------------------------------------------------------------------------------------------

    def cuGraphGetNodes(self, graph: Any, count: int) -> tuple[Any, list[Any], int]:
        nodes = self.graphs[int(graph)].nodes
        return OK, [real.CUgraphNode(id(node)) for node in nodes[:count]], len(nodes)

    def cuGraphNodeGetType(self, node: Any) -> tuple[Any, Any]:
        return OK, NODE_TYPES[self.node_kinds[int(node)]]

    def cuGraphInstantiate(self, graph: Any, flags: int) -> tuple[Any, Any]:
        found = self.graphs.get(int(graph))
        if found is None:
            return _ERR.CUDA_ERROR_INVALID_VALUE, None
        handle = next(self.ids)
        self.execs[handle] = found
        self.log.append(("instantiate", int(graph), handle))
        return OK, real.CUgraphExec(handle)

    def cuGraphUpload(self, graph_exec: Any, stream: Any) -> tuple[Any]:
        if int(graph_exec) not in self.execs or int(stream) in self.capture_of:
            return (_ERR.CUDA_ERROR_INVALID_VALUE,)
        self.log.append(("upload", int(graph_exec), int(stream)))
        return (OK,)

    def cuGraphLaunch(self, graph_exec: Any, stream: Any) -> tuple[Any]:
        graph, st = self.execs.get(int(graph_exec)), int(stream)
        if graph is None:
            return (_ERR.CUDA_ERROR_INVALID_VALUE,)
        self.log.append(("graph_launch", int(graph_exec), st))
        for node in graph.nodes:
            self.enqueue(Work(st, node.run, list(node.ranges), kind=node.kind))
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec: Any) -> tuple[Any]:
        if self.execs.pop(int(graph_exec), None) is None:
            return (_ERR.CUDA_ERROR_INVALID_VALUE,)
        self.log.append(("exec_destroy", int(graph_exec)))
        return (OK,)

    def cuGraphDestroy(self, graph: Any) -> tuple[Any]:
        if self.graphs.pop(int(graph), None) is None:
            return (_ERR.CUDA_ERROR_INVALID_VALUE,)
        self.log.append(("graph_destroy", int(graph)))
        return (OK,)
