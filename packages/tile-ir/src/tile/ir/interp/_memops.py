"""Loads and stores through views and pointer tiles, pointer arithmetic, tokens, globals and scratch memory.

Memory ops run in program order, which is one of the orders the token graph allows; a token's runtime value is
its node in the launch's token graph (`_tokens`). Every access reports its addresses to the race detector and
the token check: weak accesses as plain reads/writes, ordered ones (relaxed/acquire/release) as atomic. The race
detector also sees their ordering and scope: an acquire load or a release store synchronises tile blocks (`_hb`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import PointerType, ScalarType, TileType

from ._compile import Compiler, Env, Signal, State, Step, StepFactory, attr, operand, operands
from ._dtypes import Array, poison_value, storage
from ._errors import InterpError, MemoryAccessError
from ._memory import Access, Region
from ._races import ATOMIC, READ, WRITE, Semantics
from ._shape import decode_dense

__all__ = ["HANDLERS", "Ordering", "recorder", "semantics"]


def semantics(op: Operation) -> Semantics:
    """The memory ordering and scope `op` declares."""
    scope = attr(op, "memory_scope")
    return Semantics(str(attr(op, "memory_ordering_semantics", "weak")), None if scope is None else str(scope))


def recorder(op: Operation, c: Compiler, kind: str) -> Access | None:
    """The callback told of every access of `kind` by `op`: the race detector's and the token check's."""
    sem, races, location = semantics(op), c.state.races, c.location(op)
    callbacks = [races.recorder(kind, location, sem)] if races is not None else []
    # Within a block every scope reaches, so any ordered access is atomic to the token check.
    token_check = c.state.tokens.recorder(ATOMIC if sem.ordering != "weak" else kind, location)
    callbacks += [token_check] if token_check is not None else []
    if len(callbacks) < 2:
        return callbacks[0] if callbacks else None
    first, second = callbacks

    def both(region: Region, addresses: Array, itemsize: int) -> None:
        first(region, addresses, itemsize)
        second(region, addresses, itemsize)

    return both


class Ordering:
    """The token operand and result of a memory op: each run becomes a node of the launch's token graph."""

    def __init__(self, op: Operation, c: Compiler) -> None:
        self.flow = c.state.tokens
        token = operand(op, "token")
        self.token_in = None if token is None else c.slot(token)
        self.token_out = next((c.slot(r) for r in op.results if not isinstance(r.type, TileType)), None)

    def begin(self, env: Env) -> None:
        """Start one run of the op: a node after the input token."""
        self.flow.current = self.flow.node(() if self.token_in is None else (env[self.token_in],))

    def end(self, env: Env) -> None:
        """Finish the run: the result token is the op's node."""
        if self.token_out is not None:
            env[self.token_out] = self.flow.current


def _view_addresses(view: Any, index: list[Any], promised: tuple[bool, ...]) -> tuple[Array, Array | None]:
    """The view's addresses and mask, checking the op's ``inbounds`` promises (undefined behaviour if broken)."""
    addresses, mask = view.addresses(index)
    if mask is not None and any(promised):
        broken = [a for a in view.overhanging(index) if a < len(promised) and promised[a]]
        if broken:
            raise MemoryAccessError(
                f"the op promises (inbounds) that index {broken[0]} keeps the tile inside the tensor, but the tile at "
                f"{[int(i) for i in index]} runs past it along that dim; drop the promise or fix the index"
            )
    return addresses, mask


def _load_view(op: Operation, c: Compiler) -> Step:
    view, idx = c.slot(operand(op, "view")), c.slots(operands(op, "index"))  # type: ignore[arg-type]  # required
    out, order = c.slot(op.results[0]), Ordering(op, c)
    memory, on_access = c.state.memory, recorder(op, c, READ)
    promised = tuple(bool(b) for b in attr(op, "inbounds", ()))

    def step(env: Env) -> Signal | None:
        order.begin(env)
        v = env[view]
        addresses, mask = _view_addresses(v, [env[i] for i in idx], promised)
        dtype = v.tensor.dtype
        if mask is None:
            env[out] = memory.read(addresses, dtype, on_access)
        else:
            tile = np.full(addresses.shape, v.padding).astype(dtype)
            tile[mask] = memory.read(addresses[mask], dtype, on_access)
            env[out] = tile
        order.end(env)
        return None

    return step


def _store_view(op: Operation, c: Compiler) -> Step:
    tile, view = c.slot(operand(op, "tile")), c.slot(operand(op, "view"))  # type: ignore[arg-type]  # required
    idx, order = c.slots(operands(op, "index")), Ordering(op, c)
    memory, on_access = c.state.memory, recorder(op, c, WRITE)
    promised = tuple(bool(b) for b in attr(op, "inbounds", ()))

    def step(env: Env) -> Signal | None:
        order.begin(env)
        v = env[view]
        addresses, mask = _view_addresses(v, [env[i] for i in idx], promised)
        values = np.broadcast_to(np.asarray(env[tile]).astype(v.tensor.dtype, copy=False), addresses.shape)
        if mask is None:
            memory.write(addresses, values, on_access)
        else:
            memory.write(addresses[mask], values[mask], on_access)
        order.end(env)
        return None

    return step


