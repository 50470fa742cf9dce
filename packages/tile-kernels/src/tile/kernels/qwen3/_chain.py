"""`Chain`: one ``.then()`` chain built from steps that name the handles their launches hand on.

A step makes one op (a launch, or a `tk.matmul_op` pair) from the handles it takes by name and says where the op's
output tuple holds handles the later steps need (``{"x": 0}``). When the op is enqueued, the next step's function gets
that output and the chain files the named handles (in flight) before making the next op, so every kernel reads what
the previous ones wrote with no host wait in between. A handle taken as a partition is unpartitioned in flight (only
the launch the step returns can take it, ordered after the writer: ownership rule 11). Nothing runs until the chain's
op is synced, awaited or captured; `Chain.finish` files the last op's handles from what ``.sync()`` returned.

A chain made with ``pdl=True`` makes every step inside ``tile.kernels._source.launch_pdl(True)``: its library
launches are the programmatic-dependent-launch kernels (each waits at entry for the kernel before it, so it may
start early; results are the same). The flag is set around each step's own call, on whichever thread runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tile.aio import DeviceOp
from tile.frontend import Partition
from tile.kernels._source import launch_pdl

__all__ = ["Chain", "Step"]

Op = DeviceOp[tuple[Any, ...]]
Step = Callable[["Chain"], tuple[Op, dict[str, int]]]
"""``step(chain) -> (op, names)``: the op to run next and ``{name: index}`` of the handles in its output to keep."""


class Chain:
    """The handles of one chain by name (`take`), and its op (`build`); ``pdl``: its steps launch the PDL kernels."""

    def __init__(self, *, pdl: bool = False, **handles: Any) -> None:
        self.handles: dict[str, Any] = dict(handles)
        self._names: dict[str, int] = {}
        self.pdl = pdl

    def take(self, name: str) -> Any:
        """The handle named ``name`` for the op being made; a partition is unpartitioned (in flight in the chain)."""
        handle = self.handles[name]
        if isinstance(handle, Partition):
            handle = self.handles[name] = handle.unpartition()
        return handle

    def file(self, out: Sequence[Any]) -> None:
        """Keep the named handles of the previous op's output ``out``."""
        for name, index in self._names.items():
            self.handles[name] = out[index]

    def build(self, steps: Sequence[Step]) -> Op:
        """One op running ``steps`` in order, each enqueued after the previous with no wait."""
        first, self._names = self._make(steps[0])
        op = first
        for step in steps[1:]:
            op = op.then(self._then(step))
        return op

    def _then(self, step: Step) -> Callable[[tuple[Any, ...]], Op]:
        def fn(out: tuple[Any, ...]) -> Op:
            self.file(out)
            made, self._names = self._make(step)
            return made

        return fn

    def _make(self, step: Step) -> tuple[Op, dict[str, int]]:
        with launch_pdl(self.pdl):
            return step(self)

    def finish(self, out: Sequence[Any]) -> None:
        """File the last op's handles from what the chain's ``.sync()`` (or a graph's ``close()``) handed back."""
        self.file(out)
