"""Adversarial review 35: a run parked by a ``KeyboardInterrupt`` in ``.sync()`` (`tile.aio._run.park`), and a
graph dropped unclosed (`tile.aio._graph._close_quietly`). Both launch paths (``path``); the interrupt is a patched
``HostStream.synchronize``, the device work a gated worker host stream, as in ``test_frontend_interrupt.py``.

Tried, and held (pinned below):

- two threads resuming one parked launch: the output is handed out once (the other gets ``OpConsumedError``), and
  the handles went back before either returned;
- ``.then()``, ``.graph()`` and ``tile.aio.zip`` of a parked launch are refused (``OpConsumedError``; ``await``
  resumes it like ``.sync()`` since review 36):
  nothing launches the kernel a second time, and the handles stay held until the work is done;
- a second interrupt during the resume's wait keeps the run parked (nothing goes back, the output is not lost);
- a resume on another stream (``.sync_on(other)``) waits for the parked run's own context, not the new one;
- a graph replayed on two streams (the later replay from another thread) and then dropped hands its memory back only
  once the later replay's stream is done: not at the collection, nor on the first (idle) stream's completion; and
  a graph is collected only once the runs that replay it end (a `_GraphLaunch` holds it), so no replay is in flight
  on a stream the finalizer does not know of.

Hole (fixed): the parked run recorded its completion with ``ctx.record()``, which *takes* a host stream's error. A
run whose work failed (the kernel skipped after an earlier failure on the stream, output never written) was then
resumed by ``.sync()`` as a success: the stale output handed back as the kernel's result, and a dropped parked launch
swallowed the stream's error so the stream's next wait reported nothing. ``park`` now observes (``_observe``, as
every completion recorded for another purpose than the run's own wait does since review 19): the error stays with
the stream for the resume's wait (or the stream's next one).

Hole (fixed): a resume racing a ``close()`` of the parked run's worker host stream (another thread closing it while
the queued work still runs: ``close()`` finishes it first) got ``ClosedError`` from its wait's ``record()`` at once,
took it for a failure of the work, and handed the handles back while the kernel was still running on the stream
(the same for any ``.sync()``/``await`` whose wait began after such a ``close()``). Class-level fix in
``HostStream``: a completion recorded or observed on a closed stream is done once ``close()`` finished the queued
work (at once after it), never refused; only new work is refused. A dropped graph whose last replay's stream was
closed is now released too, instead of held forever.

Hole (fixed by the lead, from this review's report): the same on a CUDA stream. ``tile.core.Stream.close()`` does not
wait for the stream's work, and a later ``synchronize()`` raised `StreamClosedError` at once; a run's wait took it for
the end of the work and handed the arguments back while the kernel could still run. tile.core now waits for the
closed stream's final event (the work queued before the close) before it raises.
"""

from __future__ import annotations

import gc
import threading
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.aio import HostStream, OpConsumedError
from tile.aio.testing import drained as _drained
from tile.frontend import f32

N = 256


class BoomError(Exception):
    """The failure of a host function queued before the launch."""


def _boom() -> None:
    raise BoomError("host function failed")


def _launch(kernels: ModuleType) -> tuple[Any, list[Any]]:
    z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
    return kernels.scale_by_const(z, x, 3.0), [z._tensor._storage, x._storage]


def _parked(kernels: ModuleType, stream: HostStream) -> tuple[Any, list[Any]]:
    launch, stores = _launch(kernels)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        launch.sync_on(stream)
    assert [s.pending for s in stores] == [1, 1]
    return launch, stores


# --- the hole: a parked run's failure must not be taken by its completion ---------------------------------------


