"""Adversarial review 36 of tile.frontend and tile.aio, from safe code only, on both launch paths (``path``): a
``KeyboardInterrupt`` landing in a run's bookkeeping (``tile.aio._run``) or in ``Graph.close()``, an ``await`` of a
parked run, finalizers run by the cyclic collector in the middle of a launch's check-then-act steps, and Tile handles
passed through ``functools.partial``, bound methods and host callbacks. The interrupt is simulated where CPython
delivers one: at the entry of a Python call, or in a blocking wait (a patched function raising it); the device work is
a gated worker host stream (the ``gated`` fixture of ``conftest.py``, `tile.aio.testing.interrupted_waits`, shared
with review 35 and ``test_frontend_interrupt.py``). Each hole's test names it and failed before its fix.

Holes found and fixed:

- The pure path's ``.sync()`` (`run_sync`) and the asyncio run (`Run`) gave the execution lock back by calling
  ``_lock.release()`` between the enqueue and the wait. CPython delivers a ``KeyboardInterrupt`` at a Python call's
  entry, so Ctrl-C there (a notebook's interrupt goes on in the same process) raised before the lock was cleared and
  before the run waited or parked: the thread's lock stayed held for good (every later ``.sync()``, ``await``,
  ``.graph()`` of the thread: `ExecutionLockError`), and the launch kept its handles for good (neither released by a
  completion nor resumable: ``.sync()`` raised `OpConsumedError`). The lock is now cleared by a plain attribute store
  (no Python call, nowhere for the interrupt to land); the next call is the wait's, whose interrupt parks the run.
  (The compiled ``sync`` clears it in C and was not affected.)
- ``await`` (`run_async`) set up the wait by ``ctx.query()``, a spin and ``ctx.record()``, with only ``except
  Exception`` around them: an interrupt there left the run claimed with its work enqueued and nobody to release it
  (its handles kept for good, ``.sync()`` refused); the same in its blocking error path (`_finish_blocking`, a failed
  poll). A ``BaseException`` there now parks the run (`park`): its handles go back once the work is done, and
  ``.sync()`` or ``await`` resumes it.
- ``Graph.close()`` waited for the last replay in a ``try`` whose ``finally`` released the captured op: a
  ``KeyboardInterrupt`` in that wait (an ``Event.wait``, which a SIGINT interrupts) handed the captured handles back
  while the last replay, still queued or running, read and wrote them (a use after free once the user freed them, a
  race once another launch wrote them). Only an ``Exception`` of the wait (the work failed: it is over) releases now;
  an interrupt leaves the graph open as it was, to be closed again or dropped (its finalizer releases on the last
  replay's completion).

- A done-callback of a worker host stream's completion (``stream.record().add_done_callback(fn)``, public) runs on
  the stream's worker thread, without the execution lock: ``.sync_on(stream)`` there enqueued the kernel behind the
  callback and waited for it on the thread that had to run it, a deadlock of the stream (every later wait on it, and
  ``close()``, hung). Not memory unsafety, but the execution lock exists to turn exactly this into
  `ExecutionLockError`: the worker thread now holds it for all it runs (its host work already did).

- ``HostStream.close()`` completed the completions recorded after it (a wait begun once the stream was closing: a
  run's wait from another thread, a resume's, a parked run's completion) only after its ``join`` of the worker: a
  ``KeyboardInterrupt`` in that join left them pending for good (those waits hung; a parked run's handles were never
  released), and a second ``close()`` returned at once. The worker completes them itself on the stop marker now, and
  a second ``close()`` joins it again.

- A host function (``tile.aio.host_call``) on a CUDA stream that raised ``SystemExit`` or another ``BaseException``:
  the driver calls it through ctypes, which printed and dropped the exception, so the op reported success and later
  host functions ran; the trampoline now keeps it for the op's wait, as a host stream's worker does (pinned in
  ``packages/tile-async/tests/test_aio_cuda_sim.py``, on the simulated driver).

Usability defect fixed: ``await`` of a run parked by an interrupted ``.sync()`` raised `OpConsumedError` while
``.sync()`` resumed it (review 35 pinned the refusal). The docs promise an op's output once its work is done, and an
interrupted wait is not a use of the op, so ``await`` (and ``await op.schedule(policy)``) now resumes it too, waiting
for the parked run's context without blocking the event loop (`_resume_async`); the output is still handed out once.

Tried, and held (pinned below where cheap):

- a cancelled ``await`` of a parked run: the run stays parked, resumable by ``.sync()`` (pinned), and keeps the
  work's error (pinned with the fix above);
- a finalizer (run by the cyclic collector at an allocation of the launch's steps) that takes the output partition
  a launch is about to write: run in the launch's unlocked first checks it wins and the locked re-check refuses the
  launch (`MovedError`); the check-and-move pauses the collector (`OWNED`, both paths), so run later it finds the
  partition moved. Never both;
- a tuple-of-tensors argument of a class whose ``__iter__``/``__getitem__`` change answers after the first read: the
  launcher reads the elements once (checks and move see the same handles); the same tensor twice in an output tuple
  (`AliasError`), overlapping views (the partitions refuse);
- a kernel wrapped in ``functools.partial`` or called through a bound method of a user object: the launch checks and
  moves the handles as a direct call does;
- a kernel launched and synced inside a ``tile.aio.host_call`` function or a ``.then()`` function:
  `ExecutionLockError` (the function runs while the tree is enqueued), nothing moved; a launch made there (not
  synced) and returned from ``.then()`` is chained in stream order.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_path

import tile.frontend as tile
from tile import aio
from tile.aio import HostStream, OpConsumedError, _host, _lock
from tile.aio.testing import drained
from tile.frontend import f32

N = 256
GROUP_KERNELS = Path(__file__).resolve().parents[2] / "packages/tile-frontend/tests/kernels/group_kernels.py"
Gated = tuple[HostStream, threading.Event, list[int]]


def _launch(kernels: ModuleType) -> tuple[Any, list[Any]]:
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    return kernels.scale_by_const(z, x, 3.0), [z._tensor._storage, x._storage]


def _tripled(out: tuple[Any, ...]) -> None:
    np.testing.assert_array_equal(out[0].unpartition().to_numpy(), np.full(N, 3.0, np.float32))


@pytest.fixture
def lock_cleared() -> Iterator[None]:
    """Whatever a test leaves, the thread's execution lock is free for the next one."""
    yield
    _lock.set_held(False)


