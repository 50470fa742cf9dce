"""Launch plans: what a kernel call with a known argument layout needs, computed once and reused per launch.

A call's checks (kinds, dtypes, ranks, static extents, generic inference, the grid, devices) and its compiled kernel
depend only on the argument *layout*: each handle's class, dtype, extents, strides, base alignment class and device
(``Tensor._layout``, fixed per handle), which arguments are the same object, the scalar classes, the ``Const`` values
and the keyword generics. `layout_key` builds that key cheaply (no `Specialization`, no compiler call); a `Plan`
stored under it holds the compiled kernel, the grid and the entry-ABI packing with extents and strides resolved.

Invariants: a plan is stored only after the full checks of a call passed, so a hit proves every static check again.
`layout_key` (handle states: moved, freed) and `Plan.try_launch` (scalar values, byte-range aliasing between the
arguments and with every other live handle) re-check everything that can change between calls with the same layout,
and on any anomaly return None, so the caller runs the full path, which raises the precise error. The fast path
therefore accepts exactly the calls the full path accepts and never raises an ownership error itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tile.compiler import CompiledKernel
from tile.frontend._partition import Partition
from tile.frontend._shared import Shared
from tile.frontend._signature import Param
from tile.frontend._storage import overlapping
from tile.frontend._tensor import Tensor

__all__ = ["Packing", "Plan", "layout_key", "pack"]

_HANDLE_CLASSES = (Tensor, Partition, Shared)
_INT_KINDS = frozenset({"i1", "i8", "i16", "i32", "u32", "i64", "u64"})
Slot = tuple[int, int, int]  # (kernel-argument position, mode, call-argument index): see `pack`
Packing = tuple[tuple[Any, ...], tuple[Slot, ...], tuple[str, ...]]  # (constants template, slots to fill, kinds)
_BASE, _INT, _RAW = 1, 2, 3


def layout_key(
    params: Sequence[Param], args: Sequence[Any], generics: dict[str, Any], grid: object, tensors: list[Tensor]
) -> Any:
    """The layout of a call (see the module docstring), or None when the call has no handle, too many arguments or a
    handle that is not live (moved, freed: the full path raises the precise error). Appends each handle's tensor to
    ``tensors``, in argument order.

    Trailing ``Const`` parameters given as keywords are in ``generics``, so fewer arguments than parameters is fine.
    """
    if len(args) > len(params):
        return None
    parts: list[Any] = [grid, tuple(generics.items()) if generics else ()]
    seen: dict[int, int] = {}
    for i, (p, a) in enumerate(zip(params, args, strict=False)):
        cls = a.__class__
        if cls is Tensor:
            t, tile_shape = a, None
        elif cls is Partition or cls is Shared:
            t = a._tensor
            tile_shape = a.tile_shape if cls is Partition else None
            if a._fate is not None:
                return None
        elif p.kind == "const":
            parts.append((cls, a))
            continue
        else:
            parts.append(cls)
            continue
        if t._fate is not None or t._storage.freed_at is not None:
            return None
        parts.append((cls, t._layout, tile_shape, seen.setdefault(id(a), i)))
        tensors.append(t)
    return tuple(parts) if tensors else None


class Plan:
    """A checked call layout: the compiled kernel, grid, device and how to pack the entry ABI."""

    __slots__ = (
        "compiled",
        "device",
        "distinct",
        "grid",
        "handles",
        "outputs",
        "packing",
        "scalars",
        "tail",
    )

    def __init__(
        self,
        compiled: CompiledKernel,
        params: Sequence[Param],
        args: Sequence[Any],
        *,
        given: int,
        grid: tuple[int, int, int],
        device: object,
    ) -> None:
        self.compiled, self.grid, self.device = compiled, grid, device
        self.tail = tuple(args[given:])  # trailing Const values that were passed as keywords
        self.handles = tuple(i for i, a in enumerate(args) if isinstance(a, _HANDLE_CLASSES))
        # No handle passed twice (the key fixes the identity pattern): each can be handed over without a lookup.
        self.distinct = len({id(args[i]) for i in self.handles}) == len(self.handles)
        self.outputs = tuple(i for i in self.handles if isinstance(args[i], Partition))
        self.scalars = tuple((i, p) for i, p in enumerate(params) if p.kind in ("scalar", "ptr"))
        self.packing = _packing(compiled, params, args)

    def try_launch(
        self, args: Sequence[Any], tensors: list[Tensor], check: Callable[[Param, Any], None], unchecked: bool
    ) -> Sequence[Any] | None:
        """Re-check what may differ from the call that made the plan (``layout_key`` already found every handle live
        and collected their ``tensors``); return all the call's values (keyword ``Const`` values appended), or None
        when the full path must run."""
        try:
            for i, p in self.scalars:
                check(p, args[i])
        except Exception:  # the full path reports it, in argument order
            return None
        if not unchecked and self.outputs and _aliased(self, args, tuple(tensors)):
            return None
        return (*args, *self.tail) if self.tail else args


def _aliased(plan: Plan, args: Sequence[Any], tensors: tuple[Tensor, ...]) -> bool:
    """True when an output overlaps another argument or any live handle outside the launch."""
    for o in plan.outputs:
        t = args[o]._tensor
        lo, hi = t._range
        for j, other in zip(plan.handles, tensors, strict=True):
            if j != o:
                a, b = other._range
                if a < hi and lo < b:
                    return True
        if overlapping(t._storage, lo, hi, exclude=tensors):
            return True
    return False


def _packing(compiled: CompiledKernel, params: Sequence[Param], args: Sequence[Any]) -> Packing | None:
    """The GPU entry-ABI packing with extents and strides resolved (fixed by the layout); None on the host."""
    if compiled.target.arch == "cpu":
        return None
    from tile.frontend._execute import GPU_KIND

    index = {p.name: i for i, p in enumerate(params)}
    template: list[Any] = []
    slots: list[Slot] = []
    kinds: list[str] = []
    for pos, slot in enumerate(compiled.abi.slots):
        i = index[slot.param]
        a = args[i]
        template.append(None)
        if slot.role == "base":
            slots.append((pos, _BASE, i))
            kinds.append("ptr")
        elif slot.role in ("shape", "stride"):
            t = a if isinstance(a, Tensor) else a._tensor
            template[pos] = (t.shape if slot.role == "shape" else t.strides)[slot.axis]
            kinds.append(GPU_KIND[slot.dtype])
        elif slot.role == "pointer":
            slots.append((pos, _INT, i))
            kinds.append("ptr")
        else:
            slots.append((pos, _INT if slot.dtype in _INT_KINDS else _RAW, i))
            kinds.append(GPU_KIND.get(slot.dtype, slot.dtype))
    return tuple(template), tuple(slots), tuple(kinds)


def pack(template: tuple[Any, ...], slots: Sequence[Slot], values: Sequence[Any]) -> tuple[Any, ...]:
    """The kernel arguments of one launch: the layout's constants with the handles' base addresses and the scalar
    values filled in."""
    out = list(template)
    for pos, mode, i in slots:
        v = values[i]
        if mode == _BASE:
            out[pos] = (v if v.__class__ is Tensor else v._tensor)._range[0]
        elif mode == _INT:
            out[pos] = int(v)
        else:
            out[pos] = v
    return tuple(out)
