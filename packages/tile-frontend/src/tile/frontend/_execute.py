"""Running one compiled launch: the interpreter for host launches, tile.core's prepared launch for the GPU.

Invariants: the kernel parameter list is exactly ``CompiledKernel.abi.slots`` in order (tile-compiler's
INTERFACES.md "Entry ABI"): per tensor a base address, extents and element strides of the index dtype; per
scalar its value; per raw pointer its address (`_plan` packs GPU launches). The GPU path launches the cubin with
block (1, 1, 1) on the op's stream with plain addresses: every allocation is complete before its tensor exists
(`_device`), and a buffer is freed only after every launch holding it was released, that is after its work
completed (``Storage.pending``), so no cross-stream ordering is needed, also not inside a graph capture. The CPU
path maps each host storage into one interpreter `Memory` and runs the Tile IR read back from the kernel's bytecode.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tile.compiler import AbiSlot, CompiledKernel
from tile.frontend._errors import ArgumentError, as_kernel_fault
from tile.frontend._shared import HANDLES, tensor_of
from tile.frontend._storage import Storage
from tile.frontend._tensor import Tensor

__all__ = ["GPU_KIND", "prepared_launch", "run_cpu"]

# The tile.core kind each entry-ABI scalar dtype is packed as: one of the parameter's size in the cubin (tileiras
# gives an i8 or i16 parameter 1 or 2 bytes; the compiler passes a bool as i32) that takes the dtype's whole range
# (the scalar check passes all of it).
GPU_KIND = {"i1": "i32", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64"}
GPU_KIND |= {"u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64"}
GPU_KIND |= {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}
_modules: dict[tuple[str, int], Any] = {}
_modules_lock = threading.Lock()
_programs: dict[str, Any] = {}
_prepared: dict[tuple[Any, ...], Any] = {}
_PREPARED_CAP = 64  # each entry keeps its stream alive until evicted: keep the cache small


def _scalar(slot: AbiSlot, t: Tensor) -> int:
    if slot.role == "shape":
        return t.shape[slot.axis]
    if slot.role == "stride":
        return t.strides[slot.axis]
    raise ArgumentError(
        f"unknown ABI slot role {slot.role!r} for '{slot.param}': tile-frontend and tile-compiler disagree"
    )


def _program(compiled: CompiledKernel) -> Any:
    """The kernel's Tile IR module, read back from its bytecode once."""
    program = _programs.get(compiled.key)
    if program is None:
        import tile.ir

        program = _programs[compiled.key] = tile.ir.read_bytecode(compiled.bytecode)
    return program


class _HostSpace:
    """The interpreter's view of host memory: real address ranges that overlap (aliasing foreign borrows, which
    only unchecked kernels may pass) are mapped as one region, so its race detector sees the aliasing too."""

    def __init__(self, memory: Any, storages: list[Storage]) -> None:
        self.memory = memory
        self.spans: list[tuple[int, int, Any]] = []  # (real lo, real hi, a uint8 array over them)
        for s in sorted((s for s in storages if s.host is not None), key=lambda s: s.address):
            if self.spans and s.address < self.spans[-1][1]:
                lo, hi = self.spans[-1][0], max(self.spans[-1][1], s.address + s.nbytes)
                self.spans[-1] = (lo, hi, np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(lo)))
            else:
                self.spans.append((s.address, s.address + s.nbytes, s.host))

    def address(self, real: int, name: str | None = None) -> int:
        """The interpreter address of the real host address ``real``."""
        for lo, hi, raw in self.spans:
            if lo <= real < hi:
                return int(self.memory.map(raw, name=name)) + real - lo
        raise ArgumentError(f"raw pointer 0x{real:x} is not inside any host tensor passed to this launch")


def run_cpu(compiled: CompiledKernel, grid: Sequence[int], values: Mapping[str, Any]) -> None:
    """Interpret one launch over ``grid`` against the tensors' host memory."""
    from tile.ir import interp

    space = _HostSpace(interp.Memory(), _host_storages(values.values()))
    args: list[Any] = []
    for slot in compiled.abi.slots:
        value = values[slot.param]
        if slot.role == "base":
            args.append(space.address(tensor_of(value)._address(), name=slot.param))
        elif slot.role in ("shape", "stride"):
            args.append(_scalar(slot, tensor_of(value)))
        elif slot.role == "pointer":
            args.append(space.address(int(value)))
        else:
            args.append(value)
    try:
        interp.launch(_program(compiled), tuple(grid), args, space.memory)
    except interp.InterpError as exc:
        raise as_kernel_fault(exc) from None


def _host_storages(values: Any) -> list[Storage]:
    """The storages of the launch's tensors, and for raw pointers every live host storage (they may point anywhere)."""
    from tile.frontend._storage import _ALL

    values = list(values)
    if any(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return [s for s in list(_ALL) if s.host is not None]
    return list({id(s): s for s in (tensor_of(v)._storage for v in values if isinstance(v, HANDLES))}.values())


def _function(compiled: CompiledKernel, device: Any) -> Any:
    key = (compiled.key, int(device.ordinal))
    fn = _modules.get(key)
    if fn is None:
        from tile import core

        with _modules_lock:
            if (fn := _modules.get(key)) is None:
                assert compiled.cubin is not None
                module = core.Module.from_cubin(compiled.cubin, device=device, name=compiled.name)
                fn = _modules[key] = module.function(compiled.entry)
    return fn


def prepared_launch(
    compiled: CompiledKernel, grid: tuple[int, ...], args: tuple[Any, ...], kinds: tuple[str, ...], stream: Any
) -> Any:
    """tile.core's checked `PreparedLaunch` of the cubin with packed arguments, reused for a repeated (function, grid,
    stream, arguments): the arguments are plain numbers and addresses, so an identical launch needs no new packing
    or checks (tile.core re-validates a prepared launch after any free or stream close). The cache holds at most
    ``_PREPARED_CAP`` launches, and so delays the collection of at most that many streams."""
    fn = _function(compiled, stream.device)
    key = (fn, grid, stream, args)
    prepared = _prepared.get(key)
    if prepared is None:
        from tile import core

        # The addresses come from handles the launch has checked (liveness, bounds, ownership): the frontend's own
        # opt-out of tile.core's address check, never the user's.
        # A kernel whose ABI says it waits for the grids before it (compiled with pdl) may start before they end.
        pdl = compiled.abi.waits_prior_grid
        prepared = core.prepare(fn, grid, (1, 1, 1), args, stream=stream, signature=kinds, unchecked=True, pdl=pdl)
        if len(_prepared) >= _PREPARED_CAP:  # launches with ever-new addresses must not grow it without bound
            _prepared.clear()
        _prepared[key] = prepared
    return prepared