# --- hole: an interrupt at the lock's release, between the enqueue and the wait -------------------------------


def test_an_interrupt_between_the_enqueue_and_the_wait_strands_nothing(
    kernels: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch, lock_cleared: None
) -> None:
    """Before the fix (pure path): ``KeyboardInterrupt`` out of ``sync_on``, the lock held for good, the launch's
    handles kept for good and the launch not resumable."""
    real = _lock.release
    interrupts = [1]

    def interrupted_at_entry() -> None:  # where CPython delivers a pending SIGINT: the call's entry
        if interrupts:
            interrupts.pop()
            raise KeyboardInterrupt("interrupted at the lock's release")
        real()

    monkeypatch.setattr(_lock, "release", interrupted_at_entry)
    stream = HostStream(worker=True)
    try:
        launch, stores = _launch(kernels)
        try:
            out = launch.sync_on(stream)
        except KeyboardInterrupt:  # (before the fix) the run must then at least be parked and the lock free
            assert not aio.executing(), "the execution lock stayed held after the interrupt"
            drained(stream)
            assert [s.pending for s in stores] == [0, 0], "the handles were kept after the work was done"
            out = launch.sync_on(stream)
        assert not aio.executing()
        assert [s.pending for s in stores] == [0, 0]
        _tripled(out)
    finally:
        stream.close()


# --- hole: an interrupt while ``await`` sets up its wait -------------------------------------------------------


