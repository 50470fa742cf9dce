"""Waiter threads: turn a blocking ``Completion.wait()`` into a done-callback without a busy loop.

CUDA completions have no callback of their own, so ``add_done_callback`` hands them here: a small pool of
daemon threads, each blocking in ``wait()`` (``cuEventSynchronize`` on a blocking-sync event: the thread
sleeps and the GIL is released), then calling the callback. A thread is started when a wait arrives and
none is idle, up to :data:`MAX_THREADS`; idle threads exit after :data:`IDLE_SECONDS`. Beyond the cap,
waits queue up (they still complete, possibly later than their work).
"""

from __future__ import annotations

import queue
import threading

from tile.aio._context import Completion, DoneCallback, call_back

__all__ = ["IDLE_SECONDS", "MAX_THREADS", "submit"]

MAX_THREADS = 32
IDLE_SECONDS = 5.0


class _Pool:
    """Thread accounting: ``idle`` threads may take a new wait; ``backlog`` waits arrived at the cap."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[Completion, DoneCallback]] = queue.SimpleQueue()
        self.mutex = threading.Lock()
        self.threads = 0
        self.idle = 0
        self.backlog = 0

    def submit(self, completion: Completion, fn: DoneCallback) -> None:
        start = False
        with self.mutex:
            if self.idle:
                self.idle -= 1
            elif self.threads < MAX_THREADS:
                self.threads += 1
                start = True
            else:
                self.backlog += 1
            self.queue.put((completion, fn))
        if start:
            threading.Thread(target=self.serve, name="tile-aio-waiter", daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                completion, fn = self.queue.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self.mutex:
                    if self.queue.empty():
                        self.idle -= 1
                        self.threads -= 1
                        return
                continue
            _wait_and_call(completion, fn)
            with self.mutex:
                if self.backlog:
                    self.backlog -= 1
                else:
                    self.idle += 1


def _wait_and_call(completion: Completion, fn: DoneCallback) -> None:
    try:
        completion.wait()
    except Exception as exc:  # the work's failure is the callback's argument
        call_back(fn, exc)
        return
    call_back(fn, None)


_pool = _Pool()


def submit(completion: Completion, fn: DoneCallback) -> None:
    """Call ``fn(error_or_None)`` from a waiter thread once ``completion`` is done."""
    _pool.submit(completion, fn)
