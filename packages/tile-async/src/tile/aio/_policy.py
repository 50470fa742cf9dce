"""Scheduling: which execution context an op runs on, and which device is the default.

A :class:`SchedulingPolicy` hands out contexts of one device. :class:`RoundRobin` rotates over a pool
(each device's default policy is a round-robin pool of ``TILE_AIO_POOL_SIZE`` streams, 4 by default, made
on first use); :class:`SingleStream` always gives the same context. The default device is a context
variable (per thread and per asyncio task; set with :func:`use_device` / :func:`set_default_device`),
then a process-wide default (``set_default_device(spec, process=True)``), then ``TILE_AIO_DEVICE``
(``cuda:0`` unless set). Default policies are process-wide, one per
device, replaceable with :func:`set_default_policy`.
"""

from __future__ import annotations

import itertools
import threading
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from tile.aio import _knobs
from tile.aio._context import HOST, ExecutionContext, HostDevice
from tile.aio._errors import OpTypeError
from tile.aio._host import HostStream
from tile.aio._uncopyable import Uncopyable

__all__ = [
    "RoundRobin",
    "SchedulingPolicy",
    "SingleStream",
    "as_context",
    "default_device",
    "default_policy",
    "device",
    "set_default_device",
    "set_default_policy",
    "stream_pool",
    "use_device",
]


class SchedulingPolicy(Uncopyable, ABC):
    """Hands out the execution contexts that ops run on; all of them belong to :attr:`device`."""

    __slots__ = ()
    _copy_fix = "pass the policy itself; it may be shared between threads"

    @property
    @abstractmethod
    def device(self) -> Hashable:
        """The device of every context this policy gives."""

    @abstractmethod
    def next_context(self) -> ExecutionContext:
        """The context for the next op."""


class RoundRobin(SchedulingPolicy):
    """Rotates over a fixed pool of contexts of one device (thread-safe).

    Parameters
    ----------
    contexts : sequence of ExecutionContext
        The pool: at least one, all on the same device.
    """

    __slots__ = ("_contexts", "_counter", "_n")

    def __init__(self, contexts: Sequence[ExecutionContext]) -> None:
        self._contexts = tuple(contexts)
        if not self._contexts:
            raise OpTypeError("RoundRobin()", "at least one execution context", "an empty sequence")
        devices = {ctx.device for ctx in self._contexts}
        if len(devices) != 1:
            raise OpTypeError("RoundRobin()", "contexts of one device", f"contexts of {sorted(map(repr, devices))}")
        self._n = len(self._contexts)
        self._counter = itertools.count()

    @property
    def device(self) -> Hashable:
        return self._contexts[0].device

    @property
    def contexts(self) -> tuple[ExecutionContext, ...]:
        """The pool, in rotation order."""
        return self._contexts

    def next_context(self) -> ExecutionContext:
        # next() on itertools.count is atomic under the GIL, so concurrent callers share the rotation.
        return self._contexts[next(self._counter) % self._n]

    def __repr__(self) -> str:
        return f"RoundRobin({self._n} contexts on {self.device!r})"


class SingleStream(SchedulingPolicy):
    """Always the same context: ops scheduled with it run one after another, in submission order.

    Parameters
    ----------
    context : ExecutionContext or tile.core.Stream
        The context (a stream is wrapped).
    """

    __slots__ = ("_context",)

    def __init__(self, context: object) -> None:
        self._context = as_context(context)

    @property
    def device(self) -> Hashable:
        return self._context.device

    def next_context(self) -> ExecutionContext:
        return self._context

    def __repr__(self) -> str:
        return f"SingleStream({self._context!r})"


def device(spec: object = None) -> Hashable:
    """Resolve a device specification.

    Parameters
    ----------
    spec : None, str, int or device
        ``None`` (the default device), ``"host"`` / :data:`HOST`, ``"cuda"``, ``"cuda:N"``, an ordinal ``N`` or
        a ``tile.core.Device``.

    Returns
    -------
    Hashable
        :data:`HOST` or the ``tile.core.Device``.

    Raises
    ------
    OpTypeError
        For anything else.
    """
    if spec is None:
        return default_device()
    if isinstance(spec, HostDevice) or spec == "host":
        return HOST
    if isinstance(spec, bool):
        raise OpTypeError("tile.aio.device()", '"host", "cuda:N", an ordinal or a tile.core.Device', "a bool")
    if isinstance(spec, int):
        return _cuda.device(spec)
    if isinstance(spec, str) and (spec == "cuda" or spec.startswith("cuda:")):
        ordinal = spec.partition(":")[2] or "0"
        if ordinal.isdigit():
            return _cuda.device(int(ordinal))
    if _cuda.is_device(spec):
        assert isinstance(spec, Hashable)
        return spec
    raise OpTypeError("tile.aio.device()", '"host", "cuda:N", an ordinal or a tile.core.Device', repr(spec))


