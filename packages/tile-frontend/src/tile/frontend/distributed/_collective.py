"""`Collective`: one ``torch.distributed`` collective on Tile tensors, as a lazy ``tile.aio.DeviceOp``.

Invariants (the launch rules of ``_launch``, applied to a collective):
- Building one checks everything first (devices, dtypes, shapes, contiguity, aliasing, exclusivity) and moves
  nothing unless every check passed. Then each tensor it writes is moved into it after the partition check
  (exclusive memory: no other live handle overlaps it), and each tensor it reads is moved too, or, given as a
  `Shared`, counted as one more user. Every storage counts the op as pending, so a ``free()`` elsewhere waits.
- Executing hands torch zero-copy byte views of that memory (DLPack for GPU memory, numpy for host memory) and
  runs the collective in the context's stream order: on a GPU with torch's current stream set to the context's
  stream (NCCL orders itself after the work already queued there, and what comes later waits for it), on a host
  stream as queued host work (gloo). torch's views never leave the op; the memory stays held until the op is
  released, that is until the collective's stream work is done, whatever torch still references.
- The handles come back (the op's output) once the work is done; handed on early (``.then``, a graph capture) they
  carry the `InFlight` fate, so only a kernel call or another collective may take them, ordered after this one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tile.aio
from tile.aio import DeviceOp, ExecutionContext, SchedulingPolicy
from tile.frontend._errors import (
    IN_FLIGHT,
    AliasError,
    ArgumentError,
    BackendError,
    BorrowError,
    DeviceMismatchError,
    InFlight,
    InFlightError,
)
from tile.frontend._launch import require_builtin_context, taken_in_flight
from tile.frontend._partition import Partition, require_exclusive
from tile.frontend._placement import device_name
from tile.frontend._shared import Shared, tensor_of
from tile.frontend._storage import HOST, OWNED
from tile.frontend._tensor import _FIX, Tensor

__all__ = ["Collective", "collective"]

Body = Callable[[list[Any]], None]
"""Runs the collective on torch views of the op's tensors (in the op's order: written ones, then read ones)."""


class Collective(DeviceOp[Any]):
    """One collective, not yet executed: ``.sync()``, ``await``, ``.then(...)``, ``.graph()`` as for a launch.

    Its output is what it was given, handed back once its work is done: the tensor for ``all_reduce`` and
    ``broadcast``, ``(out, inp)`` for ``all_gather`` and ``reduce_scatter``.
    """

    __slots__ = ("_after", "_body", "_device", "_held", "_lent", "_name", "_site", "_torch", "_values")
    _after: InFlight | tuple[InFlight, ...] | None
    _held: tuple[Tensor, ...]  # the tensors it writes in place, held against new borrows until it is released
    _body: Body
    _device: Any
    _lent: InFlight | None
    _name: str
    _site: str
    _torch: Any
    _values: tuple[Any, ...] | None

    def __init__(self) -> None:
        raise TypeError("collectives are made by tile.distributed.all_reduce/all_gather/reduce_scatter/broadcast")

    def _describe(self) -> str:
        return f"the {self._name} at {self._site}"

    def _output(self, values: tuple[Any, ...]) -> Any:
        return values[0] if len(values) == 1 else values

    def _run_root(self, ctx: ExecutionContext) -> Any:
        return self._execute(ctx, False)

    def _execute(self, ctx: ExecutionContext, lend: bool = True) -> Any:
        values = self._values
        assert values is not None, "a collective executes once, before it is released"
        require_builtin_context(self, ctx)
        on_host = self._device == HOST
        if (ctx.device is tile.aio.HOST) != on_host or (not on_host and ctx.device != self._device):
            raise BackendError(
                f"{self._describe()} uses tensors on {device_name(self._device)} but was executed on {ctx!r}; use "
                ".sync()/await (they pick a stream of the tensors' device) or a stream of that device"
            )
        self._order_after(ctx)
        views = [_torch_view(self._torch, tensor_of(v)) for v in values]
        body = self._body
        if on_host:

            def run() -> None:
                body(views)

            ctx.enqueue(run)
        else:
            cuda = self._torch.cuda
            ordinal = self._device.ordinal
            # torch enqueues on the handle while the body runs: counted on the stream (refused once closed), so a
            # close meanwhile (a finalizer, the body, another thread) destroys it only after (review 42).
            with ctx.stream.in_use():  # type: ignore[attr-defined]  # a CudaContext
                stream = _torch_stream(self._torch, ordinal, ctx.stream.handle)  # type: ignore[attr-defined]
                if cuda.current_device() == ordinal:  # (torch.cuda.stream(...) costs several device look-ups more)
                    before = cuda.current_stream(ordinal)
                    cuda.set_stream(stream)
                    try:
                        body(views)
                    finally:
                        cuda.set_stream(before)
                else:  # setting a stream selects its device too: torch.cuda.stream(...) puts both back
                    with cuda.stream(stream):
                        body(views)
            del views  # the memory stays held by this op until its release, whatever torch's work objects keep
        if lend:
            fate = InFlight.make(
                IN_FLIGHT, f"handed on by {self._describe()} before its work was done", ctx, self._site
            )
            if ctx.capturing:
                fate = InFlight.make("captured", f"captured into a graph by {self._describe()}", ctx, self._site)
            for v in values:
                if not isinstance(v, Shared):
                    v._fate = fate
            self._lent = fate
        return self._output(values)

    def _order_after(self, ctx: ExecutionContext) -> None:
        """Wait for the producers of handles taken in flight (as a launch does: see ``_launch``)."""
        after = self._after
        fates: tuple[InFlight, ...] = (after,) if isinstance(after, InFlight) else after or ()
        for fate in fates:
            if fate.ctx is ctx:
                continue
            if fate[0] is not IN_FLIGHT:
                raise InFlightError(f"the tensors of {self._describe()}", fate[1], _FIX["captured"])
            ctx.wait(fate.ctx._observe())

    def _drop(self) -> None:
        with OWNED:
            values, self._values = self._values, None
            if values is None:
                return
            for t in self._held:
                t._storage.unhold(t)
            lent, self._lent = self._lent, None
            for v in values:
                if isinstance(v, Shared):
                    v._users -= 1
                elif lent is not None and v._fate is lent:
                    v._fate = None  # the work is done: what it handed on early is live again
                storage = tensor_of(v)._storage
                if storage.freed_at is None:
                    storage.pending -= 1
                else:
                    storage.release()  # may perform the deferred free

    def __del__(self) -> None:
        # Dropped without ever running, nothing is queued: hand its memory back (pending counts, holds, the users of
        # its shares). That is one never claimed, or one moved into another op (.then(), zip(), .shared()...) that
        # was dropped unrun, as `Launch.__del__` does: every execution but a run's root lends (`_lent`), and a root
        # is claimed by its run, not moved.
        if self._values is not None and (
            (fate := self._fate) is None or (self._lent is None and fate[0].startswith("moved into"))
        ):
            self._drop()

    def _home(self) -> SchedulingPolicy:
        """A stream of the device its tensors live on: ``.sync()``, ``await`` and ``.graph()`` (NCCL allows capture on
        GPU streams) run there, and so does a ``.then()`` chain starting here."""
        return tile.aio.default_policy("host" if self._device == HOST else self._device)


def collective(
    name: str,
    writes: Sequence[Any],
    reads: Sequence[Any],
    body: Body,
    *,
    torch: Any,
    device: object,
    site: str,
) -> Collective:
    """Check and build a `Collective` writing ``writes`` and reading ``reads`` on the group's ``device``."""
    with OWNED:
        handles = [*writes, *reads]
        for i, h in enumerate(handles):
            _check_handle(name, h, written=i < len(writes), device=device, site=site)
        _check_aliasing(name, list(writes), handles)
        for t in writes:
            if isinstance(t, Tensor):  # (a partition's memory is exclusive already)
                what = lambda t=t: f"write {t._describe()} in place in the {name} (at {site})"  # noqa: E731  (for errors)
                require_exclusive(t, what, "pass", admit=True)
        after = taken_in_flight([h for h in handles if isinstance(h, (Tensor, Partition))])
        where = f"moved into the {name} at {site}"
        moved: dict[int, Any] = {}
        values: list[Any] = []
        for h in handles:
            if isinstance(h, Shared):
                h._users += 1
                values.append(h)
            else:
                if id(h) not in moved:
                    moved[id(h)] = h._move("launch", where, admit=True)
                values.append(moved[id(h)])
            tensor_of(h)._storage.pending += 1
        # What it writes is held like a partition's memory: no new borrow may read it while the collective runs.
        held = tuple(v for v in values[: len(writes)] if isinstance(v, Tensor))
        for t in held:
            t._storage.hold(t, f"the {name} at {site}")
        self = object.__new__(Collective)
        self._held = held
        self._fate = None
        self._name, self._body, self._torch, self._device, self._site = name, body, torch, device, site
        self._values, self._after, self._lent = tuple(values), after, None
        return self


