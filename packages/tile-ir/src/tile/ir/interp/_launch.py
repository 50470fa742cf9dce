"""Run a Tile IR kernel over a grid of tile blocks on the CPU.

`launch` binds the arguments (pointer parameters take numpy arrays, mapped into a `Memory`, or addresses
from `Memory.map`; scalar parameters take Python or numpy numbers), compiles the entry once, then runs the
blocks one after another in row-major order of (z, y, x) with x fastest, checking each block's token order,
and finally checks the launch for inter-block data races, taking release/acquire synchronisation between blocks
into account. Blocks never run concurrently here: a block may wait for an earlier block (a lock it released, a
flag it raised: that already happened), but a loop that waits for a later block never ends, and the loop guard
(`_control.MAX_LOOP_ITERATIONS` iterations) stops it with an `InterpError` saying so; such a kernel needs a device.
Everything else behaves as one of the schedules a device may pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from tile.ir._ir import Function, Module
from tile.ir._types import PointerType, ScalarType, TileType

from . import _arith, _atomics, _control, _convert, _memops, _reduce, _shape, _views
from ._compile import Compiler, State, StepFactory
from ._dtypes import storage
from ._errors import BlockId, InterpError
from ._memory import Memory
from ._races import RaceDetector
from ._tokens import TokenFlow

__all__ = ["SUPPORTED_OPS", "launch"]

_TABLE: dict[str, StepFactory] = {
    **_arith.HANDLERS,
    **_convert.HANDLERS,
    **_shape.HANDLERS,
    **_views.HANDLERS,
    **_memops.HANDLERS,
    **_atomics.HANDLERS,
    **_reduce.HANDLERS,
    **_control.HANDLERS,
}
SUPPORTED_OPS: frozenset[str] = frozenset(_TABLE)
"""Names of every op the interpreter can run."""

_MAX_GRID = (1 << 24) - 1
# Ops whose value is the same in every tile block when their operands are: views, pure arithmetic, constants.
_HOISTABLE = frozenset(
    {*_arith.HANDLERS, *_convert.HANDLERS, *_shape.HANDLERS, *_views.HANDLERS}
    | {"make_token", "join_tokens", "assume", "get_num_tile_blocks", "get_global"}
)


def launch(
    kernel: Module | Function,
    grid: int | Sequence[int],
    args: Sequence[Any],
    memory: Memory | None = None,
    *,
    function: str | None = None,
    check_races: bool = True,
    check_tokens: bool = True,
    stdout: TextIO | None = None,
) -> Memory:
    """Interpret one launch of an entry kernel over `grid`.

    Parameters
    ----------
    kernel
        A `tile.ir.Module` (its only entry, or the one named `function`) or a `tile.ir.Function`.
    grid
        Number of tile blocks per axis: an int or 1-3 ints (missing axes are 1).
    args
        One value per kernel parameter. Pointer parameters (``tile<ptr<T>>``) take a numpy array (its
        buffer is mapped, named ``arg<i>`` in errors unless it was mapped with a name before; the pointer
        addresses its first element) or an int address from `Memory.map`.
        Scalar parameters take a Python/numpy number that fits the parameter's type.
    memory
        The address space to use; a new one when omitted. Pass one to share mappings between launches.
    function
        Name of the entry to run when the module has several.
    check_races
        Record every access and raise `DataRaceError` if two blocks conflict on an element, at least one writing
        it, the two not both atomic at device/sys scope, and neither happening before the other through
        release/acquire synchronisation (default on).
    check_tokens
        Raise `TokenOrderError` if two memory ops of one block touch an element, one writes it, and no token
        chain orders them (default on).
    stdout
        Where ``print_tko`` writes (default `sys.stdout`).

    Returns
    -------
    Memory
        The memory the launch ran against (its regions alias the arrays passed in).

    Raises
    ------
    UnsupportedOpError
        The kernel uses an op without interpreter semantics (raised before any block runs).
    KernelAssertionError
        An ``assert`` failed; carries the block id and the op location.
    MemoryAccessError
        An access left every mapped buffer, or a tile index left its view's index space.
    TokenOrderError
        Two memory ops of one block conflicted on one element without a token chain ordering them.
    DataRaceError
        Two blocks conflicted on one element (after the launch; memory holds the result of this schedule).
    """
    fn, module = _entry(kernel, function)
    dims = _grid(grid)
    memory = memory if memory is not None else Memory()
    tokens = TokenFlow(memory, check_tokens)
    races = RaceDetector(memory, dims, tokens) if check_races else None
    state = State(memory, dims, races, tokens, stdout)
    compiler = Compiler(fn, module, state, _TABLE)
    body = compiler.block(fn.body, _HOISTABLE)
    params = _bind(fn, args, memory)
    template = list(compiler.template)
    with np.errstate(all="ignore"):
        compiler.prologue.arg_slots = body.arg_slots
        compiler.prologue.run(template, params)
        for linear, block in enumerate(_blocks(dims)):
            state.block, state.block_values = block, (np.int32(block[0]), np.int32(block[1]), np.int32(block[2]))
            if races is not None:
                races.begin_block(linear)
            tokens.begin_block(block)
            try:
                body.run(list(template))
            except InterpError as err:
                if err.block is None:
                    raise type(err)(err.message, block, err.location) from err
                raise
    if races is not None:
        races.check()
    return memory


def _entry(kernel: Module | Function, name: str | None) -> tuple[Function, Module | None]:
    if isinstance(kernel, Function):
        return kernel, None
    if not isinstance(kernel, Module):
        raise TypeError(f"launch takes a tile.ir Module or Function, got {type(kernel).__name__}")
    if name is not None:
        return kernel.function(name), kernel
    entries = [f for f in kernel.functions if f.entry]
    if len(entries) != 1:
        names = [f.name for f in entries]
        raise InterpError(f"the module has {len(entries)} entries {names}; pass function=<name> to pick one")
    return entries[0], kernel


def _grid(grid: int | Sequence[int]) -> BlockId:
    dims = [grid] if isinstance(grid, int) else list(grid)
    if not 1 <= len(dims) <= 3 or any(not isinstance(d, (int, np.integer)) or not 0 <= d <= _MAX_GRID for d in dims):
        raise InterpError(f"grid must be 1 to 3 ints in [0, {_MAX_GRID}], got {grid!r}")
    x, y, z = (*(int(d) for d in dims), 1, 1)[:3]
    return (x, y, z)


def _blocks(dims: BlockId) -> list[BlockId]:
    gx, gy, gz = dims
    return [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


def _bind(fn: Function, args: Sequence[Any], memory: Memory) -> list[Any]:
    params = fn.params
    if len(args) != len(params):
        raise InterpError(f"kernel @{fn.name} takes {len(params)} arguments, got {len(args)}")
    return [_bind_one(fn, i, p.type, a, memory) for i, (p, a) in enumerate(zip(params, args, strict=True))]


def _bind_one(fn: Function, i: int, t: Any, arg: Any, memory: Memory) -> Any:
    where = f"argument {i} of @{fn.name} ({t})"
    if not isinstance(t, TileType):
        raise InterpError(f"{where}: the interpreter can only pass tiles and pointers to a kernel")
    if isinstance(t.element, PointerType):
        if isinstance(arg, np.ndarray):
            return np.int64(memory.map(arg, name=None if memory.has(arg) else f"arg{i}"))
        if isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
            return np.int64(arg)
        raise InterpError(f"{where}: pass a numpy array or an address from Memory.map, got {type(arg).__name__}")
    assert isinstance(t.element, ScalarType)
    return _number(where, t, t.element, arg)


def _number(where: str, t: TileType, elem: ScalarType, arg: Any) -> Any:
    dtype = storage(elem)
    value = np.asarray(arg)
    if value.shape not in ((), t.shape):
        raise InterpError(f"{where}: expected shape {t.shape}, got {value.shape}")
    if elem.is_float:
        return value.astype(dtype)
    if value.dtype.kind not in "biu":
        raise InterpError(f"{where}: expected an integer, got {arg!r}")
    if elem.name != "i1":
        lo, hi = -(1 << (elem.bits - 1)), (1 << elem.bits) - 1
        if value.size and (int(value.min()) < lo or int(value.max()) > hi):
            raise InterpError(f"{where}: {arg!r} does not fit in {elem.bits} bits")
    return value.astype(np.int64).astype(dtype) if elem.name != "i1" else value.astype(bool)
