"""`Launch`: the lazy ``tile.aio.DeviceOp`` a kernel call returns; it owns the moved arguments until done.

Invariants: by the time a `Launch` exists, every check has passed, the kernel is compiled for its specialization and
the arguments are moved into it; executing enqueues exactly one kernel launch (on the GPU stream, or as host work
running the interpreter) and hands back the tuple of all arguments, in signature order, only once that work is
done. Every storage it uses counts the launch as pending until then, so a ``free()`` on another handle waits. The
counts change under `OWNERSHIP`: a launch is made by `Kernel.__call__` holding it, and its release takes it.

In flight: a launch executed inside an op tree hands its handles on before its work is done (to a ``.then()`` or
``.map()`` function, or as a graph capture's output). It gives each moved handle the `InFlight` fate (its context,
``"captured"`` on a capture), so every use of that handle refuses with `InFlightError`, wherever the handle went
(a closure, a global, another thread); only a kernel call may take it. The launch so made records what it took and,
executed on another context, first waits for the producer's (stream order makes the same context safe; a captured
handle is refused outside its capture). The producer's release (its work is done; a graph's: ``close()``) makes the
handles live again. A launch run as the root of ``.sync()``/``await`` hands its output to nobody early and lends
nothing. What was checked stays fixed: ``.grid(g)`` only confirms the grid the checks used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import tile.aio
from tile.aio import DeviceOp, ExecutionContext, SchedulingPolicy
from tile.aio._context import BUILTIN_CONTEXTS, RECORDING_CONTEXTS, refuse_recorder
from tile.aio._lock import _state as _lock_state
from tile.aio._policy import as_context
from tile.aio._run import _executed_by, park
from tile.compiler import CompiledKernel
from tile.frontend import _accel
from tile.frontend._errors import (
    IN_FLIGHT,
    BackendError,
    DeviceMismatchError,
    GridError,
    InFlight,
    InFlightError,
    refuse_subclass,
)
from tile.frontend._execute import run_cpu
from tile.frontend._partition import Partition
from tile.frontend._placement import device_name
from tile.frontend._shared import HANDLES
from tile.frontend._signature import _pad, explicit_grid
from tile.frontend._site import user_site
from tile.frontend._storage import OWNED
from tile.frontend._tensor import _FIX, Tensor

if TYPE_CHECKING:
    from tile.frontend._plan import Plan

__all__ = ["Launch", "Taken", "require_builtin_context", "taken_in_flight"]

_SYNCED_ON, _SYNCED = _executed_by(".sync_on()"), _executed_by(".sync()")  # the fates' verbs, as `run_sync` makes them

Taken = InFlight | tuple[InFlight, ...]
"""The fates of the arguments a launch took while the launches that handed them on were not done: the one fate when
they all came from one launch (a launch chained in a ``.then()``: nothing to allocate), else a tuple of them."""


def require_builtin_context(op: Any, ctx: ExecutionContext) -> None:
    """Raise `BackendError` unless ``ctx`` is one of tile.aio's own contexts (its exact class): an op that moves
    handles (a launch, a collective, a graph write or read) hands its memory back when its context says the work is
    done, and a context written elsewhere (or a subclass of a builtin one) could say so while the work still runs."""
    if type(ctx) not in BUILTIN_CONTEXTS:
        raise BackendError(
            f"{op._describe()} was executed on {type(ctx).__name__}, a context tile.aio did not make: a launch "
            "hands its memory back when its context says the work is done, so it runs only on tile.aio's own "
            "contexts. Pass a tile.core.Stream (or a torch/cupy stream), a tile.aio.HostStream, or use .sync()"
        )


def _require_device(op: Any, device: object, ctx: ExecutionContext, values: Sequence[Any]) -> None:
    """Raise `DeviceMismatchError` for a launch with tensors on ``device`` executed on ``ctx``, a stream of another
    device: the frontend hands tile.core their addresses as checked numbers, so nothing below would see a kernel of
    another device given them (it would read or write another GPU's memory, unordered with that memory's frees). A
    launch of raw pointers and scalars only (an unchecked kernel) runs on the stream it is given, as before."""
    if any(isinstance(v, HANDLES) for v in values):
        raise DeviceMismatchError(
            f"{op._describe()} uses tensors on {device_name(device)} but was executed on {ctx!r} "
            f"({device_name(ctx.device)}): a kernel runs on its arguments' device; use .sync()/await (they pick a "
            "stream of that device) or pass a stream of that device"
        )


def taken_in_flight(args: Sequence[Any]) -> Taken | None:
    """The fates of the in-flight arguments among ``args`` (read before they are moved), or None."""
    found = tuple({a._fate: None for a in args if type(a) in (Tensor, Partition) and type(a._fate) is InFlight})
    return None if not found else found[0] if len(found) == 1 else found


class Launch(DeviceOp[tuple[Any, ...]]):
    """One kernel launch, not yet executed: ``.sync()``, ``.sync_on(stream)``, ``await``, ``.graph()``.

    ``.compile()`` returns the compiled kernel (already compiled when the launch was made) without running it;
    ``.grid(g)`` confirms that ``g`` is the grid the launch was checked with (give another grid up front).
    """

    __slots__ = ("_after", "_grid", "_kernel", "_lent", "_plan", "_site", "_values")

    def __init_subclass__(cls, _tile_internal: bool = False, **kwargs: Any) -> None:
        # Launches trust this class's methods (see FinalClassError); Tile's own GroupedLaunch is the one subclass.
        if not _tile_internal:
            raise refuse_subclass(cls)
        super().__init_subclass__(**kwargs)

    def __init__(self, kernel: str, plan: Plan, values: tuple[Any, ...], site: str, after: Taken | None = None) -> None:
        # The compiled path (`_fastlaunch.make_launch`) makes a launch without this method: keep both alike.
        self._fate = None  # DeviceOp.__init__, inlined: this runs once per launch
        self._kernel, self._plan, self._site = kernel, plan, site
        self._values: tuple[Any, ...] | None = values
        self._grid = plan.grid
        self._after = after  # arguments taken in flight: this launch runs after their launches (`_order_after`)
        self._lent: InFlight | None = None  # the fate this launch gave the handles it handed on early (`_lend`)
        # One pending count per handle argument (a storage passed twice counts twice, and is released twice).
        for i, inner in plan.held:
            (values[i]._tensor if inner else values[i])._storage.pending += 1
        for i in plan.shares:
            values[i]._users += 1

    @property
    def on_host(self) -> bool:
        """True when the launch runs on the CPU interpreter."""
        return self._plan.packing is None

    @property
    def launch_grid(self) -> tuple[int, int, int]:
        """The (x, y, z) grid of tile blocks."""
        return self._grid

    def compile(self) -> CompiledKernel:
        """The compiled kernel of this launch (cubin or bytecode, entry, ABI); runs nothing."""
        return self._plan.compiled

    def grid(self, grid: object) -> Launch:
        """Confirm that ``grid`` is this launch's grid; return this launch.

        Raises
        ------
        GridError
            For any other grid: the launch's index guards and bounds checks were made for its own grid, so a new
            one must be given up front, ``kernel.grid(g)(...)``, where the same checks run for it.
        """
        wanted = _pad(explicit_grid(grid))
        if wanted != self._grid:
            raise GridError(
                f"{self._describe()}: .grid({list(wanted)}) at {user_site()} comes after the launch was checked for "
                f"the grid {list(self._grid)} (index guards, bounds); give the grid up front, "
                f"{self._kernel}.grid({tuple(wanted)})(...), so it is checked"
            )
        return self

    def _describe(self) -> str:
        return f"the launch of {self._kernel} at {self._site}"

    def sync_on(self, stream: object) -> tuple[Any, ...]:
        """Execute on ``stream``, block until the work is done, and return the arguments (see ``DeviceOp.sync_on``)."""
        fast = _accel.sync
        if fast is not None and not _lock_state.held:  # compiled: the whole run in one step (`_fastlaunch.sync`)
            ctx = stream if type(stream) in BUILTIN_CONTEXTS else as_context(stream)
            if type(ctx) in RECORDING_CONTEXTS:  # refused before the claim, as `run_sync` does
                refuse_recorder(ctx, ".sync_on()")
            done: Any = fast(self, ctx, _SYNCED_ON, BUILTIN_CONTEXTS, tile.aio.HOST)
            if done is not NotImplemented:
                return done  # type: ignore[no-any-return]
        return DeviceOp.sync_on(self, stream)  # the generic run, which raises the typed errors

    def sync(self) -> tuple[Any, ...]:
        """Execute on this launch's device's policy, block until the work is done, and return the arguments."""
        fast = _accel.sync
        if fast is not None and not _lock_state.held:
            ctx = self._home_context()
            if type(ctx) in RECORDING_CONTEXTS:  # (a policy handing out a capture's recorder)
                refuse_recorder(ctx, ".sync()")
            done: Any = fast(self, ctx, _SYNCED, BUILTIN_CONTEXTS, tile.aio.HOST)
            if done is not NotImplemented:
                return done  # type: ignore[no-any-return]
        return DeviceOp.sync(self)

    def _park(self, ctx: ExecutionContext, output: Any, error: BaseException | None) -> None:
        """``tile.aio._run.park`` for the compiled ``sync`` (interrupted while it waited for the work): the launch
        keeps its handles and hands them back once the work is done, or at the next ``.sync()``."""
        park(self, ctx, output, error)

    def _run_root(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        """Enqueue the kernel on ``ctx`` as the root of a run: its output goes to nobody before the work is done."""
        return self._execute(ctx, False)

    def _execute(self, ctx: ExecutionContext, lend: bool = True) -> tuple[Any, ...]:
        """Enqueue the kernel on ``ctx`` (after the launches of arguments taken in flight); with ``lend``, hand the
        handles on in flight: whoever gets them before the work is done cannot use them."""
        fast = _accel.execute
        if fast is not None:  # compiled: a repeated GPU launch on this context; None: not handled, nothing done
            done: tuple[Any, ...] | None = fast(self, ctx, lend, BUILTIN_CONTEXTS, tile.aio.HOST)
            if done is not None:
                return done
        values = self._values
        assert values is not None, "a launch executes once, before it is released"
        require_builtin_context(self, ctx)
        plan = self._plan
        if plan.packing is not None and ctx.device is not plan.device and ctx.device is not tile.aio.HOST:
            _require_device(self, plan.device, ctx, values)
        after = self._after
        if after is not None and (type(after) is not InFlight or after.ctx is not ctx):
            self._order_after(ctx)  # not a launch chained on its lender's context (that one needs nothing)
        if plan.packing is None:
            compiled, grid = plan.compiled, self._grid
            named = {p.name: v for p, v in zip(self._plan.params, values, strict=False)}
            ctx.enqueue(lambda: run_cpu(compiled, grid, named))
        elif ctx.device is tile.aio.HOST:
            raise BackendError(
                f"{self._describe()} uses GPU tensors but was executed on a host stream; use .sync() or a CUDA stream"
            )
        else:
            plan.enqueue(values, self._grid, ctx.stream)  # type: ignore[attr-defined]  # a CudaContext
        if lend:
            fate = plan.lent
            if fate is None or fate.ctx is not ctx or fate.site is not self._site:
                fate = self._fate_on(ctx)
            for i in plan.moved:
                values[i]._fate = fate
            self._lent = fate
        return values

    def _claim_run(self, verb: str, site: Any, ctx: ExecutionContext, link: Any) -> tuple[Any, ...]:
        """A ``.then()`` step on this launch (``DeviceOp._claim_run``): compiled, the claim (its fate kept on the plan
        for the next link of the chain), the link's hold and the execution in one step (`_fastlaunch.claim_run`)."""
        fast = _accel.claim_run
        if fast is not None:
            done: Any = fast(self, verb, site, ctx, BUILTIN_CONTEXTS, tile.aio.HOST, link)
            if done is not NotImplemented:
                return done  # type: ignore[no-any-return]
        return DeviceOp._claim_run(self, verb, site, ctx, link)  # the generic claim raises the typed error

    def _hand_off(self) -> tuple[DeviceOp[Any], ...]:
        """Hand back (`_drop`); a launch has no children (the release of a chain calls this per launch)."""
        fast = _accel.drop
        if fast is not None and type(self) is Launch:  # `_drop`'s compiled step, without its Python call
            fast(self)
        else:
            self._drop()
        return ()

    def _fate_on(self, ctx: ExecutionContext) -> InFlight:
        """The `InFlight` fate of handles this launch hands on early on ``ctx`` (kept on the plan for the next launch
        of this call site, except a capture's: the plan must not keep a recorder and its recorded work alive)."""
        if ctx.capturing:
            return InFlight.make("captured", f"captured into a graph by {self._describe()}", ctx, self._site)
        fate = InFlight.make(IN_FLIGHT, f"handed on by {self._describe()} before its work was done", ctx, self._site)
        self._plan.lent = fate
        return fate

    def _order_after(self, ctx: ExecutionContext) -> None:
        """Make ``ctx`` wait for the launches whose handles this one took before they were done; refuse a graph's.

        On their own context stream order suffices; elsewhere a completion recorded there now covers them (they
        were enqueued before they handed the handles on). A captured handle belongs to its graph, whose replays
        no wait can order against: only a launch recorded into the same capture may take it.
        """
        after = self._after
        fates: tuple[InFlight, ...] = (after,) if isinstance(after, InFlight) else after or ()
        waited: list[ExecutionContext] = []
        for fate in fates:
            producer = fate.ctx
            if producer is ctx:
                continue
            if fate[0] is not IN_FLIGHT:
                what = ", ".join(sorted({v._describe() for v in self._values or () if hasattr(v, "_describe")}))
                raise InFlightError(f"{what} (arguments of {self._describe()})", fate[1], _FIX["captured"])
            if producer == ctx or producer in waited:
                continue
            ctx.wait(producer._observe())
            waited.append(producer)

    def _drop(self) -> None:
        fast = _accel.drop
        if fast is not None and type(self) is Launch:  # the same step, compiled (holding OWNERSHIP, collector paused)
            fast(self)
            return
        with OWNED:  # completion may come on another thread than the launches and frees of these handles
            values, self._values = self._values, None
            if values is None:
                return
            plan = self._plan
            lent, self._lent = self._lent, None
            if lent is not None:  # the work is done: what it handed on early is live (unless moved on since)
                for i in plan.moved:
                    if values[i]._fate is lent:
                        values[i]._fate = None
            for i, inner in plan.held:
                storage = values[i]._tensor._storage if inner else values[i]._storage
                if storage.freed_at is None:
                    storage.pending -= 1
                else:
                    storage.release()  # may perform the deferred free
            for i in plan.shares:
                values[i]._users -= 1

    # A launch never refuses a capture and has no children: skip the framework's generic steps (hot per launch). The
    # aliases spare a Python call per launch (the framework's `_run_in` and `_release` would only forward).
    _run_in = _execute
    _release = _drop

    def __del__(self) -> None:
        # A launch dropped without ever running holds no device work: let deferred frees of its memory happen. That
        # is one never claimed, or one moved into another op (.then(), .map(), zip()...) that was dropped unrun: every
        # execution but a run's root lends (`_lent`), and a root is claimed by its run, not moved.
        if self._values is not None and (
            (fate := self._fate) is None or (self._lent is None and fate[0].startswith("moved into"))
        ):
            self._drop()

    def _home(self) -> SchedulingPolicy:
        """A stream of the device its tensors live on (a host stream for a CPU launch), whatever tile.aio's default
        device is: ``.sync()``, ``await`` and ``.graph()`` run there, and so does a ``.then()`` chain starting here."""
        return tile.aio.default_policy("host" if self.on_host else self._plan.device)
