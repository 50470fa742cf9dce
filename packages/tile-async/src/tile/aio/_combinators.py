"""The op combinators and value constructors: ``value``, ``empty``, ``then``, ``map``, ``zip``, ``collect``,
``with_context``, ``host_call`` (``shared`` and ``unzip`` are in ``_shared``).

Invariants: every combinator claims (moves) the ops it is built from when it is built, enqueues them on
the context it is executed on in the order given, and keeps them until it is released. Python needs no
``boxed``: every op already has the type ``DeviceOp[T]``; ``collect`` is the
``Vec<DeviceOp>`` of cuTile Rust.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from tile.aio import _op
from tile.aio._context import HOST, ExecutionContext
from tile.aio._errors import OpTypeError
from tile.aio._op import DeviceOp, Site, caller_site

if TYPE_CHECKING:
    from tile.aio._policy import SchedulingPolicy

__all__ = [
    "Collect",
    "Map",
    "Then",
    "Value",
    "WithContext",
    "Zip",
    "collect",
    "empty",
    "host_call",
    "value",
    "with_context",
    "zip",
]

T = TypeVar("T")
U = TypeVar("U")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")


_RETURNED = "returned by the .then() function"  # the fate's verb of an op a .then() function returned

# A compiled run and release of a chain (tile.frontend's launch extension, which knows its launches), set by
# `use_compiled` while that path is active: each does what `_Link._execute` / `DeviceOp._release` do, in C.
_run_links: Callable[[Any, ExecutionContext], Any] | None = None
_release_links: Callable[[Any], None] | None = None


def use_compiled(
    run: Callable[[Any, ExecutionContext], Any] | None,
    release: Callable[[Any], None] | None,
    then: Callable[[Any, Any], Any] | None = None,
) -> None:
    """Run and release ``.then()``/``.map()`` chains with ``run(link, ctx)`` and ``release(op)``, and build ``.then()``
    links with ``then(op, fn)`` (None: in Python).

    ``run`` must behave as `_Link._execute`, ``then`` as `DeviceOp.then` (each returning NotImplemented, having done
    nothing, to leave a call to Python) and ``release`` as `DeviceOp._release`; tile.frontend passes its compiled launch
    path's, with the same typed errors.
    """
    global _run_links, _release_links  # the process-wide path, read per chain
    _run_links, _release_links = run, release
    _op._then_link = then


def _claim_all(ops: list[DeviceOp[Any]], verb: str, site: Site) -> None:
    """Claim every op (``verb`` at ``site``) or none: the ops are all checked first (`_as_op`), and when one claim is
    refused (an op consumed before, or passed twice) the claims already made are given back, so the error leaves the
    caller's other ops usable instead of moved into an op that was never made."""
    done: list[DeviceOp[Any]] = []
    try:
        for op in ops:
            before = op._fate
            op._claim(verb, site)
            if before is None:
                done.append(op)
    except BaseException:
        with _op._CLAIMING:
            for op in done:
                op._fate = None  # claimed here just now (its fate was None): nothing else took it since
        raise


def _as_op(obj: object, where: str) -> DeviceOp[Any]:
    if not isinstance(obj, DeviceOp):
        raise OpTypeError(where, "a DeviceOp", type(obj).__name__)
    return obj


class Value(DeviceOp[T]):
    """An op with no work whose output is a given value."""

    __slots__ = ("_value",)

    def __init__(self, obj: T) -> None:
        super().__init__()
        self._value = obj

    def _execute(self, ctx: ExecutionContext) -> T:
        return self._value

    def _drop(self) -> None:
        del self._value


class _Link(DeviceOp[U]):
    """A step applied to the output of one source op (``then`` and ``map``).

    Executing a link walks down the chain of links below it and then applies them bottom-up in a loop, so a
    pipeline built as ``op.then(...).map(...).then(...)`` thousands of times deep does not recurse. Links
    never refuse capture (they skip ``_run_in``); the ops they run go through it.
    """

    __slots__ = ("_src",)

    def __init__(self, src: DeviceOp[Any]) -> None:
        super().__init__()
        self._src = src

    def _step(self, out: Any, ctx: ExecutionContext) -> U:
        raise NotImplementedError

    def _home(self) -> SchedulingPolicy | None:
        """Where the chain's first op would run (a chain thousands of links deep is walked, not recursed)."""
        src: DeviceOp[Any] = self._src
        while isinstance(src, _Link):
            src = src._src
        return src._home()

    def _execute(self, ctx: ExecutionContext) -> U:
        fast = _run_links
        if fast is not None and (done := fast(self, ctx)) is not NotImplemented:
            ran: U = done
            return ran
        links: list[_Link[Any]] = [self]
        while isinstance(links[-1]._src, _Link):
            links.append(links[-1]._src)
        out = links[-1]._src._run_in(ctx)
        for link in reversed(links):
            out = link._step(out, ctx)
        result: U = out
        return result

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return (self._src,)

    def _drop(self) -> None:
        del self._src

    def _release(self) -> None:
        fast = _release_links
        if fast is None:
            DeviceOp._release(self)
        else:
            fast(self)


