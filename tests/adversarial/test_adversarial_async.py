"""Safe code that tried to break the safety contract through tile.aio (an outside review), each now stopped.

5. ``.then()``/``.map()`` functions got the launch's handles while its kernel still ran: every use of such a handle
   (reads, views, partition, share, free, exports) is an `InFlightError`, also after it escaped through a closure or
   to another thread; only a launch may take it, and that launch runs after the producer (same stream: in order;
   another stream: it waits). Once the chain is done the handles are live.
6. ``graph.output`` gave live handles to memory every replay writes: they are captured (refusing every use, also as
   another launch's argument) until ``graph.close()``, which hands them back.
8. ``launch.grid(g)`` after the launch was checked skipped the checks made for its grid: any other grid is a
   `GridError` (give it up front), and what launches are checked against on a kernel cannot be reassigned.
2. tile.aio's owning objects (ops, launches, graphs, contexts, completions, policies) refuse copy, deepcopy and
   pickling with `UncopyableError`; errors still pickle.

The kernels are kernel-language source (shape strings are const generics, not Python names), so they are written to
a file and imported from there.
"""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import load_source  # a sibling helper module

from tile import aio
from tile.frontend import f32
from tile.frontend._errors import FrozenError, GridError, InFlightError, MovedError

SOURCE = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry
def accumulate(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.load() + tile.load_tile_like(x, z))
"""

N = 1024
HERE = Path(__file__).name


@pytest.fixture(scope="module")
def k(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return load_source("async_kernels", SOURCE, tmp_path_factory.mktemp("adversarial_async"))


@pytest.fixture
def stream() -> Iterator[aio.HostStream]:
    s = aio.HostStream()
    yield s
    s.close()


def _args() -> tuple[tile.Partition, tile.Tensor, tile.Tensor]:
    return tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])


def _leak_into(leaked: list[tuple[Any, ...]]) -> Callable[[tuple[Any, ...]], aio.DeviceOp[None]]:
    """A .then() function that lets the handles it gets escape (into ``leaked``) and chains nothing."""

    def fn(out: tuple[Any, ...]) -> aio.DeviceOp[None]:
        leaked.append(out)
        return aio.empty()

    return fn


# -- 5. then/map functions get handles in flight --------------------------------------------------------------------

MISUSES: dict[str, Callable[[tuple[Any, ...]], object]] = {
    "to_numpy": lambda out: out[1].to_numpy(),
    "__dlpack__": lambda out: out[1].__dlpack__(),
    "np.asarray": lambda out: np.asarray(out[1]),
    "view": lambda out: out[1][0:4],
    "reshape": lambda out: out[1].reshape(32, 32),
    "partition": lambda out: out[1].partition([128]),
    "share": lambda out: out[1].share(),
    "free": lambda out: out[1].free(),
    "copy": lambda out: out[1].copy(),
    "data_ptr": lambda out: out[1].data_ptr(),
}  # unpartition() of the partition is allowed in flight: see test_an_output_unpartitioned_in_flight_feeds_...


def _assert_in_flight(error: InFlightError, handle: str, launch_line: int) -> None:
    text = str(error)
    assert handle in text
    assert "the launch of add at " in text
    assert f"{HERE}:{launch_line}" in text, text
    assert "before its work was done" in text
    assert "may only pass it to a launch it returns" in text
    assert ".sync()/await" in text


@pytest.mark.parametrize("misuse", sorted(MISUSES))
@pytest.mark.parametrize("combinator", ["then", "map"])
def test_a_then_or_map_function_cannot_use_the_handles_it_gets(
    k: ModuleType, stream: aio.HostStream, misuse: str, combinator: str
) -> None:
    caught: list[BaseException] = []

    def fn(out: tuple[Any, ...]) -> Any:
        try:
            MISUSES[misuse](out)
        except BaseException as exc:  # recorded and asserted below, after the chain is done
            caught.append(exc)
        return aio.value(out) if combinator == "then" else out

    line = sys._getframe().f_lineno + 1
    op = k.add(*_args())
    chained = op.then(fn) if combinator == "then" else op.map(fn)
    z, x, _ = chained.sync_on(stream)
    assert len(caught) == 1, caught
    assert type(caught[0]) is InFlightError, caught
    assert isinstance(caught[0], MovedError)  # every handle misuse is still an ownership error
    _assert_in_flight(caught[0], f"Tensor(f32, [{N}]) created at", line)
    # Once the chain is done the handles it hands back are live, and nothing was read half-written.
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))


def test_a_handle_that_escapes_the_function_is_caught_until_the_chain_is_done(k: ModuleType) -> None:
    stream = aio.HostStream(worker=True)  # the work runs on its own thread, after the functions returned
    leaked: list[tuple[Any, ...]] = []
    gate = threading.Event()
    blocked = aio.host_call(gate.wait)  # the "kernel" still runs until the gate opens
    line = sys._getframe().f_lineno + 1
    op = blocked.then(lambda _: k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])))
    op = op.then(_leak_into(leaked))
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(op.sync_on(stream)))
    worker.start()
    try:
        while not leaked:
            time.sleep(0.001)
        z, x = leaked[0]
        t = z.unpartition()  # allowed in flight: an in-flight tensor, only for a launch (ordered after the writer)
        for use in (t.to_numpy, x.to_numpy, x.free, lambda: x[1:3], lambda: x.partition([128])):
            with pytest.raises(InFlightError, match="before its work was done") as info:
                use()
            assert f"{HERE}:{line}" in str(info.value)
    finally:
        gate.set()
        worker.join()
        stream.close()
    # The escaped handles are live once the producer's work is done, but for the one taken out of the partition in
    # flight: nothing ordered it after the writer, so it stays in flight.
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))
    with pytest.raises(InFlightError, match="before its work was done"):
        t.to_numpy()


def test_a_launch_on_another_stream_waits_for_the_launch_that_lent_its_handles(k: ModuleType) -> None:
    stream = aio.HostStream(worker=True)
    leaked: list[tuple[Any, ...]] = []
    gate = threading.Event()
    op = aio.host_call(gate.wait).then(lambda _: k.add(*_args()))  # z = x + y = 2, once the gate opens
    op = op.then(_leak_into(leaked))
    worker = threading.Thread(target=op.sync_on, args=(stream,))
    worker.start()
    other = aio.HostStream(worker=True)
    try:
        while not leaked:
            time.sleep(0.001)
        second = k.accumulate(*leaked[0][:2])  # z += x: a second writer, made while the first is not done
        threading.Timer(0.05, gate.set).start()
        z, _ = second.sync_on(other)  # on another stream: it first waits for the producer (never races it)
    finally:
        gate.set()
        worker.join()
        other.close()
        stream.close()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3, np.float32))  # 1 if it overtook add


def test_chaining_launches_in_then_is_still_the_way(k: ModuleType, stream: aio.HostStream) -> None:
    op = k.add(*_args())
    for _ in range(4):
        op = op.then(lambda out: k.accumulate(out[0], out[1]))
    mapped = op.map(lambda out: out[0])
    z = mapped.sync_on(stream)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 6, np.float32))


def test_a_sync_inside_the_function_is_refused(k: ModuleType, stream: aio.HostStream) -> None:
    def fn(out: tuple[Any, ...]) -> Any:
        return aio.value(k.accumulate(out[0], out[1]).sync())

    with pytest.raises(aio.ExecutionLockError, match=r"Return a DeviceOp from \.then"):
        k.add(*_args()).then(fn).sync_on(stream)


def test_an_output_unpartitioned_in_flight_feeds_the_next_launch(k: ModuleType, stream: aio.HostStream) -> None:
    """The form a multi-kernel step needs (a layer's output is the next kernel's input) without waiting between them:
    the unpartitioned tensor is in flight, so only the launch the function returns can take it, after the writer."""
    seen: list[BaseException] = []

    def fn(out: tuple[Any, ...]) -> Any:
        t = out[0].unpartition()
        for use in (t.to_numpy, lambda: t[0:4], lambda: t.partition([128]), t.free):
            try:
                use()
            except InFlightError as exc:
                seen.append(exc)
        return k.add(tile.zeros(f32, [N]).partition([128]), t, out[1])

    y, t, _x = k.add(*_args()).then(fn).sync_on(stream)
    assert len(seen) == 4
    assert "may only pass it to a launch it returns" in str(seen[0])
    np.testing.assert_array_equal(y.unpartition().to_numpy(), np.full(N, 3, np.float32))
    np.testing.assert_array_equal(t.to_numpy(), np.full(N, 2, np.float32))  # handed back live by the reader
    t.partition([128])  # and exclusive again


def test_in_flight_says_whether_only_a_launch_may_take_a_tensor(k: ModuleType, stream: aio.HostStream) -> None:
    """`Tensor.in_flight` lets library code choose between moving a handle into a launch and borrowing a view."""
    states: list[bool] = []

    def fn(out: tuple[Any, ...]) -> Any:
        t = out[0].unpartition()
        states.extend([t.in_flight, out[1].in_flight])
        return k.add(tile.zeros(f32, [N]).partition([128]), t, out[1])

    fresh = tile.zeros(f32, [N])
    _y, t, x = k.add(*_args()).then(fn).sync_on(stream)
    assert states == [True, True]
    assert not t.in_flight  # handed back live once the chain is done
    assert not x.in_flight
    assert not fresh.in_flight


def test_a_borrow_of_an_output_unpartitioned_in_flight_is_refused(k: ModuleType, stream: aio.HostStream) -> None:
    """The writer may still run when the function unpartitions its output: the memory stays held against new borrows
    (which would read it mid-kernel) until the writer's launch is done."""
    a = np.zeros(N, np.float32)
    refused: list[str] = []  # messages only: a traceback would keep the moved partition (and its hold) alive

    def fn(out: tuple[Any, ...]) -> Any:
        t = out[0].unpartition()
        try:
            tile.from_dlpack(a)
        except tile.BorrowError as exc:
            refused.append(str(exc))
        return k.add(tile.zeros(f32, [N]).partition([128]), t, out[1])

    _y, t, _ = k.add(tile.from_dlpack(a).partition([128]), *_args()[1:]).then(fn).sync_on(stream)
    assert len(refused) == 1
    assert "a writer holds it" in refused[0]
    del t
    np.testing.assert_array_equal(tile.from_dlpack(a).to_numpy(), np.full(N, 2, np.float32))  # the writer is done


