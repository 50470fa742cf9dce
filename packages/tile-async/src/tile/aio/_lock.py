"""The execution lock: one thread executes at most one op tree at a time.

An op's ``_execute`` (and any then/map/with_context function or host work it runs) must not start another
blocking execution: on a stream that is busy running the outer op it would deadlock (host worker streams)
or interleave two ops' work (CUDA streams). The lock is thread-local and held while an op tree is being
enqueued and while a host stream runs host work; ``acquire`` raises :class:`ExecutionLockError` instead of
letting the nested call proceed. It is not a mutex: other threads are never blocked by it.
"""

from __future__ import annotations

import threading

from tile.aio._errors import ExecutionLockError

__all__ = ["acquire", "check", "held", "release", "set_held"]


class _State(threading.local):
    held = False


_state = _State()


def held() -> bool:
    """Return True while this thread is executing an op or host work (inside a then/map/with_context function or a
    host call), where a blocking call such as ``.sync()`` raises `ExecutionLockError`. Public as
    ``tile.aio.executing()``: a library that would block (an autotuner timing configs) checks it first."""
    return _state.held


def check(action: str) -> None:
    """Raise ExecutionLockError when this thread is executing (before choosing a context for ``action``)."""
    if _state.held:
        raise ExecutionLockError(action)


def acquire(action: str) -> None:
    """Take the lock for ``action`` (e.g. ``".sync()"``); raise ExecutionLockError when already held."""
    if _state.held:
        raise ExecutionLockError(action)
    _state.held = True


def release() -> None:
    """Give the lock back."""
    _state.held = False


def set_held(value: bool) -> bool:
    """Set the lock to ``value`` and return its previous value (host streams save and restore it)."""
    previous = _state.held
    _state.held = value
    return previous
