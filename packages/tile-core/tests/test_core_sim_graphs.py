"""The simulated driver's stream capture and graphs (tile.core.testing._graphs), over the real tile.core.

A capture keeps the work enqueued on the capturing stream as the graph's nodes instead of running it; event records
and waits between captured streams are edges; a replay runs the nodes on the launch stream. These are what the graph
tests of tile.aio and tile.frontend count nodes and calls with, so each rule is checked here against its mutant.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from cuda.bindings import driver as real

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, counting_calls, simulated, sm90_cubin

OK = real.CUresult.CUDA_SUCCESS
MODE = real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL


@pytest.fixture(params=[False, True], ids=["immediate", "asynchronous"])
def sim(request: pytest.FixtureRequest) -> Iterator[SimDriver]:
    with simulated(asynchronous=request.param, seed=3) as driver:
        yield driver
    assert driver.bugs == [], driver.bugs


@pytest.fixture
def vec_add(sim: SimDriver) -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def _buffers(stream: tc.Stream) -> tuple[tc.DeviceBuffer, ...]:
    x = tc.DeviceBuffer.from_host(np.arange(128, dtype=np.float32), stream=stream)
    y = tc.DeviceBuffer.from_host(np.ones(128, np.float32), stream=stream)
    return x, y, tc.DeviceBuffer.allocate(512, stream=stream)


def _end(sim: SimDriver, stream: tc.Stream) -> int:
    status, graph = sim.cuStreamEndCapture(stream.handle)
    assert status == OK, status
    return int(graph)


def test_captured_work_is_kept_as_nodes_and_each_replay_runs_it(sim: SimDriver, vec_add: tc.Function) -> None:
    """Mutant killed: the capture running the work (z filled at capture) or the replay not running it."""
    stream = tc.Stream()
    x, y, z = _buffers(stream)
    stream.synchronize()
    args = [x, 128, 1, y, 128, 1, z, 128, 1]
    assert sim.cuStreamBeginCapture(stream.handle, MODE) == (OK,)
    assert stream.is_capturing()
    tc.launch(vec_add, 1, 1, args, stream=stream, signature=VEC_ADD_SIGNATURE)
    z.fill(0, stream=stream, sync=False)
    tc.launch(vec_add, 1, 1, args, stream=stream, signature=VEC_ADD_SIGNATURE)
    graph = _end(sim, stream)
    assert not stream.is_capturing()
    assert sim.graphs[graph].kinds == ["kernel", "memset", "kernel"]
    assert sim.kinds("launch") == []  # nothing ran
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.zeros(128, np.float32))
    status, exe = sim.cuGraphInstantiate(graph, 0)
    assert status == OK
    with counting_calls(sim) as calls:
        for _ in range(2):
            assert sim.cuGraphLaunch(exe, stream.handle) == (OK,)
    assert dict(calls) == {"cuGraphLaunch": 2}
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(128) + 1)
    assert len(sim.kinds("launch")) == 4
    assert sim.cuGraphExecDestroy(exe) == (OK,)
    assert sim.cuGraphLaunch(exe, stream.handle) == (real.CUresult.CUDA_ERROR_INVALID_VALUE,)
    assert sim.cuGraphDestroy(graph) == (OK,)
    assert sim.graphs == {}
    assert sim.execs == {}


def test_a_fork_joins_the_capture_and_its_events_are_edges_not_nodes(sim: SimDriver, vec_add: tc.Function) -> None:
    """A stream that waits for an event recorded in the capture joins it; the record and the waits are edges.
    Mutants killed: the joined stream's kernel run at capture (not captured), records counted as nodes."""
    stream, side = tc.Stream(), tc.Stream()
    x, y, z = _buffers(side)  # used on their home stream: no cross-stream ordering in the capture
    side.synchronize()
    args = [x, 128, 1, y, 128, 1, z, 128, 1]
    sim.cuStreamBeginCapture(stream.handle, MODE)
    side.wait(stream.record())  # forks: side joins
    assert side.is_capturing()
    tc.launch(vec_add, 1, 1, args, stream=side, signature=VEC_ADD_SIGNATURE)
    stream.wait(side.record())  # joins back
    graph = _end(sim, stream)
    assert not side.is_capturing()
    assert sim.graphs[graph].kinds == ["kernel"]
    assert [w.kind for w in sim.graphs[graph].work] == ["record", "wait", "kernel", "record", "wait"]
    assert sim.kinds("launch") == []
    sim.cuGraphDestroy(graph)