def test_an_output_unpartitioned_in_flight_that_escapes_stays_in_flight(k: ModuleType, stream: aio.HostStream) -> None:
    """Not passed to a launch, the tensor never gets an ordering: it stays unusable (its writer may have run or not)."""
    z, x, _ = k.add(*_args()).map(lambda out: (out[0].unpartition(), out[1], out[2])).sync_on(stream)
    with pytest.raises(InFlightError, match="may only pass it to a launch it returns"):
        z.to_numpy()
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))


def test_a_captured_step_passes_an_output_on_in_flight(k: ModuleType, stream: aio.HostStream) -> None:
    """A two-kernel step captured once and replayed: the second kernel reads the first one's output each replay."""
    z0, x0, _ = _args()

    def fn(out: tuple[Any, ...]) -> Any:
        return k.add(tile.zeros(f32, [N]).partition([128]), out[0].unpartition(), out[1])

    graph = k.accumulate(z0, x0).then(fn).graph(stream)
    for _ in range(3):
        graph.launch().sync_on(stream)
    y, z, _x = graph.close()
    np.testing.assert_array_equal(z.to_numpy(), np.full(N, 3, np.float32))  # 3 replays of z += x (capture runs none)
    np.testing.assert_array_equal(y.unpartition().to_numpy(), np.full(N, 4, np.float32))  # the last z + x