def _check_handle(name: str, h: object, *, written: bool, device: object, site: str) -> None:
    if isinstance(h, Shared):
        h._check()
        if written:
            raise BorrowError(
                f"{name} (at {site}) would write {h._describe()}, but a share is read-only: unshare() it and pass "
                "the tensor, or pass another tensor"
            )
    elif isinstance(h, (Tensor, Partition)):
        h._check(admit=True)
    else:
        raise ArgumentError(f"{name} (at {site}) takes Tile tensors (or shares, to read); got {type(h).__name__}")
    t = tensor_of(h)
    if t._storage.device != device:
        raise DeviceMismatchError(
            f"{name} (at {site}): {t._describe()} lives on {device_name(t._storage.device)}, but this process's "
            f"group runs on {device_name(device)}; move it there first (tensor.to(...))"
        )
    if not t.is_contiguous:
        raise ArgumentError(f"{name} (at {site}) needs contiguous tensors; {t._describe()} is strided: pass a .copy()")


def _check_aliasing(name: str, writes: list[Any], handles: list[Any]) -> None:
    for i, w in enumerate(writes):
        lo, hi = tensor_of(w)._byte_range()
        for j, other in enumerate(handles):
            if j == i:
                continue
            a, b = tensor_of(other)._byte_range()
            if other is w or (a < hi and lo < b):
                raise AliasError(
                    f"{name}: the tensor it writes ({tensor_of(w)._describe()}) overlaps another of its tensors "
                    f"({tensor_of(other)._describe()}); pass separate tensors"
                )


