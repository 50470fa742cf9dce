"""Review 31: an adversarial look, from safe code only, at tile.frontend's host side and tile.aio: graph capture and
replay, handles in flight, exports and loans, reads from other threads, and tile.distributed on gloo. Each hole's test
names it, failed before its fix (both launch paths) and asserts the behaviour or the typed error. The distributed
tests need torch (a one-process gloo group; ``/tmp/mg-torch`` on ``PYTHONPATH`` where it exists) and are skipped
without it.

Holes found and fixed:

- A run rooted on a graph capture's recording context: ``tile.aio.with_context(fn, capturable=True)`` hands ``fn`` the
  recorder (a context like any other), and nothing stopped ``launch.sync_on(recorder)`` (or a policy, ``schedule``,
  ``await``, a capture on it). From another thread while the capture records, the launch's kernel went into the
  graph, the recorder's ``synchronize()`` refused, and the failed run handed the launch's arguments back at once:
  a share it read could be unshared and freed while every replay still read it (the CPU interpreter's replay found
  the freed pointer; on a GPU, a use after free by the graph). After the capture, a CUDA recorder is its stream: the
  kernel ran there while its arguments were handed back. ``tile.aio`` now refuses any run, capture or frontend fast
  ``sync`` on a recorder (`ContextMismatchError`, before the op is claimed): only the capture that made a recorder
  runs ops on it (``tile.aio._context.RECORDING_CONTEXTS``, ``refuse_recorder``).
- A collective (``tile.distributed``) moved into another op (``.then()``, ``zip()``, ``.shared()``, ``.map()``) that
  was dropped without running kept what it held for good: the users of a `Shared` it read (``unshare()`` refused
  forever, "launch(es) holding it are not done") and the pending counts of its memory (a ``free()`` through another
  handle deferred forever, the memory never released). ``Collective.__del__`` handed back only collectives never
  claimed; it now does what ``Launch.__del__`` does since review 17 (one moved into an op and never executed holds
  no work). Not a race or a use after free, but a refused op must leave its handles usable.

Tried and found solid (probed, kept as tests where cheap):

- graphs: one graph replayed from two threads on two worker host streams while a third thread feeds its input with
  ``graph_write`` (every replay and write ordered by ``Graph._ordered``; the result counts whole replays); a share
  read by a captured launch and also viewed by an older live view: ``graph_write`` through that view is refused
  (the share is a handle the graph did not capture); ``copy.deepcopy`` of a captured or in-flight handle
  (InFlightError, nothing read).
- exports: ``np.from_dlpack(t)`` is read-only and numpy refuses to make it writable (``flags.writeable = True``,
  ``setflags``, a new array over its base).
- ``Tensor.to(device)`` from one thread while another partitions the tensor and launches a writer: ``_placement.to``
  is an `owning` step (check and copy under the ownership lock, the collector paused), so the writer waits for the
  copy (test below, the other thread started where ``to()`` reads the elements).
- read, not kept as tests: a cancelled ``await`` and a closed loop hand the run back from the completion's callback
  (review 19); a launch whose ``synchronize()`` is interrupted (``KeyboardInterrupt``) is not handed back on either
  launch path (``run_sync`` and the C ``sync``: a leak, never early); ``host_call`` with Tile handles moves nothing,
  and its function reads them only through the checked methods when it runs (in-flight handles refuse);
  ``Shared.to_numpy`` racing ``unshare``: ``unshare`` moves the inner tensor and its read is one step (values or
  `MovedError`); ``Graph._ordered`` sets the last context and enqueues under the graph's mutex, and ``close()``
  waits for that context, so a replay or update from another thread is ordered or refused (`ClosedError`); a graph
  dropped without ``close()`` keeps its captured memory (its launches keep their pending counts: a leak, never a use
  after free).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32
from tile.frontend._errors import InFlightError
from tile.frontend._tensor import Tensor

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import KERNELS, load_path  # a sibling helper module

N = 1024


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def k() -> ModuleType:
    return load_path("adversarial_handle_kernels", KERNELS / "handle_kernels.py")


# -- 1. Tensor.to() is one step -----------------------------------------------------------------------------------


def test_to_copies_in_one_step_so_no_thread_takes_the_memory_between_check_and_copy(
    k: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: ``to()`` is one step, so a thread that partitions the tensor and writes 7s into it, started where
    ``to()`` reads the elements (a timing device), waits for the copy, which holds the old values."""
    k.fill(tile.zeros(f32, [N]).partition([128]), 7.0).sync()  # compiled before the race
    box: list[Any] = [tile.ones(f32, [N])]
    raced: list[str] = []

    def writer() -> None:
        z = k.fill(box[0].partition([128]), 7.0).sync()
        raced.append("wrote")
        box.append(z)

    elements = Tensor._elements

    def slow_elements(self: Tensor) -> Any:
        if not raced and len(box) == 1:
            thread = threading.Thread(target=writer)
            box.append(thread)
            thread.start()
            thread.join(timeout=0.5)  # finished here only when to() holds nothing
        return elements(self)

    monkeypatch.setattr(Tensor, "_elements", slow_elements)
    copied = box[0].to("cpu")
    monkeypatch.setattr(Tensor, "_elements", elements)
    box[1].join(timeout=30)
    assert raced == ["wrote"]  # the writer ran, after the copy
    np.testing.assert_array_equal(copied.to_numpy(), np.ones(N, np.float32))