# -- 6. graph outputs ------------------------------------------------------------------------------------------------

GRAPH_MISUSES: dict[str, Callable[[tuple[Any, ...]], object]] = {
    "unpartition": lambda out: out[0].unpartition(),
    "to_numpy": lambda out: out[1].to_numpy(),
    "free": lambda out: out[1].free(),
    "view": lambda out: out[1][2:],
    "partition": lambda out: out[1].partition([128]),
}


@pytest.mark.parametrize("misuse", sorted(GRAPH_MISUSES))
@pytest.mark.parametrize("source", ["output", "launch"])
def test_graph_outputs_belong_to_the_graph_until_it_is_closed(
    k: ModuleType, stream: aio.HostStream, misuse: str, source: str
) -> None:
    line = sys._getframe().f_lineno + 1
    graph = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph(stream)
    out = graph.output if source == "output" else graph.launch().sync_on(stream)
    with pytest.raises(InFlightError) as info:
        GRAPH_MISUSES[misuse](out)
    text = str(info.value)
    assert "captured into a graph by the launch of accumulate at " in text
    assert f"{HERE}:{line}" in text
    assert "graph.close()" in text
    z, _ = graph.close()
    expected = 1 if source == "launch" else 0
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, expected, np.float32))


def test_a_graph_output_cannot_become_another_launch_input(k: ModuleType, stream: aio.HostStream) -> None:
    with k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph(stream) as graph:
        z, x = graph.output
        with pytest.raises(InFlightError, match=r"belongs to the graph until graph\.close"):
            k.accumulate(z, x)
        with pytest.raises(InFlightError, match="belongs to the graph"):
            k.add(tile.zeros(f32, [N]).partition([128]), x, x)
        graph.launch().sync_on(stream)
    z, x = graph.output
    z, x = k.accumulate(z, x).sync_on(stream)  # closed: live again
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))