def _torch_view(torch: Any, t: Tensor) -> Any:
    """A writable torch tensor on ``t``'s elements (zero-copy), typed and shaped as ``t``.

    Cached in the storage (`Storage.foreign_views`), which drops them before its memory is released: making one costs
    a DLPack export and import (tens of microseconds), repeated by every op of a chain on the same tensor. The caller
    has checked ``t`` (live, not moved away, its storage not freed), so a cached view is reached only through a
    handle that may use the memory now."""
    storage = t._storage
    lo, hi = t._byte_range()
    key = (lo, hi, t.dtype.name, t.shape)
    views = storage.foreign_views
    if views is None:
        views = storage.foreign_views = {}
    elif (found := views.get(key)) is not None:
        return found
    raw = views.get(None)
    if raw is None:  # the whole storage's bytes, once
        if storage.host is not None:
            raw = torch.from_numpy(storage.host)
        else:
            from tile import core
            from tile.frontend._device import untied_view

            whole, byte = (storage.nbytes,), np.dtype(np.uint8)
            if storage.owned:  # the cache's lifetime is the storage's: not tied to the buffer (see untied_view)
                view = untied_view(storage, storage.address, byte, whole, (1,), readonly=False)
            else:
                device: Any = storage.device  # a tile.core.Device for device storage
                view = core.DeviceView(storage.address, byte, whole, (1,), device=device, owner=storage.keepalive)
            raw = torch.from_dlpack(view)
        views[None] = raw
    elif len(views) > _VIEWS_CAP:  # many ranges of one storage: keep the bytes, forget the typed views
        views.clear()
        views[None] = raw
    found = raw[lo - storage.address : hi - storage.address].view(torch_dtype(torch, t.dtype.name)).view(t.shape)
    views[key] = found
    return found


_VIEWS_CAP = 16  # typed views kept per storage (each is a small torch tensor object sharing the storage's bytes)

_STREAMS: dict[tuple[int, int], Any] = {}  # (device ordinal, CUDA stream handle) -> torch.cuda.ExternalStream
_STREAMS_CAP = 64


def _torch_stream(torch: Any, ordinal: int, handle: int) -> Any:
    """torch's wrapper of the CUDA stream ``handle`` on GPU ``ordinal`` (made once: creating one costs ~10 us).

    A wrapper owns nothing (torch never destroys an external stream), it only names the handle; if Tile destroys that
    stream and CUDA reuses the handle for a new one, the wrapper names the new stream, which is the one the caller
    means, since callers pass the handle of the stream they run on now."""
    key = (ordinal, handle)
    found = _STREAMS.get(key)
    if found is None:
        if len(_STREAMS) >= _STREAMS_CAP:
            _STREAMS.clear()
        found = _STREAMS[key] = torch.cuda.ExternalStream(handle, device=torch.device("cuda", ordinal))
    return found


_TORCH_DTYPES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "u8": "uint8",
    "i1": "bool",
}


def torch_dtype(torch: Any, name: str) -> Any:
    """The torch dtype of a Tile dtype name; `ArgumentError` for one torch's collectives do not carry."""
    found = _TORCH_DTYPES.get(name)
    if found is None:
        raise ArgumentError(
            f"collectives carry {', '.join(_TORCH_DTYPES)} tensors, not {name}: convert first (tile.from_numpy(...))"
        )
    return getattr(torch, found)