def test_a_resumed_run_whose_work_failed_raises_the_failure(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    stream.enqueue(_boom)  # fails once the gate opens: the stream skips the launch queued after it
    launch, stores = _parked(kernels, stream)
    gate.set()
    _drained(stream)  # the parked completion ran (and, before the fix, took the failure)
    assert [s.pending for s in stores] == [0, 0]  # the work is over: the handles went back
    with pytest.raises(BoomError, match="host function failed"):
        launch.sync_on(stream)  # before the fix: returned the never-written output as the result
    with pytest.raises(OpConsumedError, match=r"executed by \.sync_on\(\) at .*test_adversarial_review35\.py:\d+"):
        launch.sync_on(stream)


def test_a_dropped_parked_run_leaves_the_failure_to_the_streams_next_wait(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    stream.enqueue(_boom)
    launch, stores = _parked(kernels, stream)
    del launch
    gate.set()
    _drained(stream)
    assert [s.pending for s in stores] == [0, 0]
    with pytest.raises(BoomError, match="host function failed"):  # before the fix: taken and dropped by the park
        stream.record().wait()


# --- what held ------------------------------------------------------------------------------------------------


def test_two_threads_resuming_one_parked_run_get_the_output_once(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    launch, stores = _parked(kernels, stream)
    results: list[object] = []
    barrier = threading.Barrier(2)

    def resume() -> None:
        barrier.wait()
        try:
            out = launch.sync_on(stream)
            results.append([s.pending for s in stores])  # already back when the output is returned
            results.append(out)
        except OpConsumedError as exc:
            results.append(exc)

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    errors = [r for r in results if isinstance(r, OpConsumedError)]
    outputs = [r for r in results if isinstance(r, tuple)]
    assert len(errors) == 1, results
    assert len(outputs) == 1, results
    assert [0, 0] in results
    z = outputs[0][0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


def test_a_parked_run_cannot_be_moved_or_captured(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    launch, stores = _parked(kernels, stream)
    consumed = r"the launch of scale_by_const .* was already executed by \.sync_on\(\)"
    with pytest.raises(OpConsumedError, match=consumed):
        launch.then(lambda out: out)
    with pytest.raises(OpConsumedError, match=consumed):
        aio.zip(launch, launch)
    with pytest.raises(OpConsumedError, match=consumed):
        launch.graph(stream)
    assert [s.pending for s in stores] == [1, 1]  # none of them released anything: the work has not run
    gate.set()
    z = launch.sync_on(stream)[0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))  # ran once: 1 * 3


def test_an_interrupt_during_the_resume_keeps_the_run_parked(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, interrupts = gated
    launch, stores = _parked(kernels, stream)
    interrupts.append(1)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        launch.sync_on(stream)
    assert [s.pending for s in stores] == [1, 1]
    gate.set()
    z = launch.sync_on(stream)[0]  # the output was not lost by the second interrupt
    assert [s.pending for s in stores] == [0, 0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


def test_a_resume_on_another_stream_waits_for_the_parked_runs_own(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    launch, stores = _parked(kernels, stream)
    other = HostStream(worker=True)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(launch.sync_on(other)))
    t.start()
    t.join(0.2)
    assert done == []  # still waiting for the gated stream
    assert [s.pending for s in stores] == [1, 1]
    gate.set()
    t.join()
    other.close()
    assert [s.pending for s in stores] == [0, 0]
    z = done[0][0]  # type: ignore[index]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


def test_a_graph_replayed_on_two_streams_and_dropped_waits_for_the_later_replays_stream(
    kernels: ModuleType, path: str
) -> None:
    first, second = HostStream(worker=True), HostStream(worker=True)
    gate = threading.Event()
    try:
        z, x = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N])
        stores = [z._tensor._storage, x._storage]
        graph = kernels.scale_by_const(z, x, 3.0).graph(first)
        graph.launch().sync_on(first)
        replay = graph.launch()
        t = threading.Thread(target=replay.sync_on, args=(second,))  # the last replay: another thread's
        t.start()
        t.join()
        del replay
        second.enqueue(gate.wait)  # `first` is idle, `second` (the last replay's stream) is busy
        del graph
        gc.collect()
        assert [s.pending for s in stores] == [1, 1]  # not released on `first`'s completion, nor at once
        gate.set()
        _drained(second)  # the release's completion callback ran
        assert [s.pending for s in stores] == [0, 0]
    finally:
        gate.set()
        first.close()
        second.close()


def test_a_resume_racing_a_close_of_the_stream_waits_for_the_work(
    kernels: ModuleType, path: str, gated: tuple[HostStream, threading.Event, list[int]]
) -> None:
    stream, gate, _ = gated
    launch, stores = _parked(kernels, stream)
    closer = threading.Thread(target=stream.close)  # finishes the queued work: blocks on the gate
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(launch.sync_on(stream)))
    t.start()
    t.join(0.2)
    assert [s.pending for s in stores] == [1, 1]  # before the fix: released at once (record() raised ClosedError)
    gate.set()
    t.join()
    closer.join()
    assert [s.pending for s in stores] == [0, 0]
    z = done[0][0]  # type: ignore[index]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))


# -- hole (the lead, from review 35's report): a wait on a closed CUDA stream answered before its work was done ------


def test_a_synchronize_on_a_closed_stream_waits_for_the_work_queued_before_the_close() -> None:
    """`tile.core.Stream.close()` does not wait for the stream's work (CUDA runs it after the destroy), and a later
    ``synchronize()`` raised `StreamClosedError` at once. tile.aio's CUDA context and every run's wait take that
    error for "the work is over" and hand the run's arguments back: a parked run resumed after a ``finally:
    stream.close()``, or a run whose stream another thread closed between enqueue and wait, returned handles that a
    launch on another stream could then write while the kernel still ran. Fixed in tile.core for the class: a
    synchronize on a closed stream first waits for its final event (the work queued before the close), then
    raises."""
    import tile.core as tcore
    from tile.core.testing import simulated

    with simulated(asynchronous=True) as driver:
        driver.eagerness = 0.0  # nothing runs before something waits for it
        stream, home = tcore.Stream(), tcore.Stream()
        buffer = tcore.DeviceBuffer.allocate(4096, stream=home)
        buffer.fill(0, stream=home)
        buffer.fill(7, stream=stream, sync=False)
        stream.close()
        assert driver.pending(), "the fill ran before anything waited: the test measures nothing"
        with pytest.raises(tcore.StreamClosedError, match="was closed"):
            stream.synchronize()
        assert not driver.pending()  # the error came after the work queued before the close
        np.testing.assert_array_equal(buffer.to_numpy(np.uint8), np.full(4096, 7, np.uint8))
        buffer.free()