def test_a_launch_made_during_a_capture_cannot_run_outside_it(k: ModuleType, stream: aio.HostStream) -> None:
    escaped: list[Any] = []

    def fn(out: tuple[Any, ...]) -> Any:
        escaped.append(k.accumulate(out[0], out[1]))  # made in the capture, not returned into it
        return aio.value(None)

    graph = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).then(fn).graph(stream)
    with pytest.raises(InFlightError, match="captured into a graph") as info:
        escaped[0].sync_on(stream)
    assert "(arguments of the launch of accumulate at" in str(info.value)
    graph.close()


def test_replay_then_close_then_read(k: ModuleType, stream: aio.HostStream) -> None:
    op = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]))
    graph = op.then(lambda out: k.accumulate(*out)).graph(stream)  # two launches per replay
    for _ in range(3):
        graph.launch().sync_on(stream)
    z, x = graph.close()
    assert graph.close() is graph.output  # idempotent
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 6, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))


# -- 6b. host data into and out of an open graph ----------------------------------------------------------------------


def test_graph_write_and_graph_read_feed_and_drain_replays(k: ModuleType, stream: aio.HostStream) -> None:
    """Per-replay inputs go into a tensor the graph reads and results come out of its output, each copy ordered
    between replays by graph.update."""
    x = tile.zeros(f32, [N])
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
    for v in (1.0, 5.0, 7.0):
        x = tile.graph_write(graph, x, np.full(N, v)).sync_on(stream)
        graph.launch().sync_on(stream)
        out = tile.graph_read(graph, graph.output[0]).sync_on(stream)
        np.testing.assert_array_equal(out.to_numpy(), np.full(N, v + 1, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(N, 7, np.float32))  # handed back live
    z, _, _ = graph.close()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 8, np.float32))