_current: ContextVar[Hashable | None] = ContextVar("tile_aio_device", default=None)
_process_default: list[Hashable] = []  # set_default_device(..., process=True); empty: use the environment
_env_devices: dict[str, Hashable] = {}


def default_device() -> Hashable:
    """The device ops run on when no policy or stream is given: the current thread's / task's choice, else
    the process-wide one, else ``TILE_AIO_DEVICE`` (``cuda:0`` when unset)."""
    current = _current.get()
    if current is not None:
        return current
    if _process_default:
        return _process_default[0]
    spec = _knobs.default_device_spec()
    found = _env_devices.get(spec)
    if found is None:
        found = _env_devices[spec] = device(spec)
    return found


def set_default_device(spec: object, *, process: bool = False) -> None:
    """Make ``spec`` (see :func:`device`) the default device.

    Parameters
    ----------
    spec : str, int, device or None
        The device. With ``process=True``, None removes the process-wide default again.
    process : bool
        False (default): for the current thread / asyncio task only (a context variable; new threads do not
        inherit it). True: for the whole process, wherever no thread or task chose one (e.g. a CPU backend
        selected once for the program).
    """
    if not process:
        _current.set(device(spec))
        return
    chosen = None if spec is None else device(spec)
    _process_default.clear()
    if chosen is not None:
        _process_default.append(chosen)


@contextmanager
def use_device(spec: object) -> Iterator[Hashable]:
    """Make ``spec`` the default device of this thread / task inside a ``with`` block.

    Parameters
    ----------
    spec : str, int or device
        See :func:`device`.

    Yields
    ------
    Hashable
        The resolved device.
    """
    token = _current.set(device(spec))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


_policies: dict[Hashable, SchedulingPolicy] = {}
_policies_mutex = threading.Lock()


def default_policy(spec: object = None) -> SchedulingPolicy:
    """Return the default policy of a device: a round-robin stream pool, made on first use.

    Parameters
    ----------
    spec : optional
        The device (see :func:`device`); the default device when None.

    Returns
    -------
    SchedulingPolicy
        The policy (the same object on every call until :func:`set_default_policy` replaces it).
    """
    dev = default_device() if spec is None else device(spec)
    policy = _policies.get(dev)
    if policy is not None:
        return policy
    with _policies_mutex:
        policy = _policies.get(dev)
        if policy is None:
            policy = _policies[dev] = stream_pool(dev)
        return policy


def set_default_policy(policy: SchedulingPolicy) -> SchedulingPolicy | None:
    """Make ``policy`` the default of its device.

    Parameters
    ----------
    policy : SchedulingPolicy
        The new default for ``policy.device``.

    Returns
    -------
    SchedulingPolicy or None
        The policy it replaces (None if there was none).
    """
    with _policies_mutex:
        previous = _policies.get(policy.device)
        _policies[policy.device] = policy
    return previous


def stream_pool(spec: object = None, size: int | None = None) -> RoundRobin:
    """Make a new round-robin pool of fresh streams on a device.

    Parameters
    ----------
    spec : optional
        The device (see :func:`device`); the default device when None.
    size : int, optional
        Streams in the pool (default ``TILE_AIO_POOL_SIZE``, 4).

    Returns
    -------
    RoundRobin
        Over inline :class:`HostStream` s (host) or new non-blocking ``tile.core`` streams (CUDA).
    """
    dev = device(spec)
    n = _knobs.pool_size() if size is None else size
    if n < 1:
        raise OpTypeError("stream_pool()", "size >= 1", str(n))
    if dev is HOST:
        return RoundRobin([HostStream(name=f"host-pool-{i}") for i in range(n)])
    return RoundRobin([_cuda.new_context(dev) for _ in range(n)])


def as_context(obj: object) -> ExecutionContext:
    """Return an execution context for ``obj``.

    Parameters
    ----------
    obj : ExecutionContext, tile.core.Stream, int or stream-like
        A context is returned as is; a ``tile.core.Stream``, a raw ``CUstream`` handle or an object with
        ``__cuda_stream__`` (torch, cupy, cuda.core streams) is wrapped in a :class:`CudaContext` (the same
        context for the same ``tile.core.Stream`` object while it is in use).

    Returns
    -------
    ExecutionContext
        The context.

    Raises
    ------
    OpTypeError
        For anything else.
    """
    ctx = _cuda.wrapped(obj)  # the steady state of ``op.sync_on(stream)``: one dict lookup, no ABC check
    if ctx is not None:
        return ctx
    if isinstance(obj, ExecutionContext):
        return obj
    return _cuda.wrap_stream(obj)


from tile.aio import _cuda  # noqa: E402  # _cuda builds contexts on _context; kept last so it can import us lazily
