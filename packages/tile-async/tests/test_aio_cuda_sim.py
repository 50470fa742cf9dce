"""The CUDA execution path against a simulated ``tile.core`` and driver (no GPU needed).

``tile.aio._cuda`` reaches tile.core through ``core()`` and the driver through ``driver()``; both are replaced
here. A simulated stream runs launches and copies at once unless it is *held*: then its events stay pending
until :meth:`SimStream.release`, so the waiter-thread path of ``await`` and cross-stream waits are exercised.
The driver logs the calls aio makes itself (host functions, graph capture, instantiate, launch, destroy).
The same behaviour is checked on the H100 by ``test_aio_gpu.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import threading
import weakref
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from cuda.bindings import driver as real

from tile import aio
from tile.aio import _cuda, _lock, _policy

OK = real.CUresult.CUDA_SUCCESS
_handles = itertools.count(0x1000)
CAPTURED: list[Any] = []  # node types recorded while a simulated stream captures


class SimDevice:
    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.current = 0

    def __repr__(self) -> str:
        return f"SimDevice({self.ordinal})"

    def make_current(self) -> None:
        self.current += 1


DEVICES = [SimDevice(0), SimDevice(1)]


class SimEvent:
    def __init__(self, device: SimDevice, *, timing: bool, blocking_sync: bool) -> None:
        self.flags = (timing, blocking_sync)
        self.done = threading.Event()
        self.done.set()

    def query(self) -> bool:
        return self.done.is_set()

    def synchronize(self) -> None:
        assert self.done.wait(timeout=5)


class SimStream:
    registry: ClassVar[dict[int, SimStream]] = {}

    def __init__(self, device: SimDevice) -> None:
        self.device = device
        self.handle = next(_handles)
        SimStream.registry[self.handle] = self
        self.log: list[Any] = []
        self.held: list[SimEvent] | None = None
        self.waited: list[SimEvent] = []
        self.capturing = False
        self.closed = False  # as tile.core.Stream.closed: tile.aio enqueues nothing on a closed stream

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)

    @contextlib.contextmanager
    def in_use(self) -> Iterator[Any]:
        """As tile.core.Stream.in_use: the raw handle for a driver call (this stand-in is never destroyed)."""
        assert not self.closed, "tile.aio checks the stream open first"
        yield real.CUstream(self.handle)

    def hold(self) -> None:
        self.held = []

    def release(self) -> None:
        held, self.held = self.held or [], None
        for event in held:
            event.done.set()

    def record(self, event: SimEvent) -> None:
        if self.held is not None:
            event.done.clear()
            self.held.append(event)

    def wait(self, event: SimEvent) -> None:
        self.waited.append(event)

    def synchronize(self) -> None:
        assert self.held is None, "a held stream would never finish"

    def query(self) -> bool:
        return self.held is None

    def is_capturing(self) -> bool:
        return self.capturing

    @staticmethod
    def borrow(obj: Any) -> SimStream:
        raise AssertionError(f"tests pass SimStreams, not {obj!r}")


class SimBuffer:
    def __init__(self, nbytes: int, device: SimDevice, stream: SimStream) -> None:
        self.data = bytearray(nbytes)
        self.device, self.stream = device, stream
        self.uses: list[SimStream] = []
        self.freed = False

    @classmethod
    def allocate(cls, nbytes: int, *, device: SimDevice, stream: SimStream) -> SimBuffer:
        stream.log.append(("alloc", nbytes))
        if stream.capturing:
            CAPTURED.append(real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return cls(nbytes, device, stream)

    def record_use(self, stream: SimStream) -> None:
        self.uses.append(stream)

    def free(self) -> None:
        self.freed = True


def sim_launch(
    fn: Any, grid: Any, block: Any, args: Any, *, stream: SimStream, shared_mem: int, signature: Any
) -> None:
    stream.log.append(("launch", fn, grid, block, tuple(args), shared_mem, signature))
    if stream.capturing:
        CAPTURED.append(real.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL)
    else:
        fn(*args)


def sim_copy(dst: Any, src: Any, *, stream: SimStream, sync: bool) -> None:
    assert sync is False
    stream.log.append(("copy",))
    if not stream.capturing:
        dst.data[:] = bytes(src)


class SimDriver:
    """The driver calls tile.aio makes itself; handle types and enums come from the real bindings."""

    def __init__(self, core: SimpleNamespace) -> None:
        self.core = core
        self.log: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("cu"):
            raise AttributeError(f"the simulator does not implement {name}")
        return getattr(real, name)

    def stream(self, handle: Any) -> SimStream:
        return SimStream.registry[int(handle)]

    def cuLaunchHostFunc(self, stream: Any, fn: Any, key: int) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("host_func", int(stream)))
        _cuda._c_trampoline(key)  # through ctypes, as the driver would call it
        return (OK,)

    def cuStreamBeginCapture(self, stream: Any, mode: Any) -> Any:  # noqa: N802  # the driver's name
        assert mode == real.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        CAPTURED.clear()
        self.stream(stream).capturing = True
        self.log.append(("begin_capture", int(stream)))
        return (OK,)

    def cuStreamEndCapture(self, stream: Any) -> Any:  # noqa: N802  # the driver's name
        self.stream(stream).capturing = False
        self.log.append(("end_capture", int(stream)))
        return (OK, real.CUgraph(0xABC))

    def cuGraphGetNodes(self, graph: Any, count: int) -> Any:  # noqa: N802  # the driver's name
        nodes = [real.CUgraphNode(i + 1) for i in range(len(CAPTURED))][:count]
        return (OK, nodes, len(CAPTURED))

    def cuGraphNodeGetType(self, node: Any) -> Any:  # noqa: N802  # the driver's name
        return (OK, CAPTURED[int(node) - 1])

    def cuGraphInstantiate(self, graph: Any, flags: int) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("instantiate", int(graph)))
        return (OK, real.CUgraphExec(0xDEF))

    def cuGraphUpload(self, graph_exec: Any, stream: Any) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("upload", int(graph_exec), int(stream)))
        return (OK,)

    def cuGraphLaunch(self, graph_exec: Any, stream: Any) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("graph_launch", int(graph_exec), int(stream)))
        return (OK,)

    def cuGraphExecDestroy(self, graph_exec: Any) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("exec_destroy", int(graph_exec)))
        return (OK,)

    def cuGraphDestroy(self, graph: Any) -> Any:  # noqa: N802  # the driver's name
        self.log.append(("graph_destroy", int(graph)))
        return (OK,)


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimDriver]:
    core = SimpleNamespace(
        Device=lambda ordinal: DEVICES[ordinal],
        Stream=SimStream,
        Event=SimEvent,
        DeviceBuffer=SimBuffer,
        launch=sim_launch,
        copy=sim_copy,
        marks=[],  # begin/end_thread_capture calls: how tile.core learns this thread captures
    )
    core.begin_thread_capture = lambda: core.marks.append("begin")
    core.end_thread_capture = lambda: core.marks.append("end")
    driver = SimDriver(core)
    monkeypatch.setattr(_cuda, "core", lambda: core)
    monkeypatch.setattr(_cuda, "driver", lambda: driver)
    monkeypatch.setattr(_cuda, "is_device", lambda obj: isinstance(obj, SimDevice))
    yield driver
    for dev in DEVICES:  # default pools made for simulated devices must not outlive the simulator
        _policy._policies.pop(dev, None)


def context(sim: SimDriver, ordinal: int = 0) -> tuple[aio.CudaContext, SimStream]:
    stream = sim.core.Stream(DEVICES[ordinal])
    return aio.CudaContext(stream), stream


def test_record_wait_synchronize_query(sim: SimDriver) -> None:
    ctx, stream = context(sim)
    other, other_stream = context(sim)
    assert ctx.device is DEVICES[0]
    done = ctx.record()
    assert isinstance(done, _cuda.CudaCompletion)
    assert done.event.flags == (False, True)  # no timing, blocking sync: waiters sleep
    other.wait(done)
    assert other_stream.waited == [done.event]
    assert ctx.query()
    ctx.synchronize()
    assert ctx == aio.CudaContext(stream)
    assert ctx != other
    assert len({ctx, aio.CudaContext(stream)}) == 1


def test_launch_and_copy_use_the_contexts_stream(sim: SimDriver) -> None:
    ctx, stream = context(sim)
    seen: list[tuple[Any, ...]] = []
    out = aio.launch(lambda *a: seen.append(a), (2, 1, 1), [1, 2.0], signature=("i32", "f32")).sync_on(ctx)
    assert out == (1, 2.0)
    assert seen == [(1, 2.0)]
    assert stream.log[0] == ("launch", stream.log[0][1], (2, 1, 1), (1, 1, 1), (1, 2.0), 0, ("i32", "f32"))
    buf = aio.alloc(4).sync_on(ctx)
    assert isinstance(buf, SimBuffer)
    assert aio.copy(buf, b"abcd").sync_on(ctx) is buf
    assert bytes(buf.data) == b"abcd"
    aio.free(buf).sync_on(ctx)
    assert buf.freed
    assert buf.uses == [stream]  # the stream-ordered free waits for this stream's work


def test_host_work_runs_through_the_host_function_trampoline(sim: SimDriver) -> None:
    ctx, stream = context(sim)
    held: list[bool] = []
    assert aio.host_call(lambda: held.append(_lock.held())).sync_on(ctx) == ()
    assert held == [True]
    assert sim.log == [("host_func", stream.handle)]
    assert _cuda._pending == {}


def test_a_failing_host_function_is_reported_once_and_skips_later_ones(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    log: list[str] = []

    def fail() -> None:
        raise OverflowError("in a host callback")

    op = aio.host_call(fail).then(lambda _: aio.host_call(log.append, "skipped"))
    with pytest.raises(OverflowError, match="in a host callback"):
        op.sync_on(ctx)
    assert log == []
    assert aio.host_call(log.append, "runs").sync_on(ctx) == ("runs",)
    assert log == ["runs"]


def test_a_host_function_stopped_by_a_base_exception_is_reported_as_on_a_host_stream(sim: SimDriver) -> None:
    """SystemExit out of a host function (run by the driver through ctypes, which prints and drops what a callback
    raises) is kept for the op's wait, as a host stream's worker keeps it; before: the op reported success."""
    ctx, _ = context(sim)
    log: list[str] = []

    def stop() -> None:
        raise SystemExit("stopped in a host callback")

    op = aio.host_call(stop).then(lambda _: aio.host_call(log.append, "skipped"))
    with pytest.raises(SystemExit, match="stopped in a host callback"):
        op.sync_on(ctx)
    assert log == []
    assert aio.host_call(log.append, "runs").sync_on(ctx) == ("runs",)


def test_a_cuda_context_waits_for_a_host_completion_in_a_host_function(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    host = aio.HostStream()
    ctx.wait(host.record())
    assert sim.log == [("host_func", ctx.stream.handle)]


def test_await_falls_back_to_a_waiter_thread(sim: SimDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_AIO_SPIN_US", "0")
    ctx, stream = context(sim)
    stream.hold()

    async def main() -> tuple[Any, ...]:
        asyncio.get_running_loop().call_later(0.02, stream.release)
        return await aio.launch(lambda: None, 1, []).schedule(aio.SingleStream(ctx))

    assert asyncio.run(main()) == ()


def test_shared_waits_on_the_first_runs_event_from_another_stream(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    other, other_stream = context(sim)
    shared = aio.value("out").shared()
    assert shared.sync_on(ctx) == "out"
    assert shared.sync_on(other) == "out"
    assert len(other_stream.waited) == 1


def test_capture_replay_and_close_make_the_driver_calls_in_order(sim: SimDriver) -> None:
    ctx, stream = context(sim)
    ran: list[int] = []
    graph = aio.launch(lambda: ran.append(1), 1, []).graph(ctx)
    assert graph.kind == "cuda"
    assert ran == []  # captured, not run
    assert sim.core.marks == ["begin", "end"]  # tile.core knew this thread captured, for exactly the capture
    graph.launch().sync_on(ctx)
    graph.close()
    handle = stream.handle
    assert sim.log == [
        ("begin_capture", handle),
        ("end_capture", handle),
        ("instantiate", 0xABC),
        ("upload", 0xDEF, handle),
        ("graph_launch", 0xDEF, handle),
        ("exec_destroy", 0xDEF),
        ("graph_destroy", 0xABC),
    ]


def test_allocations_that_bypass_the_ops_are_found_in_the_graph(sim: SimDriver) -> None:
    ctx, stream = context(sim)

    def sneaky(c: aio.ExecutionContext) -> None:
        sim.core.DeviceBuffer.allocate(8, device=DEVICES[0], stream=stream)

    op = aio.zip(aio.launch(lambda: None, 1, []), aio.with_context(sneaky, capturable=True))
    with pytest.raises(aio.CaptureError, match=r"work enqueued during the capture.*allocates device memory"):
        op.graph(ctx)
    assert [entry[0] for entry in sim.log] == ["begin_capture", "end_capture", "graph_destroy"]
    assert op.consumed


def test_a_refusal_during_capture_ends_it_and_destroys_the_partial_graph(sim: SimDriver) -> None:
    ctx, stream = context(sim)
    op = aio.launch(lambda: None, 1, []).then(lambda _: aio.alloc(8))
    with pytest.raises(aio.CaptureError, match="allocates"):
        op.graph(ctx)
    assert not stream.capturing
    assert [entry[0] for entry in sim.log] == ["begin_capture", "end_capture", "graph_destroy"]


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (lambda ctx: ctx.enqueue(lambda: None), "host work on a CUDA stream"),
        (lambda ctx: ctx.record(), "recording a completion"),
        (lambda ctx: ctx.synchronize(), "synchronizing"),
        (lambda ctx: ctx.query(), "querying"),
    ],
)
def test_the_recording_context_refuses_what_a_graph_cannot_hold(sim: SimDriver, body: Any, what: str) -> None:
    ctx, stream = context(sim)
    with pytest.raises(aio.CaptureError, match=what):
        aio.with_context(body, capturable=True).graph(ctx)
    assert not stream.capturing


def test_host_calls_are_refused_before_a_cuda_capture_starts(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    with pytest.raises(aio.CaptureError, match="host callback run at every replay"):
        aio.host_call(print).graph(ctx)
    assert sim.log == []


def test_a_cuda_graph_replays_only_on_a_cuda_stream_of_its_device(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    graph = aio.empty().graph(ctx)
    with pytest.raises(aio.ContextMismatchError, match="CUDA graph launch needs a CUDA stream of SimDevice"):
        graph.launch().sync_on(aio.HostStream())
    elsewhere, _ = context(sim, 1)
    with pytest.raises(
        aio.ContextMismatchError, match=r"needs a CUDA stream of SimDevice\(0\).*schedule it with a policy"
    ):
        graph.launch().sync_on(elsewhere)
    graph.close()
    graph.close()
    assert [entry[0] for entry in sim.log].count("exec_destroy") == 1


def test_an_unclosed_graph_is_freed_by_its_finalizer(sim: SimDriver) -> None:
    ctx, _ = context(sim)
    graph = aio.empty().graph(ctx)
    del graph
    gc.collect()
    assert [entry[0] for entry in sim.log][-2:] == ["exec_destroy", "graph_destroy"]


def test_devices_and_default_pools(sim: SimDriver) -> None:
    assert aio.device("cuda:1") is DEVICES[1]
    assert aio.device("cuda") is DEVICES[0]
    assert aio.device(1) is DEVICES[1]
    assert aio.device(DEVICES[1]) is DEVICES[1]
    pool = aio.stream_pool("cuda:1", size=2)
    assert [type(c) for c in pool.contexts] == [aio.CudaContext, aio.CudaContext]
    assert {c.device for c in pool.contexts} == {DEVICES[1]}
    with aio.use_device("cuda:1"):
        assert aio.with_context(lambda c: c.device).sync() is DEVICES[1]


def test_streams_are_wrapped_once(sim: SimDriver) -> None:
    stream = sim.core.Stream(DEVICES[0])
    first = aio.with_context(lambda c: c).sync_on(stream)
    second = aio.with_context(lambda c: c).sync_on(stream)
    assert first is second
    assert isinstance(first, aio.CudaContext)
    assert first.stream is stream


def test_a_stream_keeps_its_context_between_launches_and_the_cache_is_bounded(sim: SimDriver) -> None:
    from tile.aio import _cuda

    stream = sim.core.Stream(DEVICES[0])
    ctx = weakref.ref(aio.as_context(stream))
    assert ctx() is not None  # nobody else holds the context: the recent-streams cache keeps it for the next launch
    assert aio.as_context(stream) is ctx()
    for _ in range(40):  # later streams evict it: the cache must not keep every stream ever used alive
        aio.as_context(sim.core.Stream(DEVICES[0]))
    assert _cuda.wrapped(stream) is None
    assert len(_cuda._recent) <= _cuda._RECENT_CAP
