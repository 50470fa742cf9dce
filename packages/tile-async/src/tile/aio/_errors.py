"""Errors raised by ``tile.aio``.

Invariants: each derives from ``tile.bindings.TileError`` (the runtime stack's root) and from the builtin a
caller would catch; each carries its facts as attributes and pickles through ``__reduce__``. Messages say
what happened, where, and what to do.
"""

from __future__ import annotations

from typing import Any

from tile.bindings import TileError
from tile.core import HandleCopyError

__all__ = [
    "CaptureError",
    "ClosedError",
    "ContextMismatchError",
    "CopyError",
    "EventLoopError",
    "ExecutionLockError",
    "KnobError",
    "OpConsumedError",
    "OpTypeError",
    "UncopyableError",
]


class OpConsumedError(TileError, RuntimeError):
    """An op was executed, or moved into another op, a second time.

    Parameters
    ----------
    op : str
        Description of the op, e.g. ``"Map"``.
    fate : str
        What happened to it first, e.g. ``"executed by .sync() at run.py:12"``.
    """

    def __init__(self, op: str, fate: str) -> None:
        self.op = op
        self.fate = fate
        super().__init__(
            f"{op} was already {fate}: a DeviceOp runs at most once; build a new op, use the value its "
            "execution returned, or call .shared() on it to use one result several times"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.fate))


class ExecutionLockError(TileError, RuntimeError):
    """A blocking execution was started while this thread is already executing device work.

    Parameters
    ----------
    action : str
        The refused call, e.g. ``".sync()"``.
    """

    def __init__(self, action: str) -> None:
        self.action = action
        super().__init__(
            f"{action} was called while this thread is executing another op (inside a then/map function, a "
            "with_context function or host work); a nested execution would deadlock or race on the stream. "
            "Return a DeviceOp from .then() instead, or run the work after the outer op completes"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.action,))


class EventLoopError(TileError, RuntimeError):
    """An op was awaited where no asyncio event loop runs (a coroutine driven by hand or by another async
    framework): nothing could wake the awaiting code when the work is done, so nothing was executed.

    Parameters
    ----------
    op : str
        Description of the awaited op.
    """

    def __init__(self, op: str) -> None:
        self.op = op
        super().__init__(
            f"{op} was awaited outside a running asyncio event loop; nothing was executed and the op is still "
            "usable. Await it in a coroutine run by asyncio (asyncio.run, a loop's run_until_complete), or call "
            ".sync()"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op,))


class CaptureError(TileError, RuntimeError):
    """An op cannot be recorded into a graph; nothing was captured.

    Parameters
    ----------
    op : str
        Description of the refused op.
    reason : str
        Why it cannot be captured.
    """

    def __init__(self, op: str, reason: str) -> None:
        self.op = op
        self.reason = reason
        super().__init__(
            f"{op} cannot be captured into a graph: {reason}; run it before capture (e.g. allocate the "
            "buffers first) and capture only launches, copies and combinators of them"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.reason))


class ContextMismatchError(TileError, TypeError):
    """An op needs a kind of execution context (CUDA or host) that it was not given.

    Parameters
    ----------
    op : str
        Description of the op.
    needed : str
        The context it needs, e.g. ``"a CUDA stream"``.
    given : str
        The context it got.
    """

    def __init__(self, op: str, needed: str, given: str) -> None:
        self.op = op
        self.needed = needed
        self.given = given
        super().__init__(
            f"{op} needs {needed} but was scheduled on {given}; schedule it with a policy of the right device "
            "(tile.aio.default_policy(device)) or .sync_on() a matching stream"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.op, self.needed, self.given))


class KnobError(TileError, ValueError):
    """A ``TILE_AIO_*`` environment variable holds a value that cannot be used.

    Parameters
    ----------
    name : str
        The variable.
    value : str
        Its value.
    expected : str
        What it should hold.
    """

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name = name
        self.value = value
        self.expected = expected
        super().__init__(f"environment variable {name}={value!r} is invalid: expected {expected}; fix or unset it")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.value, self.expected))


class OpTypeError(TileError, TypeError):
    """A value that had to be a ``DeviceOp`` (or an execution context) is something else.

    Parameters
    ----------
    where : str
        Where the value came from, e.g. ``"the function passed to .then()"``.
    expected : str
        What was expected.
    got : str
        The type received.
    fix : str
        What to do instead (default: wrap plain values with ``tile.aio.value``).
    """

    def __init__(
        self, where: str, expected: str, got: str, fix: str = "wrap plain values with tile.aio.value(...)"
    ) -> None:
        self.where = where
        self.expected = expected
        self.got = got
        self.fix = fix
        super().__init__(f"{where} gave {got}, expected {expected}; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.where, self.expected, self.got, self.fix))


class ClosedError(TileError, RuntimeError):
    """Something was used after ``close()``.

    Parameters
    ----------
    what : str
        The closed object.
    remedy : str
        What to do instead.
    """

    def __init__(self, what: str, remedy: str) -> None:
        self.what = what
        self.remedy = remedy
        super().__init__(f"{what} is closed; {remedy}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.remedy))


class CopyError(TileError, ValueError):
    """A host-side copy cannot be made as asked (sizes differ, not a buffer, read-only destination).

    Parameters
    ----------
    problem : str
        What is wrong.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"tile.aio.copy: {problem}; pass two contiguous host buffers of the same size")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problem,))


class UncopyableError(HandleCopyError):
    """An object that owns work or resources (an op, a graph, a stream, a policy) was copied or pickled (a
    ``tile.core.HandleCopyError``, so one ``except`` catches the refusals of every layer).

    A copy would be a second owner: an op that runs twice, a graph closed twice, a stream driven from a clone.

    Parameters
    ----------
    what : str
        The object, e.g. ``"<Then op, fresh>"``.
    how : str
        The refused protocol: ``"copy.copy"``, ``"copy.deepcopy"`` or ``"pickling"``.
    fix : str
        What to do instead.
    """

    def __init__(self, what: str, how: str, fix: str) -> None:
        self.what = what
        self.how = how
        self.fix = fix
        super().__init__(f"{how} of {what} would make a second owner of what it holds, so it cannot be copied; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.how, self.fix))
