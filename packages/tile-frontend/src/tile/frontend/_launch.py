"""`Launch`: the lazy ``tile.aio.DeviceOp`` a kernel call returns; it owns the moved arguments until done.

Invariants: by the time a `Launch` exists, every check has passed, the kernel is compiled for its specialization and
the arguments are moved into it; executing enqueues exactly one kernel launch (on the GPU stream, or as host work
running the interpreter) and hands back the tuple of all arguments, in signature order, only once that work is
done. Every storage it uses counts the launch as pending until then, so a ``free()`` on another handle waits. The
counts change under `OWNERSHIP`: a launch is made by `Kernel.__call__` holding it, and its release takes it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import tile.aio
from tile.aio import DeviceOp, ExecutionContext, SchedulingPolicy
from tile.compiler import CompiledKernel
from tile.frontend._errors import BackendError
from tile.frontend._execute import run_cpu
from tile.frontend._signature import explicit_grid
from tile.frontend._storage import OWNERSHIP

if TYPE_CHECKING:
    from tile.frontend._plan import Plan

__all__ = ["Launch"]


class Launch(DeviceOp[tuple[Any, ...]]):
    """One kernel launch, not yet executed: ``.sync()``, ``.sync_on(stream)``, ``await``, ``.graph()``.

    ``.compile()`` returns the compiled kernel (already compiled when the launch was made) without running it;
    ``.grid(g)`` checks ``g`` against the grid the outputs give (or sets it for output-free kernels).
    """

    __slots__ = ("_grid", "_kernel", "_plan", "_site", "_values")

    def __init__(self, kernel: str, plan: Plan, values: tuple[Any, ...], site: str) -> None:
        self._fate = None  # DeviceOp.__init__, inlined: this runs once per launch
        self._kernel, self._plan, self._site = kernel, plan, site
        self._values: tuple[Any, ...] | None = values
        self._grid = plan.grid
        # One pending count per handle argument (a storage passed twice counts twice, and is released twice).
        for i, inner in plan.held:
            (values[i]._tensor if inner else values[i])._storage.pending += 1
        for i in plan.shares:
            values[i].users += 1

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
        """Check ``grid`` against the outputs' grid; return this launch."""
        from tile.frontend._signature import _grid

        self._grid = _grid(self._kernel, self._plan.params, list(self._values or ()), explicit_grid(grid))
        return self

    def _describe(self) -> str:
        return f"the launch of {self._kernel} at {self._site}"

    def _execute(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        values = self._values
        assert values is not None, "a launch executes once, before it is released"
        plan = self._plan
        if plan.packing is None:
            compiled, grid = plan.compiled, self._grid
            named = {p.name: v for p, v in zip(self._plan.params, values, strict=False)}
            ctx.enqueue(lambda: run_cpu(compiled, grid, named))
            return values
        if ctx.device is tile.aio.HOST:
            raise BackendError(
                f"{self._describe()} uses GPU tensors but was executed on a host stream; use .sync() or a CUDA stream"
            )
        plan.enqueue(values, self._grid, ctx.stream)  # type: ignore[attr-defined]  # a CudaContext
        return values

    def _drop(self) -> None:
        with OWNERSHIP:  # completion may come on another thread than the launches and frees of these handles
            values, self._values = self._values, None
            if values is None:
                return
            plan = self._plan
            for i, inner in plan.held:
                storage = values[i]._tensor._storage if inner else values[i]._storage
                if storage.freed_at is None:
                    storage.pending -= 1
                else:
                    storage.release()  # may perform the deferred free
            for i in plan.shares:
                values[i].users -= 1

    # A launch never refuses a capture and has no children: skip the framework's generic steps (hot per launch).
    def _run_in(self, ctx: ExecutionContext) -> tuple[Any, ...]:
        return self._execute(ctx)

    def _release(self) -> None:
        self._drop()

    def __del__(self) -> None:
        # A launch dropped without ever running holds no device work: let deferred frees of its memory happen.
        if self._values is not None and self._fate is None:
            self._drop()

    # A launch runs on the device its tensors live on (a CPU launch on a host stream), whatever tile.aio's default
    # device is: there may be no GPU, or the default may point at another device.
    def _policy(self) -> SchedulingPolicy:
        return tile.aio.default_policy("host" if self.on_host else self._plan.device)

    def sync(self) -> tuple[Any, ...]:
        """Execute on a stream of the arguments' device, block until done, and return all arguments."""
        return self.sync_on(self._policy().next_context())

    def __await__(self) -> Generator[Any, None, tuple[Any, ...]]:
        return self.schedule(self._policy()).__await__()

    def graph(self, on: object = None) -> Any:
        """Capture this launch into a replayable graph (see ``tile.aio.DeviceOp.graph``)."""
        return super().graph(on if on is not None else self._policy().next_context())