def test_to_still_copies_and_refuses_moved_tensors(k: ModuleType, path: str) -> None:
    t = tile.from_numpy(np.arange(N, dtype=np.float32))
    np.testing.assert_array_equal(t.to("cpu").to_numpy(), np.arange(N, dtype=np.float32))
    p = t.partition([128])
    with pytest.raises(tile.MovedError, match=r"moved into \.partition\(\)"):
        t.to("cpu")
    p.unpartition()


# -- 2. graphs from several threads -----------------------------------------------------------------------------------


def test_one_graph_replayed_from_two_threads_while_a_third_feeds_it(k: ModuleType, path: str) -> None:
    """Held: replays on two worker streams and graph_write on a third are ordered one after another (the result
    counts whole replays: every one added 0 before the first write and 1 after it)."""
    streams = [aio.HostStream(worker=True) for _ in range(3)]
    x = tile.zeros(f32, [N])
    graph = k.add(tile.zeros(f32, [N]).partition([128]), x[()], tile.ones(f32, [N])).graph(streams[0])
    rounds, errors = 20, []
    outs: list[np.ndarray[Any, Any]] = []

    def replay(stream: aio.HostStream) -> None:
        try:
            for _ in range(rounds):
                graph.launch().sync_on(stream)
                outs.append(tile.graph_read(graph, graph.output[0]).sync_on(stream).to_numpy())
        except Exception as exc:  # reported below
            errors.append(exc)

    def feed() -> None:
        nonlocal x
        try:
            for i in range(rounds):
                x = tile.graph_write(graph, x, np.full(N, float(i))).sync_on(streams[2])
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replay, args=(s,)) for s in streams[:2]] + [threading.Thread(target=feed)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert not errors
        assert len(outs) == 2 * rounds
        for out in outs:  # z = x + 1 of one whole written x: never a mix of two writes
            assert (out == out[0]).all()
            assert float(out[0]) - 1 in {float(i) for i in range(rounds)}
    finally:
        graph.close()
        for s in streams:
            s.close()


def test_a_share_viewed_before_it_was_shared_cannot_be_written_between_replays(k: ModuleType, path: str) -> None:
    stream = aio.HostStream()
    t = tile.ones(f32, [N])
    view = t[()]
    w = t.share()
    graph = k.add(tile.zeros(f32, [N]).partition([128]), w, tile.ones(f32, [N])).graph(stream)
    with pytest.raises(tile.BorrowError, match="handles the graph did not capture"):
        tile.graph_write(graph, view, np.full(N, 5.0))
    graph.close()
    np.testing.assert_array_equal(w.to_numpy(), np.ones(N, np.float32))


def test_deepcopy_of_captured_and_in_flight_handles_reads_nothing(k: ModuleType, path: str) -> None:
    stream = aio.HostStream()
    graph = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])).graph(stream)
    for handle in graph.output:
        with pytest.raises(InFlightError, match="captured into a graph"):
            copy.deepcopy(handle)
    refused: list[str] = []

    def peek(out: tuple[Any, ...]) -> Any:
        for handle in out:
            with pytest.raises(InFlightError, match="before its work was done"):
                copy.deepcopy(handle)
            refused.append(type(handle).__name__)
        return aio.value(out)

    k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])).then(peek).sync_on(stream)
    assert refused == ["Partition", "Tensor", "Tensor"]
    graph.close()