def test_an_interrupt_while_await_sets_up_its_wait_parks_the_run(
    kernels: ModuleType, path: str, gated: Gated, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix: the run was dropped claimed, its handles kept for good (pending 1 after the work), and
    ``.sync()`` refused it (`OpConsumedError`)."""
    stream, gate, waits = gated
    waits.clear()  # only the poll is interrupted here
    real = HostStream.query
    interrupts = [1]

    def interrupted(self: HostStream) -> bool:
        if interrupts:
            interrupts.pop()
            raise KeyboardInterrupt("interrupted while polling")
        return real(self)

    monkeypatch.setattr(HostStream, "query", interrupted)
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt, match="interrupted while polling"):
        asyncio.run(_awaited(launch.schedule(aio.SingleStream(stream))))
    assert [s.pending for s in stores] == [1, 1]  # the work has not run: nothing went back
    assert not aio.executing()
    gate.set()
    drained(stream)
    assert [s.pending for s in stores] == [0, 0]  # the parked run's completion handed them back
    _tripled(launch.sync_on(stream))
    with pytest.raises(OpConsumedError, match=r"executed by \.sync_on\(\)"):
        launch.sync_on(stream)


def test_an_interrupt_in_the_awaits_blocking_error_path_parks_the_run(
    kernels: ModuleType, path: str, gated: Gated, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed poll sends ``await`` to a blocking wait (`_finish_blocking`); before the fix an interrupt there left
    the run claimed and unreleased for good."""
    stream, gate, _ = gated  # its synchronize() is interrupted once

    def failing(self: HostStream) -> bool:
        raise RuntimeError("the poll failed")

    monkeypatch.setattr(HostStream, "query", failing)
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        asyncio.run(_awaited(launch.schedule(aio.SingleStream(stream))))
    assert [s.pending for s in stores] == [1, 1]
    gate.set()
    drained(stream)
    assert [s.pending for s in stores] == [0, 0]  # released by the parked run's completion
    with pytest.raises(RuntimeError, match="the poll failed"):  # the run's first error, reported by the resume
        launch.sync_on(stream)


# --- usability: ``await`` resumes a parked run, as ``.sync()`` does ---------------------------------------------


def test_await_resumes_a_parked_run_once(kernels: ModuleType, path: str, gated: Gated) -> None:
    """Before the fix: `OpConsumedError` ("already executed by .sync_on()") while ``.sync()`` resumed it."""
    stream, gate, _ = gated
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        launch.sync_on(stream)
    assert [s.pending for s in stores] == [1, 1]
    opener = threading.Timer(0.05, gate.set)  # the work finishes while the loop awaits it
    opener.start()
    out = asyncio.run(_awaited(launch))
    opener.join()
    assert [s.pending for s in stores] == [0, 0]  # back before the output was returned
    _tripled(out)
    with pytest.raises(OpConsumedError, match=r"executed by await at .*test_adversarial_review36\.py:\d+"):
        asyncio.run(_awaited(launch))
    with pytest.raises(OpConsumedError, match=r"executed by await"):
        launch.sync_on(stream)


def test_a_cancelled_await_of_a_parked_run_leaves_it_parked(kernels: ModuleType, path: str, gated: Gated) -> None:
    stream, gate, _ = gated
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt):
        launch.sync_on(stream)

    async def cancelled() -> None:
        task = asyncio.ensure_future(_awaited(launch))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert [s.pending for s in stores] == [1, 1]  # the work still waits at the gate: nothing went back
    gate.set()
    _tripled(launch.sync_on(stream))
    assert [s.pending for s in stores] == [0, 0]


class BoomError(Exception):
    """The failure of a host function queued before the launch."""


def _boom() -> None:
    raise BoomError("host function failed")