def test_graph_write_settles_what_other_libraries_queued(
    k: ModuleType, stream: aio.HostStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like a partition, a loan or an in-place collective, graph_write writes memory an export may have handed to
    another library, whose queued work (torch reading a dropped view) must end first: found in review without it."""
    from tile.frontend._storage import Storage

    settled: list[Storage] = []

    def settle(self: Storage) -> None:
        settled.append(self)

    monkeypatch.setattr(Storage, "settle", settle)
    x = tile.zeros(f32, [N])
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
    storage = x._storage
    x = tile.graph_write(graph, x, np.ones(N)).sync_on(stream)
    assert storage in settled
    graph.close()


def test_graph_write_refuses_memory_others_can_see(k: ModuleType, stream: aio.HostStream) -> None:
    """Another live view (or another graph's capture) could read the memory while the copy writes it."""
    x = tile.zeros(f32, [N])
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
    other = k.add(tile.zeros(f32, [256]).partition([128]), x[0:256], tile.ones(f32, [256])).graph(stream)
    with pytest.raises(tile.BorrowError, match="handles the graph did not capture"):
        tile.graph_write(graph, x, np.ones(N))  # the other graph reads x[0:256]
    other.close()  # hands its view of x back live: still another handle
    with pytest.raises(tile.BorrowError, match="handles the graph did not capture"):
        tile.graph_write(graph, x, np.ones(N))
    del other
    view = x[512:]
    with pytest.raises(tile.BorrowError, match="handles the graph did not capture"):
        tile.graph_write(graph, x, np.ones(N))
    del view
    with pytest.raises(tile.ArgumentError, match=r"data has shape \[3\]"):
        tile.graph_write(graph, x, np.ones(3))
    x = tile.graph_write(graph, x, np.ones(N)).sync_on(stream)  # nothing refused moved x
    graph.close()
    with pytest.raises(aio.ClosedError, match="is closed"):
        tile.graph_write(graph, x, np.ones(N))
    np.testing.assert_array_equal(x.to_numpy(), np.ones(N, np.float32))  # a refusal leaves x usable


def test_a_graph_write_never_run_lets_the_memory_go(k: ModuleType, stream: aio.HostStream) -> None:
    """The write holds the tensor's memory from the moment it is made; dropping the op unrun releases it."""
    a = np.zeros(N, np.float32)
    x = tile.from_dlpack(a).copy()
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
    storage = x._storage
    op = tile.graph_write(graph, x, np.ones(N))
    assert storage.pending > 0
    del op
    gc.collect()
    graph.close()
    assert storage.pending == 0
    assert not storage._held


def test_graph_read_takes_only_what_the_graph_captured(k: ModuleType, stream: aio.HostStream) -> None:
    graph = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph(stream)
    other = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph(stream)
    with pytest.raises(InFlightError, match="not captured by this graph"):
        tile.graph_read(graph, tile.ones(f32, [N]))
    with pytest.raises(InFlightError, match="not captured by this graph"):
        tile.graph_read(graph, other.output[0])
    graph.close()
    other.close()


def test_what_graph_write_and_graph_read_return_is_in_flight_until_the_copy_is_done(
    k: ModuleType, stream: aio.HostStream
) -> None:
    x = tile.zeros(f32, [N])
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
    refused: list[str] = []

    def peek(t: tile.Tensor) -> aio.DeviceOp[None]:
        try:
            t.to_numpy()
        except InFlightError as exc:
            refused.append(str(exc))
        return aio.empty()

    graph.update(aio.empty())  # (an update of nothing is fine)
    tile.graph_write(graph, x, np.ones(N)).then(peek).sync_on(stream)
    tile.graph_read(graph, graph.output[0]).then(peek).sync_on(stream)
    assert len(refused) == 2
    assert "before its copy was done" in refused[0]
    graph.close()


# -- 8. mutating what was checked --------------------------------------------------------------------------------------


def test_a_made_launch_keeps_the_grid_it_was_checked_with(k: ModuleType, stream: aio.HostStream) -> None:
    launch = k.add(*_args())
    line = sys._getframe().f_lineno + 2
    with pytest.raises(GridError) as info:
        launch.grid((16, 1, 1))
    text = str(info.value)
    assert f"{HERE}:{line}" in text
    assert "give the grid up front" in text
    assert "add.grid((16, 1, 1))(...)" in text
    assert launch.grid(8) is launch  # its own grid is confirmed
    z, _, _ = launch.sync_on(stream)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))
    # the same grid given up front is checked: it disagrees with the output's
    with pytest.raises(GridError, match=r"explicit grid \[16, 1, 1\] differs .* drop \.grid\(\.\.\.\)"):
        k.add.grid((16, 1, 1))(*_args())


@pytest.mark.parametrize("name", ["unchecked", "params", "fn", "options", "_grid"])
def test_what_launches_are_checked_against_cannot_be_reassigned(k: ModuleType, name: str) -> None:
    k.add(*_args())  # a plan exists
    with pytest.raises(FrozenError, match="launches were checked against it") as info:
        setattr(k.add, name, True)
    assert isinstance(info.value, AttributeError)
    with pytest.raises(FrozenError, match=rf"\.{name} cannot be deleted: launches were checked against it"):
        delattr(k.add, name)
    assert k.add.unchecked is False


# -- 2. copies of owners -------------------------------------------------------------------------------------------


def _owners(k: ModuleType, stream: aio.HostStream) -> dict[str, Any]:
    graph = k.accumulate(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])).graph(stream)
    return {
        "value op": aio.value(1),
        "then op": aio.value(1).then(aio.value),
        "shared op": aio.value(1).shared(),
        "launch": k.add(*_args()),
        "scheduled": aio.value(1).schedule(aio.default_policy("host")),
        "graph": graph,
        "graph launch": graph.launch(),
        "host stream": stream,
        "completion": stream.record(),
        "policy": aio.default_policy("host"),
    }


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_owners_refuse_copies(k: ModuleType, stream: aio.HostStream, how: str) -> None:
    protocols: dict[str, Callable[[Any], object]] = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": pickle.dumps,
    }
    protocol = protocols[how]
    owners = _owners(k, stream)
    try:
        for name, owner in owners.items():
            with pytest.raises(aio.UncopyableError, match="cannot be copied") as info:
                protocol(owner)
            assert isinstance(info.value, TypeError), name
            assert isinstance(info.value, tile.TileError), name
            assert type(owner).__name__ in str(info.value) or "op" in str(info.value), name
    finally:
        owners["graph"].close()