def test_an_export_stays_read_only() -> None:
    arr = np.from_dlpack(tile.ones(f32, [8]))
    with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
        arr.flags.writeable = True
    with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
        arr.setflags(write=True)


# -- 3. tile.distributed: a collective dropped unrun ------------------------------------------------------------------


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("torch")
    import tile.frontend.distributed as d

    store = tmp_path_factory.mktemp("dist31") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield d
    d.destroy()


def _into_then(op: Any) -> Any:
    return op.then(aio.value)


def _into_zip(op: Any) -> Any:
    return aio.zip(op, aio.value(1))


def _into_shared(op: Any) -> Any:
    return op.shared()


def _into_map(op: Any) -> Any:
    return op.map(lambda out: out)


@pytest.mark.parametrize(
    "combine", [_into_then, _into_zip, _into_shared, _into_map], ids=["then", "zip", "shared", "map"]
)
def test_a_collective_moved_into_an_op_dropped_unrun_gives_its_share_back(group: Any, path: str, combine: Any) -> None:
    """Hole: ``Collective.__del__`` handed back only collectives never claimed; moved into an op that was dropped
    unrun, it kept its share's user for good (``unshare()`` refused forever) and its memory's pending counts."""
    w = tile.ones(f32, [8]).share()
    chain = combine(group.all_gather(tile.zeros(f32, [8]), w))
    assert w.users == 1
    del chain
    gc.collect()
    assert w.users == 0
    t = w.unshare()
    np.testing.assert_array_equal(t.to_numpy(), np.ones(8, np.float32))


def test_a_collective_that_ran_in_a_chain_still_holds_until_done(group: Any, path: str) -> None:
    """Held: a collective moved into a chain that ran keeps its share's user until the chain's work is done (the
    ``__del__`` above hands back only collectives that never executed)."""
    stream = aio.HostStream(worker=True)
    gate = threading.Event()
    w = tile.ones(f32, [8]).share()
    op = aio.zip(aio.host_call(gate.wait), group.all_gather(tile.zeros(f32, [8]), w))
    run = threading.Thread(target=op.sync_on, args=(stream,))
    run.start()
    del op
    gc.collect()
    with pytest.raises(tile.BorrowError, match="launch\\(es\\) holding it are not done"):
        w.unshare()
    gate.set()
    run.join(timeout=30)
    stream.close()
    assert w.unshare().to_numpy().tolist() == [1.0] * 8


# -- 4. a capture's recording context is not a context to run on -------------------------------------------------------


def _recorder_of_a_capture(stream: aio.HostStream, during: Any = None) -> tuple[Any, aio.Graph[Any]]:
    """The recorder a capturable ``with_context`` function is handed (``during(recorder)`` runs while it records)."""
    seen: list[Any] = []

    def fn(ctx: Any) -> None:
        seen.append(ctx)
        if during is not None:
            during(ctx)

    graph = aio.with_context(fn, capturable=True).graph(stream)
    return seen[0], graph