def test_a_cancelled_await_of_a_parked_run_keeps_the_works_failure(
    kernels: ModuleType, path: str, gated: Gated
) -> None:
    """The resume's ``await`` takes the stream's error with its completion (`record`); cancelled, the run stays
    parked, so the error must stay with it: the next ``.sync()`` reports it (found in this review's own first version
    of the await resume, which dropped it with the cancelled future: the stale output came back as a success)."""
    stream, gate, _ = gated
    stream.enqueue(_boom)  # fails once the gate opens: the stream skips the launch queued after it
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt):
        launch.sync_on(stream)

    async def cancelled() -> None:
        task = asyncio.ensure_future(_awaited(launch))
        await asyncio.sleep(0.02)  # the resume's completion is recorded
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    gate.set()
    drained(stream)
    assert [s.pending for s in stores] == [0, 0]
    with pytest.raises(BoomError, match="host function failed"):
        launch.sync_on(stream)


async def _awaited(op: Any) -> Any:
    return await op


# --- hole: an interrupt while ``Graph.close()`` waits for the last replay ----------------------------------------


def test_an_interrupted_graph_close_keeps_the_captured_handles_until_the_replay_is_done(
    kernels: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix: ``close()``'s ``finally`` released the captured op at the interrupt, handing its handles back
    (pending 0) while the last replay, queued behind the gate, had not run: they could be freed or written under it."""
    stream = HostStream(worker=True)
    gate = threading.Event()
    try:
        z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
        stores = [z._tensor._storage, x._storage]
        graph = kernels.scale_by_const(z, x, 3.0).graph(stream)
        stream.enqueue(gate.wait)
        replayer = threading.Thread(target=lambda: graph.launch().sync_on(stream))  # waits behind the gate
        replayer.start()
        while graph._held.last is None:  # until the replay is enqueued (the graph notes its context then)
            replayer.join(0.01)
        real = _host._Observer.wait
        interrupts = [1]

        def interrupted(self: Any) -> None:
            if interrupts:
                interrupts.pop()
                raise KeyboardInterrupt("interrupted while closing")
            real(self)

        monkeypatch.setattr(_host._Observer, "wait", interrupted)
        with pytest.raises(KeyboardInterrupt, match="interrupted while closing"):
            graph.close()
        assert [s.pending for s in stores] == [1, 1]  # the replay has not run: nothing went back
        assert not graph.closed  # still open, as it was: close() again (or drop it) once the interrupt is handled
        gate.set()
        replayer.join()
        out = graph.close()
        assert [s.pending for s in stores] == [0, 0]
        _tripled(out)
    finally:
        gate.set()
        stream.close()


# --- hole: an interrupt in ``HostStream.close()`` ------------------------------------------------------------------


def test_a_wait_begun_after_an_interrupted_close_completes_with_the_work(
    kernels: ModuleType, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close()`` joins the worker, then completed the completions recorded after the close (a run's wait begun
    then, a resume's, a parked run's completion). Before the fix a ``KeyboardInterrupt`` in that join left them
    pending for good: the run's ``.sync_on()`` on another thread hung, and a second ``close()`` returned at once."""
    stream = HostStream(worker=True)
    gate = threading.Event()
    stream.enqueue(gate.wait)
    launch, stores = _launch(kernels)
    done: list[object] = []
    runner = threading.Thread(target=lambda: done.append(launch.sync_on(stream)))
    real_join = threading.Thread.join
    interrupts = [1]

    def interrupted_join(self: threading.Thread, timeout: float | None = None) -> None:
        if interrupts and self.name == "interrupted-close":
            interrupts.pop()
            raise KeyboardInterrupt("interrupted while closing")
        real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", interrupted_join)
    stream._thread.name = "interrupted-close"  # type: ignore[union-attr]  # only this join is interrupted
    try:
        runner.start()
        while not stores[0].pending or stream.query():  # until the launch is queued behind the gate
            real_join(runner, 0.01)
        with pytest.raises(KeyboardInterrupt, match="interrupted while closing"):
            stream.close()
        waiter = threading.Thread(target=stream.synchronize)  # a wait begun after the close: done with the work
        waiter.start()
        gate.set()
        real_join(runner, 5)
        real_join(waiter, 5)
        assert not runner.is_alive()
        assert not waiter.is_alive(), "the wait begun after the interrupted close never completed"
        _tripled(done[0])  # type: ignore[arg-type]
        assert [s.pending for s in stores] == [0, 0]
        stream.close()  # a second close() is a no-op once the worker is done
    finally:
        gate.set()


# --- hole: a blocking run inside a host stream's completion callback -------------------------------------------


def test_a_sync_in_a_host_streams_done_callback_is_refused_not_a_deadlock(kernels: ModuleType, path: str) -> None:
    """A done-callback of a worker host stream's completion runs on the stream's worker thread. Before the fix the
    execution lock was not held there, so ``launch.sync_on(stream)`` in it enqueued the kernel behind the callback
    and waited for it on the very thread that had to run it: the stream hung for good (and ``close()`` with it)."""
    stream = HostStream(worker=True)
    launch, stores = _launch(kernels)
    got: list[object] = []
    called = threading.Event()

    def callback(_error: BaseException | None) -> None:
        try:
            got.append(launch.sync_on(stream))
        except aio.ExecutionLockError as exc:
            got.append(exc)
        finally:
            called.set()

    try:
        stream.record().add_done_callback(callback)
        assert called.wait(5), "the callback's sync hung the stream"
        assert len(got) == 1, got
        assert isinstance(got[0], aio.ExecutionLockError), got
        assert not launch.consumed  # refused before the claim: still the caller's
        _tripled(launch.sync_on(stream))
        assert [s.pending for s in stores] == [0, 0]
    finally:
        if called.is_set():  # else its worker is deadlocked for good (a daemon thread): close() would hang too
            stream.close()


# --- tried and held ---------------------------------------------------------------------------------------------


def _collections_in_a_launch(kernels: ModuleType, size: int) -> int:
    """How many collections a launch of ``size`` elements runs with the threshold at 1 (after a warm-up launch)."""
    kernels.scale_by_const(tile.zeros(f32, [size]).partition([128]), tile.ones(f32, [size]), 3.0).sync()
    z, x = tile.zeros(f32, [size]).partition([128]), tile.ones(f32, [size])
    count = [0]

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            count[0] += 1

    gc.collect()
    old = gc.get_threshold()
    gc.callbacks.append(counted)
    gc.set_threshold(1)
    try:
        launch = kernels.scale_by_const(z, x, 3.0)
    finally:
        gc.set_threshold(*old)
        gc.callbacks.remove(counted)
    launch.sync()
    return count[0]


class _Taker:
    """A cycle whose finalizer, at the ``left``-th collection from now (each collection finds the next link), takes
    the output partition a launch is about to write (``unpartition`` and a read); ``seen`` records what it got."""

    def __init__(self, target: Any, seen: list[str], left: int) -> None:
        self.me, self.target, self.seen, self.left = self, target, seen, left

    def __del__(self) -> None:
        if self.left:
            _Taker(self.target, self.seen, self.left - 1)
            return
        try:
            self.seen.append(repr(self.target.unpartition().to_numpy()[:2]))
        except tile.TileError as exc:
            self.seen.append(type(exc).__name__)


def test_a_finalizer_run_inside_a_launch_and_the_launch_never_both_get_the_output(
    kernels: ModuleType, path: str
) -> None:
    """With the collector's threshold at 1 it runs at every allocation; the finalizer acts at the n-th collection of
    the call, for n walking through the repeated launch of a plan (a first call collects only before its
    check-and-move, probed: the launch is refused). Before the check-and-move the finalizer wins and the launch is
    refused (`MovedError`); the check-and-move pauses the collector (`OWNED`, both paths), so after it the finalizer
    finds the partition moved. Never both."""
    outcomes = set()
    last = _collections_in_a_launch(kernels, N)
    for n in range(max(0, last - 10), last + 2):  # the launch's own steps come last in the call
        kernels.scale_by_const(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), 3.0).sync()
        z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
        seen: list[str] = []
        refusal = ""
        gc.collect()
        old = gc.get_threshold()
        _Taker(z, seen, n)
        gc.set_threshold(1)
        try:
            try:
                launch = kernels.scale_by_const(z, x, 3.0)
            except tile.MovedError as exc:
                launch, refusal = None, str(exc)
        finally:
            gc.set_threshold(*old)
        for _ in range(n + 2):  # the rest of the chain, one link per collection
            if not seen:
                gc.collect(0)
        assert len(seen) == 1, seen
        if launch is None:
            assert "unpartition" in refusal, refusal  # the finalizer's unpartition() moved it
            assert seen[0].startswith("array("), seen  # the finalizer got it first, and the launch did not run
            outcomes.add("finalizer first")
        else:
            assert seen == ["MovedError"], (n, seen)  # before: the finalizer would read what the kernel writes
            _tripled(launch.sync())
            outcomes.add("launch first")
    assert outcomes == {"finalizer first", "launch first"}  # the walk crossed the launch's steps