class Then(_Link[U]):
    """``src`` then the op ``fn(src's output)`` on the same context."""

    __slots__ = ("_fn", "_next", "_site")

    def __init__(self, src: DeviceOp[T], fn: Callable[[T], DeviceOp[U]], site: Site) -> None:
        self._fate = None  # DeviceOp and _Link's __init__, inlined: a pipeline makes one Then per step
        self._src = src
        self._fn = fn
        self._site = site
        self._next: DeviceOp[U] | None = None

    def _step(self, out: Any, ctx: ExecutionContext) -> U:
        return self._take(self._fn(out), ctx)

    def _take(self, nxt: object, ctx: ExecutionContext) -> U:
        """Claim and run ``nxt``, what the function returned, in this link's tree (the compiled run calls this too)."""
        if not isinstance(nxt, DeviceOp):  # described only on error: repr() of the function costs more than a step
            raise OpTypeError(f"the function passed to .then() ({self._fn!r})", "a DeviceOp", type(nxt).__name__)
        result: U = nxt._claim_run(_RETURNED, self._site, ctx, self)  # sets self._next once claimed
        return result

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return (self._src,) if self._next is None else (self._src, self._next)

    def _drop(self) -> None:
        del self._src, self._fn, self._next

    def _hand_off(self) -> tuple[DeviceOp[Any], ...]:
        # `_children` and `_drop` in one call: a chain's release runs once per link, after its work, while the device
        # waits for the next run.
        src, nxt = self._src, self._next
        del self._src, self._fn, self._next
        return (src,) if nxt is None else (src, nxt)


class Map(_Link[U]):
    """``src`` with its output transformed by ``fn`` on the host."""

    __slots__ = ("_fn",)

    def __init__(self, src: DeviceOp[T], fn: Callable[[T], U]) -> None:
        super().__init__(src)
        self._fn = fn

    def _step(self, out: Any, ctx: ExecutionContext) -> U:
        return self._fn(out)

    def _drop(self) -> None:
        del self._src, self._fn