def test_a_launch_run_on_a_recorder_from_another_thread_is_refused(k: ModuleType, path: str) -> None:
    """Hole: from another thread while a capture records, ``launch.sync_on(recorder)`` put the kernel into the graph
    and handed the launch's arguments back when the recorder refused to synchronize: the share it read was unshared
    and freed while every replay still read it."""
    stream = aio.HostStream()
    w = tile.ones(f32, [N]).share()
    ops = [k.add(tile.zeros(f32, [N]).partition([128]), w, tile.ones(f32, [N]))]
    errors: list[BaseException] = []

    def other_thread(recorder: Any) -> None:
        try:
            ops[0].sync_on(recorder)
        except Exception as exc:
            errors.append(exc)

    def during(recorder: Any) -> None:
        thread = threading.Thread(target=other_thread, args=(recorder,))
        thread.start()
        thread.join(timeout=60)

    _, graph = _recorder_of_a_capture(stream, during)
    assert len(errors) == 1
    with pytest.raises(aio.ContextMismatchError, match="recording context of a graph capture"):
        raise errors.pop()
    assert not ops[0].consumed  # refused before the claim: the launch is still the caller's
    graph.launch().sync_on(stream)  # the graph holds nothing of the launch
    graph.close()
    z, _, _ = ops.pop().sync_on(stream)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))
    t = w.unshare()
    np.testing.assert_array_equal(t.to_numpy(), np.ones(N, np.float32))


class _Handing(aio.SchedulingPolicy):
    """A policy handing out one context (here a capture's recorder)."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    @property
    def device(self) -> Any:
        return self._ctx.device

    def next_context(self) -> Any:
        return self._ctx


def _sync_on(op: Any, recorder: Any) -> Any:
    return op.sync_on(recorder)


def _schedule(op: Any, recorder: Any) -> Any:
    return op.schedule(_Handing(recorder)).sync()


def _await(op: Any, recorder: Any) -> Any:
    async def main() -> Any:
        return await op.schedule(_Handing(recorder))

    return asyncio.run(main())


def _capture(op: Any, recorder: Any) -> Any:
    return aio.capture(op, on=recorder)


@pytest.mark.parametrize(
    "run", [_sync_on, _schedule, _await, _capture], ids=["sync_on", "schedule", "await", "capture"]
)
def test_a_recorder_kept_after_its_capture_runs_nothing(k: ModuleType, path: str, run: Any) -> None:
    """Hole (after the capture): a CUDA recorder is its stream, so a launch run on it ran there while the failed run
    (the recorder refuses to synchronize) handed its arguments back; every way to run on one is refused now."""
    stream = aio.HostStream()
    recorder, graph = _recorder_of_a_capture(stream)
    graph.close()
    op = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    with pytest.raises(aio.ContextMismatchError, match="recording context of a graph capture"):
        run(op, recorder)
    assert not op.consumed
    z, _, _ = op.sync_on(stream)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_a_cuda_recorder_kept_after_its_capture_runs_nothing(k: ModuleType, gpu: None, path: str) -> None:
    """The CUDA side of the hole: after the capture the recorder is its stream, so ``sync_on(recorder)`` enqueued
    the kernel there and the failed run (the recorder refuses to synchronize) handed the arguments back while it ran."""
    import tile.core as tc

    stream = tc.Stream()
    warm = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    warm.sync_on(stream)  # compiled and prepared before the capture
    seen: list[Any] = []
    graph = aio.with_context(seen.append, capturable=True).graph(stream)
    graph.close()
    op = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N]))
    with pytest.raises(aio.ContextMismatchError, match="recording context of a graph capture"):
        op.sync_on(seen[0])
    assert not op.consumed
    z, _, _ = op.sync_on(stream)
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 2, np.float32))