def test_partial_and_bound_methods_move_the_handles_as_a_direct_call(kernels: ModuleType, path: str) -> None:
    class Model:
        def __init__(self, scale: float) -> None:
            self.scale = scale

        def forward(self, z: Any, x: Any) -> Any:
            return kernels.scale_by_const(z, x, self.scale)

    for call in (functools.partial(kernels.scale_by_const, c=3.0), Model(3.0).forward):
        z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
        launch = call(z, x)
        with pytest.raises(tile.MovedError, match=r"was moved into the launch of scale_by_const"):
            x.to_numpy()
        with pytest.raises(tile.MovedError, match=r"was moved into the launch of scale_by_const"):
            call(z, x)  # the same handles again: moved
        _tripled(launch.sync())


def test_a_sync_inside_a_host_call_or_then_function_is_refused(kernels: ModuleType, path: str) -> None:
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    inner, _ = _launch(kernels)
    with pytest.raises(aio.ExecutionLockError, match=r"executing another op"):
        aio.host_call(inner.sync).sync()
    assert not inner.consumed  # refused before the claim: still the caller's
    launch = kernels.scale_by_const(z, x, 3.0)
    with pytest.raises(aio.ExecutionLockError, match=r"executing another op"):
        launch.then(lambda out: aio.value(inner.sync())).sync()
    assert not inner.consumed
    _tripled(inner.sync())
    chained = kernels.scale_by_const(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), 1.0)
    out = chained.then(lambda o: kernels.scale_by_const(o[0], o[1], 3.0)).sync()
    np.testing.assert_array_equal(out[0].unpartition().to_numpy(), np.full(N, 3.0, np.float32))


