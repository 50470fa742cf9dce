"""``DeviceOp``: a lazy description of device work that produces an output.

Building an op enqueues nothing. Executing it (``.sync()``, ``.sync_on(stream)``, ``await op``,
``.schedule(policy)``, ``.graph()``) enqueues its work on one execution context and hands its output back
only once that work is done.

Invariants:
- An op executes at most once, also when several threads try at once. Combining an op into another
  (``then``, ``map``, ``zip``...) moves it: using or executing it again raises :class:`OpConsumedError`
  naming where it went. ``.shared()`` is the way to use one result several times.
- An op owns its inputs (and the ops it was built from) until its work has completed; only then does it
  drop them and hand the output back. If the caller goes away first (a cancelled ``await``), the inputs
  are dropped when the work completes, never before.
- Functions given to ``then``/``map`` run on the host while the op is being enqueued, before the device
  work is done: they may restructure and pass on the values they receive (handles), never read them. Values
  that own memory enforce this themselves (tile.frontend's handles are *in flight* until the tree's work
  completes and its release clears the state: they refuse reads, views, frees and moves other than into a
  launch, which then runs in stream order after the producer). An op executed as the root of a run
  (``_run_root``) hands its output to nobody before completion, so it need not mark it.
- Executing is guarded by the thread's execution lock: a ``.sync()`` inside such a function raises
  :class:`ExecutionLockError` instead of deadlocking.

Subclasses implement ``_execute(ctx)`` (enqueue the work, return the output), and when they hold other ops
or inputs, ``_children()`` and ``_drop()``; ``_refusal(ctx)`` says why an op cannot be captured.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from tile.aio import _lock, _run
from tile.aio._context import ExecutionContext
from tile.aio._errors import CaptureError, OpConsumedError, OpTypeError
from tile.aio._uncopyable import Uncopyable

if TYPE_CHECKING:
    from tile.aio._graph import Graph
    from tile.aio._policy import SchedulingPolicy

__all__ = ["DeviceOp", "Scheduled", "caller_site"]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")
U = TypeVar("U")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")

Site = tuple[str, int]


def caller_site() -> Site:
    """Return (file, line) of the user code that called the public function calling this helper.

    Frames of Tile's own packages (modules named ``tile.*``, e.g. a frontend launcher overriding ``sync``)
    are skipped, so messages point at the user's line.
    """
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("tile."):
        frame = frame.f_back
    site = (frame.f_code.co_filename, frame.f_lineno)
    return _INTERNED.get(site) or _interned(site)


_CLAIMING = threading.Lock()  # held while an op's state is tested and taken (`DeviceOp._claim`)

# Sites and fates recur (one per call site and verb): each op stores the interned tuple, so a pipeline of thousands of
# pending ops does not hold (and make the cyclic GC traverse) thousands of equal tuples.
_INTERNED: dict[Any, Any] = {}
_INTERNED_CAP = 4096


def _interned(value: T) -> T:
    """``value`` itself, kept as the one copy handed out from now on (callers try ``_INTERNED.get`` first)."""
    if len(_INTERNED) >= _INTERNED_CAP:  # generated code could make ever-new sites: stay bounded
        _INTERNED.clear()
    _INTERNED[value] = value
    return value


_then_link: Callable[[Any, Any], Any] | None = None  # `DeviceOp.then` compiled (set by `_combinators.use_compiled`)
_THEN_FATES: dict[Site, tuple[str, Site]] = {}  # (file, line) -> the interned fate of an op moved into .then() there
_then_last: tuple[Any, int, tuple[str, Site]] = (None, -1, ("", ("", 0)))  # (code, f_lasti, fate) of the last .then()


def _not_callable(method: str, fn: object) -> OpTypeError:
    """The refusal of a non-callable ``fn`` given to ``method``, raised before the op is moved."""
    return OpTypeError(
        f"the function passed to {method}", "a callable", type(fn).__name__, "pass a function or a lambda"
    )


def _then_fate(where: Site) -> tuple[str, Site]:
    """The fate ``DeviceOp.then`` gives the op it moves at ``where``, interned as ``_claim`` makes it, and cached."""
    site = _INTERNED.get(where) or _interned(where)
    fate = ("moved into .then()", site)
    fate = _INTERNED.get(fate) or _interned(fate)
    if len(_THEN_FATES) >= _INTERNED_CAP:  # generated code could make ever-new sites: stay bounded
        _THEN_FATES.clear()
    _THEN_FATES[where] = fate
    return fate


class DeviceOp(Uncopyable, Generic[T_co]):
    """Lazy device work with an output of type ``T_co``; see the module docstring for the rules."""

    __slots__ = ("_fate",)
    _copy_fix = "an op runs at most once: build it again, or call .shared() on it to use one result several times"

    def __init__(self) -> None:
        self._fate: tuple[str, Site] | None = None

    # -- implemented by subclasses ------------------------------------------------------------------------

    def _execute(self, ctx: ExecutionContext) -> T_co:
        """Enqueue this op's work on ``ctx`` and return its output (valid once the work completes)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _execute")

    def _children(self) -> tuple[DeviceOp[Any], ...]:
        """The ops this op was built from (known before execution)."""
        return ()

    def _drop(self) -> None:
        """Drop references to inputs and children: called once the work has completed."""

    def _refusal(self, ctx: ExecutionContext) -> str | None:
        """Why this op alone cannot be recorded into a graph on ``ctx``, or None when it can."""
        return None

    def _describe(self) -> str:
        return f"the {type(self).__name__} op"

    # -- framework ----------------------------------------------------------------------------------------

    def _run_in(self, ctx: ExecutionContext) -> T_co:
        """Execute as part of an op tree on ``ctx`` (refusing non-capturable work during a capture)."""
        if ctx.capturing and (reason := self._refusal(ctx)) is not None:
            raise CaptureError(self._describe(), reason)
        return self._execute(ctx)

    def _run_root(self, ctx: ExecutionContext) -> T_co:
        """Execute as the root of a run (`_run`), whose output nobody sees before the work has completed."""
        return self._run_in(ctx)

    def _claim(self, verb: str, site: Site) -> None:
        """Take this op for one use (``verb`` at ``site``); raise OpConsumedError if it was taken before.

        The test and the take are one step (`_CLAIMING`): two threads executing or moving one op never both get it.
        """
        fate = (verb, site)
        fate = _INTERNED.get(fate) or _interned(fate)
        with _CLAIMING:
            taken = self._fate
            if taken is None:
                self._fate = fate
                return
        verb_before, (file, line) = taken
        raise OpConsumedError(self._describe(), f"{verb_before} at {file}:{line}")

    def _claim_run(self, verb: str, site: Site, ctx: ExecutionContext, link: Any) -> T_co:
        """Claim this op (``verb`` at ``site``), give it to ``link`` (``link._next``: the tree releases it from now
        on) and execute it in ``link``'s tree on ``ctx``: a ``.then()`` step's work on the op its function returned.
        A subclass may do the three in one step; a refused claim must leave ``link`` untouched."""
        self._claim(verb, site)
        link._next = self
        return self._run_in(ctx)

    def _release(self) -> None:
        """Hand everything back: drop inputs and children, the whole tree. The work must be complete.

        Iterative, like :meth:`_first_refusal`: a pipeline of thousands of chained ops is a deep tree.
        """
        children = self._hand_off()
        if not children:  # a single launch or copy: the common case of .sync() needs no stack
            return
        stack = list(children)
        while stack:
            stack.extend(stack.pop()._hand_off())

    def _hand_off(self) -> tuple[DeviceOp[Any], ...]:
        """Drop this op's references and return its children, to be released next."""
        children = self._children()
        self._drop()
        return children

    def _first_refusal(self, ctx: ExecutionContext) -> tuple[DeviceOp[Any], str] | None:
        """The first op of this tree (as far as it is known before execution) that cannot be captured."""
        stack: list[DeviceOp[Any]] = [self]
        while stack:
            op = stack.pop()
            if (reason := op._refusal(ctx)) is not None:
                return op, reason
            stack.extend(reversed(op._children()))
        return None

    @property
    def consumed(self) -> bool:
        """True once this op was executed or moved into another op."""
        return self._fate is not None

    def __repr__(self) -> str:
        state = "fresh" if self._fate is None else self._fate[0]
        return f"<{type(self).__name__} op, {state}>"

    # -- combinators --------------------------------------------------------------------------------------

    def then(self, fn: Callable[[T_co], DeviceOp[U]]) -> DeviceOp[U]:
        """Run ``fn(output)`` on the host after enqueuing this op, and the op it returns after it, in order,
        on the same context; the result is that op's output.

        Parameters
        ----------
        fn : callable
            Receives this op's output (handles: pass them on, do not read them) and returns a DeviceOp.

        Returns
        -------
        DeviceOp
            The chained op; this op is moved into it.
        """
        # `caller_site` and `_claim`, inlined with the fate cached per call site: a pipeline makes one link per step,
        # built before any of its work is enqueued (time the device waits for in a chain of large kernels).
        if not callable(fn):  # refused while the op is still the caller's (it would fail only when run, after its work)
            raise _not_callable(".then()", fn)
        fast = _then_link  # compiled: the same steps for a launch or a link (NotImplemented: not handled, nothing done)
        if fast is not None and (link := fast(self, fn)) is not NotImplemented:
            made: DeviceOp[U] = link
            return made
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("tile."):
            frame = frame.f_back
        global _then_last  # noqa: PLW0603  # the last position's fate (a chain is built at one line)
        code, lasti, last = frame.f_code, frame.f_lasti, _then_last
        if last[0] is code and last[1] == lasti:  # f_lineno decodes the line table: read only at a new position
            fate = last[2]
        else:
            where = (code.co_filename, frame.f_lineno)
            fate = _THEN_FATES.get(where) or _then_fate(where)
            _then_last = (code, lasti, fate)
        with _CLAIMING:
            if self._fate is None:
                self._fate = fate
                return _combinators.Then(self, fn, fate[1])
        self._claim(fate[0], fate[1])  # taken before: OpConsumedError (a shared op's `_claim` lets it be taken again)
        return _combinators.Then(self, fn, fate[1])

    def map(self, fn: Callable[[T_co], U]) -> DeviceOp[U]:
        """Transform the output with ``fn`` on the host, at execution time (no device work of its own).

        Parameters
        ----------
        fn : callable
            Receives this op's output; what it returns is the new output. An exception it raises propagates
            from the execution, after the work already enqueued has completed and the inputs were released.

        Returns
        -------
        DeviceOp
            The mapped op; this op is moved into it.
        """
        if not callable(fn):
            raise _not_callable(".map()", fn)
        self._claim("moved into .map()", caller_site())
        return _combinators.Map(self, fn)

    def shared(self) -> _shared.Shared[T_co]:
        """Return an op that runs this one once and gives its output to every use (any number of them).

        Returns
        -------
        DeviceOp
            The shared op: executable and combinable any number of times; uses on another context wait for
            the first run's work. Its first execution cannot happen inside a graph capture.
        """
        self._claim("moved into .shared()", caller_site())
        return _shared.Shared(self)

    @overload
    def unzip(self: DeviceOp[tuple[A, B]], n: Literal[2]) -> tuple[DeviceOp[A], DeviceOp[B]]: ...
    @overload
    def unzip(self: DeviceOp[tuple[A, B, C]], n: Literal[3]) -> tuple[DeviceOp[A], DeviceOp[B], DeviceOp[C]]: ...
    @overload
    def unzip(
        self: DeviceOp[tuple[A, B, C, D]], n: Literal[4]
    ) -> tuple[DeviceOp[A], DeviceOp[B], DeviceOp[C], DeviceOp[D]]: ...
    @overload
    def unzip(self: DeviceOp[tuple[Any, ...]], n: int) -> tuple[DeviceOp[Any], ...]: ...
    def unzip(self: DeviceOp[tuple[Any, ...]], n: int) -> tuple[DeviceOp[Any], ...]:
        """Split an op whose output is an ``n``-tuple into ``n`` ops, one per element.

        Parameters
        ----------
        n : int
            The tuple's length (checked when the work runs).

        Returns
        -------
        tuple of DeviceOp
            One op per element; the work runs once, when the first of them executes.
        """
        count = _shared.arity(n)  # checked before the claim: a refused call leaves this op unconsumed
        self._claim("moved into .unzip()", caller_site())
        return _shared.unzip_shared(_shared.Shared(self), count)

    # -- execution ----------------------------------------------------------------------------------------

    def sync(self) -> T_co:
        """Execute on the default device's policy, block until the work is done, and return the output.

        Returns
        -------
        object
            The output, handed back now that the work completed.

        Raises
        ------
        OpConsumedError
            When this op was already executed or moved.
        ExecutionLockError
            When called while this thread executes another op.
        """
        _lock.check(".sync()")
        return _run.run_sync(self, self._home_context(), ".sync()", caller_site())

    def sync_on(self, stream: object) -> T_co:
        """Execute on ``stream``, block until the work is done, and return the output.

        Parameters
        ----------
        stream : ExecutionContext or tile.core.Stream
            Where to run (a CUDA stream is wrapped in a :class:`CudaContext`; so is anything
            ``tile.core.Stream.borrow`` accepts, e.g. a torch stream).
        """
        _lock.check(".sync_on()")
        ctx = stream if type(stream) is _cuda.CudaContext else _policy.as_context(stream)  # skip the ABC check
        return _run.run_sync(self, ctx, ".sync_on()", caller_site())

    def __await__(self) -> Generator[Any, None, T_co]:
        """``await op``: execute on the default policy; resolve when the work is done, without blocking the
        event loop (a short bounded poll, then a waiter thread or host callback wakes the loop)."""
        _lock.check("await")
        return _run.run_async(self, self._home_context(), "await", caller_site()).__await__()

    def schedule(self, policy: SchedulingPolicy) -> Scheduled[T_co]:
        """Bind this op to a scheduling policy.

        Parameters
        ----------
        policy : SchedulingPolicy
            Picks the context when the result is executed (``tile.aio.default_policy(device)`` chooses a
            device).

        Returns
        -------
        Scheduled
            Run it with ``.sync()`` or ``await``.
        """
        return Scheduled(self, policy)

    def graph(self, on: object = None) -> Graph[T_co]:
        """Capture this op into a graph (see :func:`tile.aio.capture`).

        Parameters
        ----------
        on : ExecutionContext or tile.core.Stream, optional
            Where to capture (default: the default policy's next context).

        Returns
        -------
        Graph
            The graph; it owns this op until closed.
        """
        _lock.check(".graph()")
        ctx = self._home_context() if on is None else _policy.as_context(on)
        return _graph.capture_on(self, ctx, caller_site())

    def _home(self) -> SchedulingPolicy | None:
        """The policy this op runs on when ``.sync()``, ``await`` or ``.graph()`` name no context: None for the
        default device's. An op bound to data on one device (a kernel launch, a collective) names that device's,
        and a ``.then()``/``.map()`` chain runs where its first op would, so a chain on GPU 1 runs on GPU 1."""
        return None

    def _home_context(self) -> ExecutionContext:
        return (self._home() or _policy.default_policy()).next_context()


class Scheduled(Uncopyable, Generic[T]):
    """An op bound to a scheduling policy: execute it with ``.sync()`` or ``await``."""

    __slots__ = ("_op", "_policy")
    _copy_fix = "it owns an op, which runs at most once: bind a new op with op.schedule(policy)"

    def __init__(self, op: DeviceOp[T], policy: SchedulingPolicy) -> None:
        self._op = op
        self._policy = policy

    @property
    def policy(self) -> SchedulingPolicy:
        """The policy that picks the context."""
        return self._policy

    def sync(self) -> T:
        """Execute on the policy's next context, block until done, return the output."""
        _lock.check(".schedule().sync()")
        return _run.run_sync(self._op, self._policy.next_context(), ".schedule().sync()", caller_site())

    def __await__(self) -> Generator[Any, None, T]:
        _lock.check("await .schedule()")
        ctx = self._policy.next_context()
        return _run.run_async(self._op, ctx, "await .schedule()", caller_site()).__await__()


# These modules subclass DeviceOp or call back into it, so they load after it is defined.
from tile.aio import _combinators, _cuda, _graph, _policy, _shared  # noqa: E402