class Zip(DeviceOp[tuple[Any, ...]]):
    """Several ops, in order, on one context; the output is the tuple of their outputs."""

    __slots__ = ("_ops",)

    def __init__(self, ops: tuple[DeviceOp[Any], ...]) -> None:
        super().__init__()
        self._ops = ops

    def _execute(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        return tuple([op._run_in(ctx) for op in self._ops])

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return self._ops

    def _drop(self) -> None:
        self._ops = ()


class Collect(DeviceOp[list[T]]):
    """A sequence of ops of one output type, in order, on one context; the output is the list of outputs."""

    __slots__ = ("_ops",)

    def __init__(self, ops: tuple[DeviceOp[T], ...]) -> None:
        super().__init__()
        self._ops = ops

    def _execute(self, ctx: ExecutionContext) -> list[T]:
        return [op._run_in(ctx) for op in self._ops]

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        return self._ops

    def _drop(self) -> None:
        self._ops = ()


class WithContext(DeviceOp[T]):
    """Calls ``fn(ctx)`` at execution time: raw access to the execution context."""

    __slots__ = ("_capturable", "_fn")

    def __init__(self, fn: Callable[[ExecutionContext], T], capturable: bool) -> None:
        super().__init__()
        self._fn = fn
        self._capturable = capturable

    def _execute(self, ctx: ExecutionContext) -> T:
        result: T = self._fn(ctx)
        return result

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        if self._capturable:
            return None
        return "a with_context() function may do anything; pass capturable=True if it only enqueues work"

    def _drop(self) -> None:
        del self._fn


class HostCall(DeviceOp[tuple[Any, ...]]):
    """``fn(*args)`` enqueued as host work; the output is ``args``, handed back when it has run."""

    __slots__ = ("_args", "_fn")

    def __init__(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        super().__init__()
        self._fn = fn
        self._args = args

    def _execute(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        fn, args = self._fn, self._args
        ctx.enqueue(lambda: fn(*args))
        return args

    def _describe(self) -> str:
        return f"host_call({getattr(self._fn, '__qualname__', self._fn)!r})"

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        if ctx.device is HOST:
            return None
        return "host work on a CUDA stream would be a host callback run at every replay (not supported)"

    def _drop(self) -> None:
        del self._fn, self._args


def value(obj: T) -> DeviceOp[T]:
    """Return an op with no work whose output is ``obj`` (e.g. to start a ``then`` chain).

    Parameters
    ----------
    obj : object
        The output; the op owns it until executed and hands it back then.

    Returns
    -------
    DeviceOp
        The op.
    """
    return Value(obj)


def empty() -> DeviceOp[None]:
    """Return an op with no work and no output."""
    return Value(None)


def with_context(fn: Callable[[ExecutionContext], T], *, capturable: bool = False) -> DeviceOp[T]:
    """Return an op that calls ``fn(ctx)`` with the execution context when executed.

    Parameters
    ----------
    fn : callable
        Enqueues work on ``ctx`` (``ctx.enqueue``, or a launch on a CUDA context's stream) and returns the
        output. It runs with the execution lock held.
    capturable : bool
        Whether ``fn`` only enqueues work that a graph can record (no allocation, no synchronization).
    """
    if not callable(fn):
        raise _op._not_callable("with_context()", fn)
    return WithContext(fn, capturable)


def host_call(fn: Callable[..., object], *args: Any) -> DeviceOp[tuple[Any, ...]]:
    """Return an op that runs ``fn(*args)`` on the host in stream order; its output is ``args``.

    On a host stream this is how work "runs on the device" (the CPU interpreter uses it). On a CUDA stream
    it is a host callback in stream order (``fn`` must not call CUDA) and cannot be graph-captured.

    Parameters
    ----------
    fn : callable
        The work; its return value is ignored; an exception it raises is raised by the execution.
    *args : object
        Its arguments, owned by the op until ``fn`` has run, then handed back.

    Returns
    -------
    DeviceOp
        The op producing ``args``.
    """
    if not callable(fn):
        raise _op._not_callable("host_call()", fn)
    return HostCall(fn, args)


@overload
def zip(a: DeviceOp[A], /) -> DeviceOp[tuple[A]]: ...
@overload
def zip(a: DeviceOp[A], b: DeviceOp[B], /) -> DeviceOp[tuple[A, B]]: ...
@overload
def zip(a: DeviceOp[A], b: DeviceOp[B], c: DeviceOp[C], /) -> DeviceOp[tuple[A, B, C]]: ...
@overload
def zip(a: DeviceOp[A], b: DeviceOp[B], c: DeviceOp[C], d: DeviceOp[D], /) -> DeviceOp[tuple[A, B, C, D]]: ...
@overload
def zip(*ops: DeviceOp[Any]) -> DeviceOp[tuple[Any, ...]]: ...
def zip(*ops: DeviceOp[Any]) -> DeviceOp[tuple[Any, ...]]:
    """Return an op running ``ops`` in order on one context; its output is the tuple of their outputs.

    Parameters
    ----------
    *ops : DeviceOp
        The ops, moved into the result (using one of them again raises ``OpConsumedError``).

    Returns
    -------
    DeviceOp
        The op producing ``(out_0, out_1, ...)``.
    """
    _claim_all([_as_op(op, f"argument {i} of zip()") for i, op in enumerate(ops)], "moved into zip()", caller_site())
    return Zip(ops)


def collect(ops: Iterable[DeviceOp[T]]) -> DeviceOp[list[T]]:
    """Return an op running ``ops`` in order on one context; its output is the list of their outputs.

    The Python form of cuTile Rust's ``Vec<DeviceOp>``: any number of ops of one output type.

    Parameters
    ----------
    ops : iterable of DeviceOp
        The ops, moved into the result.

    Returns
    -------
    DeviceOp
        The op producing ``[out_0, out_1, ...]``.
    """
    site = caller_site()
    taken = tuple(ops)
    _claim_all([_as_op(op, f"item {i} given to collect()") for i, op in enumerate(taken)], "moved into collect()", site)
    return Collect(taken)