def _optional(op: Operation, c: Compiler, name: str) -> int | None:
    value = operand(op, name)
    return None if value is None else c.slot(value)


def _pointee(op: Operation, name: str) -> ScalarType:
    value = operand(op, name)
    t = value.type if value is not None else None
    if not isinstance(t, TileType) or not isinstance(t.element, PointerType):
        raise TypeError(f"'{op.name}' operand {name} is {t}, not a pointer tile")
    return t.element.pointee


def _load_ptr(op: Operation, c: Compiler) -> Step:
    src, mask, pad = c.slot(operand(op, "source")), _optional(op, c, "mask"), _optional(op, c, "paddingValue")  # type: ignore[arg-type]  # required
    out, order = c.slot(op.results[0]), Ordering(op, c)
    elem = _pointee(op, "source")
    dtype, poison = storage(elem), poison_value(elem)
    memory, on_access = c.state.memory, recorder(op, c, READ)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        addresses = np.asarray(env[src])
        if mask is None:
            env[out] = memory.read(addresses, dtype, on_access)
        else:
            m = np.broadcast_to(env[mask], addresses.shape)
            fill = env[pad] if pad is not None else poison
            tile = np.array(np.broadcast_to(np.asarray(fill).astype(dtype), addresses.shape))
            tile[m] = memory.read(addresses[m], dtype, on_access)
            env[out] = tile
        order.end(env)
        return None

    return step


def _store_ptr(op: Operation, c: Compiler) -> Step:
    dst, val = c.slot(operand(op, "destination")), c.slot(operand(op, "value"))  # type: ignore[arg-type]  # required
    mask, order = _optional(op, c, "mask"), Ordering(op, c)
    dtype = storage(_pointee(op, "destination"))
    memory, on_access = c.state.memory, recorder(op, c, WRITE)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        addresses = np.asarray(env[dst])
        values = np.broadcast_to(np.asarray(env[val]).astype(dtype, copy=False), addresses.shape)
        if mask is None:
            memory.write(addresses, values, on_access)
        else:
            m = np.broadcast_to(env[mask], addresses.shape)
            memory.write(addresses[m], values[m], on_access)
        order.end(env)
        return None

    return step


def _offset(op: Operation, c: Compiler) -> Step:
    ptr, off, out = c.slot(operand(op, "ptr")), c.slot(operand(op, "offset")), c.slot(op.results[0])  # type: ignore[arg-type]  # required
    size = storage(_pointee(op, "ptr")).itemsize

    def step(env: Env) -> Signal | None:
        env[out] = np.asarray(env[ptr], dtype=np.int64) + np.asarray(env[off]).astype(np.int64) * size
        return None

    return step


def _token(op: Operation, c: Compiler) -> Step:
    """make_token, join_tokens and the other pure ordering ops: a token node after all their input tokens."""
    ins, out, flow = c.slots(op.operands), c.slot(op.results[0]), c.state.tokens

    def step(env: Env) -> Signal | None:
        env[out] = flow.node([env[i] for i in ins])
        return None

    return step


def _get_global(op: Operation, c: Compiler) -> Step:
    name, out = attr(op, "name"), c.slot(op.results[0])
    c.template[out] = np.asarray(global_address(c.state, c, str(name)), dtype=np.int64)
    return _noop


def global_address(state: State, c: Compiler, name: str) -> int:
    """Map the module global `name` into memory (once per launch) and return its address."""
    if name not in state.globals:
        if c.module is None:
            raise InterpError(f"get_global @{name} needs the module: launch the Module, not a bare Function")
        glob = next((g for g in c.module.globals if g.name == name), None)
        if glob is None:
            raise InterpError(f"get_global @{name}: the module has no global of that name")
        data = np.array(decode_dense(glob.value))
        data.flags.writeable = not glob.constant
        state.globals[name] = state.memory.map(data, name=f"@{name}")
    return state.globals[name]


def _alloca(op: Operation, c: Compiler) -> Step:
    t = op.results[0].type
    assert isinstance(t, TileType)
    assert isinstance(t.element, PointerType)
    dtype, count, out = storage(t.element.pointee), int(attr(op, "num_elem")), c.slot(op.results[0])
    memory = c.state.memory

    def step(env: Env) -> Signal | None:
        env[out] = np.asarray(memory.map(np.zeros(count, dtype=dtype), name="alloca"), dtype=np.int64)
        return None

    return step


def _noop(env: Env) -> Signal | None:
    return None


def _tokens_only(op: Operation, c: Compiler) -> Step:
    return _token(op, c) if op.results else _noop


HANDLERS: dict[str, StepFactory] = {
    "load_view_tko": _load_view,
    "store_view_tko": _store_view,
    "multimem_load_reduce_view_tko": _load_view,
    "multimem_store_view_tko": _store_view,
    "load_ptr_tko": _load_ptr,
    "store_ptr_tko": _store_ptr,
    "offset": _offset,
    "make_token": _token,
    "join_tokens": _token,
    "memory_fence_alias_tko": _token,
    "gdc_launch_dependents_tko": _tokens_only,
    "gdc_wait_tko": _tokens_only,
    "get_global": _get_global,
    "alloca": _alloca,
}
