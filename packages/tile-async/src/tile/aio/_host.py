"""Host streams: the execution-context protocol with the work running on the CPU, in order.

A :class:`HostStream` runs each enqueued function in enqueue order, either inline (in the enqueuing thread,
during ``enqueue``: the default, deterministic and thread-free) or on its own worker thread
(``worker=True``: work is asynchronous, so completions are really pending until the worker reaches them).
This is what the CPU interpreter backend runs kernels on, and what lets every op, policy and asyncio path
be tested without a GPU.

Errors: a function that raises poisons its stream like a CUDA fault poisons a context, but only up to the
next recorded completion: later work is skipped, and the error is handed to that completion (so the op
whose work failed reports it from its own ``.sync()``/``await``) and cleared. A completion recorded for
another tree (`ExecutionContext._observe`: a shared op's first run, a stream ordering itself after this one) reports
the error without clearing it, so it never takes the error from the run it belongs to. Host work runs with the
execution lock held, so it cannot start a nested blocking execution.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Hashable

from tile.aio import _lock
from tile.aio._context import BUILTIN_CONTEXTS, HOST, Completion, DoneCallback, ExecutionContext, call_back
from tile.aio._errors import ClosedError

__all__ = ["HostCompletion", "HostStream"]


class HostCompletion(Completion):
    """A completion completed by the host stream that recorded it (or created done)."""

    __slots__ = ("_callbacks", "_done", "_error", "_mutex")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._callbacks: list[DoneCallback] = []
        self._mutex = threading.Lock()

    @classmethod
    def finished(cls, error: BaseException | None = None) -> HostCompletion:
        """Return a completion that is already done (with ``error``)."""
        completion = cls()
        completion.complete(error)
        return completion

    def complete(self, error: BaseException | None) -> None:
        """Mark done with ``error`` and run the callbacks, in this thread."""
        with self._mutex:
            self._error = error
            callbacks, self._callbacks = self._callbacks, []
            self._done.set()
        for fn in callbacks:
            call_back(fn, error)

    def query(self) -> bool:
        if not self._done.is_set():
            return False
        if self._error is not None:
            raise self._error
        return True

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise self._error

    def add_done_callback(self, fn: DoneCallback) -> None:
        with self._mutex:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        call_back(fn, self._error)


class _Observer(HostCompletion):
    """A completion `HostStream._observe` queued: it leaves the stream's error in place."""

    __slots__ = ()


_DONE = HostCompletion.finished()
_Item = Callable[[], object] | HostCompletion | None  # None stops the worker


class HostStream(ExecutionContext):
    """An in-order queue of host work on :data:`~tile.aio.HOST`.

    Parameters
    ----------
    worker : bool
        False (default): work runs inside :meth:`enqueue`, in the calling thread. True: work runs on a
        daemon worker thread of this stream, started on first use; call :meth:`close` to stop it.
    name : str, optional
        Shown in ``repr`` and as the worker thread's name.
    """

    __slots__ = (
        "_closed",
        "_error",
        "_finished",
        "_late",
        "_mutex",
        "_name",
        "_pending",
        "_queue",
        "_thread",
        "_worker",
    )

    def __init__(self, *, worker: bool = False, name: str | None = None) -> None:
        self._worker = worker
        self._name = name or f"host-stream-{id(self):x}"
        self._mutex = threading.RLock()
        self._error: BaseException | None = None
        self._pending = 0
        self._closed = False
        self._finished = False  # close() finished the queued work (the worker thread ended)
        self._late: list[HostCompletion] = []  # recorded while close() was finishing it: completed by close()
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"HostStream({self._name!r}, {'worker' if self._worker else 'inline'})"

    @property
    def device(self) -> Hashable:
        return HOST

    @property
    def is_worker(self) -> bool:
        """True when work runs on this stream's own thread."""
        return self._worker

    def enqueue(self, fn: Callable[[], object]) -> None:
        if not self._worker:
            with self._mutex:
                self._run(fn)
            return
        self._submit(fn)

    def record(self) -> Completion:
        if not self._worker:
            with self._mutex:
                error, self._error = self._error, None
            return _DONE if error is None else HostCompletion.finished(error)
        completion = HostCompletion()
        self._submit(completion)
        return completion

    def _observe(self) -> Completion:
        """`record` without taking the error: the stream stays poisoned for its own run's next record."""
        if not self._worker:
            with self._mutex:
                error = self._error
            return _DONE if error is None else HostCompletion.finished(error)
        completion = _Observer()
        self._submit(completion)
        return completion

    def wait(self, completion: Completion) -> None:
        if completion is _DONE:
            return
        self.enqueue(completion.wait)

    def synchronize(self) -> None:
        self.record().wait()

    def query(self) -> bool:
        with self._mutex:
            if self._pending:
                return False
            error, self._error = self._error, None
        if error is not None:
            raise error
        return True

    def close(self) -> None:
        """Finish the queued work and stop the worker thread (a no-op for inline streams). Work enqueued after it is
        refused (`ClosedError`); a completion recorded after it is done once the queued work is finished."""
        with self._mutex:
            thread = self._thread
            if not self._closed:
                self._closed = True
                if thread is not None:
                    self._queue.put(None)  # the worker finishes the queued work, then the late completions
        if thread is None:
            self._finish()
        elif thread is not threading.current_thread():  # (a callback on the worker closing its own stream)
            # A second close() after an interrupted one waits here too. The late completions are the worker's to
            # finish, not this thread's: a KeyboardInterrupt in this join left them (and every wait recorded after
            # the close) pending for good (review 36).
            thread.join()

    def _finish(self) -> None:
        """The queued work is finished (the stream closed): complete the completions recorded meanwhile."""
        with self._mutex:
            self._finished = True
            late, self._late = self._late, []
        for item in late:
            self._complete(item)

    def _run(self, fn: Callable[[], object]) -> None:
        """Run one piece of work (mutex held inline; on the worker thread otherwise)."""
        if self._error is not None:
            return
        previous = _lock.set_held(True)
        try:
            fn()
        except Exception as exc:  # the failure belongs to the op that enqueued it: kept, reported later
            self._error = exc
        finally:
            _lock.set_held(previous)

    def _submit(self, item: _Item) -> None:
        with self._mutex:  # put under the lock too, so close() cannot slip its stop marker in before this item
            if self._closed:
                if not isinstance(item, HostCompletion):
                    raise ClosedError(repr(self), "make a new HostStream")
                # A completion on a closed stream: done once close() finished the queued work, never before (a
                # ClosedError here let a waiter release the inputs of work still running: review 35).
                if not self._finished:
                    self._late.append(item)
                    return
            else:
                self._pending += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                    self._thread.start()
                self._queue.put(item)
                return
        self._complete(item)

    def _complete(self, item: HostCompletion) -> None:
        """Complete ``item`` with the stream's error (taken, unless an observer), all work before it done."""
        with self._mutex:
            error = self._error
            if type(item) is not _Observer:
                self._error = None
        item.complete(error)

    def _work(self) -> None:
        # Everything this thread runs is the stream's host work, completion callbacks included: a blocking run there
        # (``.sync()`` in a done-callback) would wait for this very thread, for good; it gets ExecutionLockError.
        _lock.set_held(True)
        while (item := self._queue.get()) is not None:
            if isinstance(item, HostCompletion):
                self._complete(item)
            else:
                try:
                    self._run(item)
                except BaseException as exc:  # SystemExit & co. from work: this thread has no caller to stop
                    self._error = exc
            with self._mutex:
                self._pending -= 1
        self._finish()  # the stop marker: close() was called


BUILTIN_CONTEXTS.add(HostStream)