def test_a_tuple_argument_is_read_once_whatever_its_class_does(path: str) -> None:
    """A tuple subclass whose ``__iter__``/``__getitem__`` answer differently after the first read (a checked tensor
    first, a moved one later): the launcher reads the elements once, so the checks and the move see the same ones."""
    group = load_path("review36_group_kernels", GROUP_KERNELS)
    reads: list[str] = []

    class Shifty(tuple):  # type: ignore[type-arg]
        alt: tuple[Any, ...]

        def __iter__(self) -> Iterator[Any]:
            reads.append("iter")
            return iter(self.alt if len(reads) > 1 else tuple.__getitem__(self, slice(None)))

        def __getitem__(self, i: Any) -> Any:
            reads.append("getitem")
            return self.alt[i] if len(reads) > 1 else tuple.__getitem__(self, i)

    victim = tile.full(f32, [N], 7.0)
    taken = victim.partition([128])  # victim is moved: any use of it must be refused
    xs = Shifty((tile.ones(f32, [N]),))
    xs.alt = (victim,)
    out = group.sum_all(tile.zeros(f32, [N]).partition([128]), xs).sync()
    assert reads.count("iter") + reads.count("getitem") == 1, reads
    np.testing.assert_array_equal(out[0].unpartition().to_numpy(), np.ones(N, np.float32))
    del taken