def test_an_unjoined_fork_fails_the_end_of_the_capture(sim: SimDriver, vec_add: tc.Function) -> None:
    """As the driver: CUDA_ERROR_STREAM_CAPTURE_UNJOINED, and every stream leaves the capture.
    Mutant killed: EndCapture not checking the joins."""
    stream, side = tc.Stream(), tc.Stream()
    x, y, z = _buffers(side)  # used on their home stream: no cross-stream ordering in the capture
    side.synchronize()
    sim.cuStreamBeginCapture(stream.handle, MODE)
    side.wait(stream.record())
    tc.launch(vec_add, 1, 1, [x, 128, 1, y, 128, 1, z, 128, 1], stream=side, signature=VEC_ADD_SIGNATURE)
    status, graph = sim.cuStreamEndCapture(stream.handle)
    assert status == real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNJOINED
    assert graph is None
    assert not stream.is_capturing()
    assert not side.is_capturing()
    assert sim.graphs == {}


def test_captured_events_and_capturing_streams_refuse_queries(sim: SimDriver) -> None:
    """Querying or synchronizing an event last recorded in a capture, or querying a capturing stream, fails as in
    the driver. Mutant killed: the captured record reported done (a wait that never waited)."""
    stream = tc.Stream()
    sim.cuStreamBeginCapture(stream.handle, MODE)
    event = tc.Event()
    event.record(stream)
    assert sim.cuEventQuery(event.handle) == (real.CUresult.CUDA_ERROR_CAPTURED_EVENT,)
    assert sim.cuEventSynchronize(event.handle) == (real.CUresult.CUDA_ERROR_CAPTURED_EVENT,)
    assert sim.cuStreamQuery(stream.handle) == (real.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
    assert sim.cuStreamBeginCapture(stream.handle, MODE) == (real.CUresult.CUDA_ERROR_ILLEGAL_STATE,)
    graph = _end(sim, stream)
    assert sim.graphs[graph].kinds == []
    sim.cuGraphDestroy(graph)


def test_node_types_are_reported_for_the_graph_checks(sim: SimDriver) -> None:
    """cuGraphGetNodes/cuGraphNodeGetType answer what tile.aio's memory-node refusal reads: a free enqueued on the
    capturing stream is a MEM_FREE node. Mutant killed: every node typed as a kernel."""
    stream = tc.Stream()
    buffer = tc.DeviceBuffer.allocate(64, stream=stream)
    stream.synchronize()
    sim.cuStreamBeginCapture(stream.handle, MODE)
    sim.cuMemsetD32Async(buffer.ptr, 0, 16, stream.handle)
    sim.cuMemFreeAsync(buffer.ptr, stream.handle)  # straight on the driver: tile.core never frees in a capture
    graph = _end(sim, stream)
    status, nodes, count = sim.cuGraphGetNodes(graph, 8)
    assert status == OK
    assert count == 2
    types = [sim.cuGraphNodeGetType(node)[1] for node in nodes]
    kinds = real.CUgraphNodeType
    assert types == [kinds.CU_GRAPH_NODE_TYPE_MEMSET, kinds.CU_GRAPH_NODE_TYPE_MEM_FREE]
    sim.cuGraphDestroy(graph)
    sim.freeing.discard(buffer.ptr)  # the captured free never ran: the buffer frees itself at the end