def test_the_errors_still_pickle() -> None:
    errors: list[BaseException] = [
        aio.UncopyableError("<Value op, fresh>", "copy.copy", "build it again"),
        InFlightError("Tensor(f32, [4])", "handed on by the launch of add at x.py:1", "chain it"),
        FrozenError("kernel.unchecked cannot change"),
    ]
    for error in errors:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error)
        assert str(back) == str(error)


# -- GPU: a CUDA stream orders by events -----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_a_launch_on_another_stream_waits_for_the_lender(k: ModuleType, gpu: None) -> None:
    import tile.core as tc

    first, second = tc.Device(0).create_stream(), tc.Device(0).create_stream()
    n = 1 << 22
    leaked: list[tuple[Any, ...]] = []
    op = k.accumulate(tile.zeros(f32, [n]).partition([1024]), tile.ones(f32, [n]))
    for _ in range(20):  # a long producer, so the consumer would overtake it if it did not wait
        op = op.then(lambda out: k.accumulate(*out))
    op = op.then(_leak_into(leaked))
    worker = threading.Thread(target=op.sync_on, args=(first,))
    worker.start()
    while not leaked and worker.is_alive():
        time.sleep(0.0005)
    try:
        z, _ = k.accumulate(*leaked[0]).sync_on(second)  # waits for `first` through an event
    finally:
        worker.join()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(n, 22, np.float32))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_graph_outputs_are_captured_until_closed(k: ModuleType, gpu: None) -> None:
    import tile.core as tc

    s = tc.Device(0).create_stream()
    graph = k.accumulate(tile.zeros(f32, [N]).partition([1024]), tile.ones(f32, [N])).graph(s)
    for _ in range(3):
        z, x = graph.launch().sync_on(s)
        with pytest.raises(InFlightError, match=r"graph\.close"):
            x.to_numpy()
        with pytest.raises(InFlightError, match=r"graph\.close"):
            x.__dlpack__()
    z, x = graph.close()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3, np.float32))


def test_a_launch_refuses_a_context_tile_aio_did_not_make(k: ModuleType) -> None:
    """A user's ExecutionContext could say the work is done while it still runs (synchronize() that returns at once),
    and the launch would hand its memory back mid-kernel: launches run only on tile.aio's own contexts."""

    class Liar(aio.ExecutionContext):
        def __init__(self) -> None:
            self.inner = aio.HostStream()

        @property
        def device(self) -> Any:
            return aio.HOST

        def enqueue(self, fn: Any) -> None:
            self.inner.enqueue(fn)

        def record(self) -> Any:
            return self.inner.record()

        def wait(self, completion: Any) -> None:
            self.inner.wait(completion)

        def synchronize(self) -> None:
            pass  # the lie: nothing waits for the work

        def query(self) -> bool:
            return True

    class SubclassLiar(aio.HostStream):
        def synchronize(self) -> None:
            pass  # a subclass of a builtin context can lie the same way

    for ctx in (Liar(), SubclassLiar()):
        op = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
        with pytest.raises(tile.BackendError, match=r"a context tile.aio did not make") as info:
            op.sync_on(ctx)
        assert HERE in str(info.value)
        assert "tile.core.Stream" in str(info.value)

    # The graph copies move handles too (found in review: they ran on any context, which could then hand x back while
    # the copy still wrote it).
    stream = aio.HostStream()
    for ctx in (Liar(), SubclassLiar()):
        x = tile.zeros(f32, [N])
        graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(stream)
        with pytest.raises(tile.BackendError, match=r"graph_write .* a context tile.aio did not make"):
            tile.graph_write(graph, x, np.ones(N)).sync_on(ctx)
        with pytest.raises(tile.BackendError, match=r"graph_read .* a context tile.aio did not make"):
            tile.graph_read(graph, graph.output[0]).sync_on(ctx)
        graph.close()
    stream.close()
