"""Atomic read-modify-write, compare-and-swap and view reductions.

Each element is one atomic transaction; within one op the elements apply in row-major order, so an address
that appears several times in a pointer tile is updated once per appearance and each appearance returns the
value it found (that order is one the device may pick). Masked-out elements do not touch memory: a CAS returns
its ``cmp`` there, an RMW the poison value. Atomics of different blocks at device or sys scope never race with
each other; against a plain access of another block they do unless one happens before the other (see `_races`),
which an acquire or release atomic can establish: each op tells `_hb` which elements it read and which it wrote
(a CAS that failed wrote nothing). The 13.5 multimem (NVLink multicast) ops run as on a
multicast group with one member: a load-reduce is a load, a reduce is an atomic reduction, a store a store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tile.ir._ir import Operation
from tile.ir._types import PointerType, ScalarType, TileType

from ._compile import Compiler, Env, Signal, Step, StepFactory, attr, operand, operands
from ._dtypes import Array, from_wide, poison_value, storage, unsigned_view
from ._memops import Ordering, recorder, semantics
from ._memory import Access, Memory
from ._races import ATOMIC

__all__ = ["HANDLERS"]

Combine = Callable[[Array, Array], Array]


def _mode(mode: str, elem: ScalarType) -> Combine:
    """The update ``new = f(old, arg)`` of an RMW mode on element type `elem`."""
    if mode == "addf":
        return lambda old, arg: from_wide(np.asarray(old, np.float64) + np.asarray(arg, np.float64), elem)
    if mode in ("umax", "umin"):
        pick = np.maximum if mode == "umax" else np.minimum
        return lambda old, arg: pick(unsigned_view(old, elem), unsigned_view(arg, elem)).view(storage(elem))
    table: dict[str, Combine] = {
        "add": np.add, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
        "max": np.maximum, "min": np.minimum, "xchg": lambda old, arg: arg,
    }  # fmt: skip
    fn = table[mode]
    return lambda old, arg: np.asarray(fn(old, arg)).astype(storage(elem))


def _apply(
    memory: Memory,
    addresses: Array,
    update: Callable[[Array, Array], Array],
    dtype: np.dtype[Any],
    on_access: Access | None,
) -> Array:
    """Run ``new = update(old, positions)`` atomically per element; return the old values (flat, row-major).

    `positions` are the flat indices of the updated elements, so `update` can pick their operands. Elements that
    share an address apply in row-major order: round k updates the k-th occurrence of every address at once.
    """
    flat = addresses.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    rank = np.empty(flat.size, dtype=np.int64)
    rank[order] = np.arange(flat.size) - np.maximum.accumulate(np.where(starts, np.arange(flat.size), 0))
    olds = np.empty(flat.shape, dtype=dtype)
    for k in range(int(rank.max(initial=-1)) + 1):
        pos = np.flatnonzero(rank == k)
        old = memory.read(flat[pos], dtype, on_access)
        memory.write(flat[pos], update(old, pos), None)
        olds[pos] = old
    return olds


Sync = Callable[[Array, Array], None]
"""Tells the happens-before tracker of an atomic's run: ``(flat addresses, whether each element was written)``."""


def _sync(op: Operation, c: Compiler) -> Sync | None:
    """The release/acquire hook of an atomic op, or None when it synchronises nothing (relaxed, tl_blk, no check)."""
    sem, races = semantics(op), c.state.races
    if races is None or not (sem.acquires or sem.releases):
        return None
    hb, acquire, release = races.hb, sem.acquires, sem.releases

    def sync(addresses: Array, wrote: Array) -> None:
        hb.rmw(addresses, wrote, acquire, release)

    return sync


def _pointee(op: Operation) -> ScalarType:
    t = op.operands[0].type
    assert isinstance(t, TileType)
    assert isinstance(t.element, PointerType)
    return t.element.pointee


def _rmw_like(op: Operation, c: Compiler, cas: bool) -> Step:
    ptrs = c.slot(operand(op, "pointers"))  # type: ignore[arg-type]  # required operand
    args = [c.slot(v) for v in (operand(op, n) for n in (("cmp", "val") if cas else ("arg",))) if v is not None]
    mask_value = operand(op, "mask")
    mask = None if mask_value is None else c.slot(mask_value)
    out, order = c.slot(op.results[0]), Ordering(op, c)
    elem = _pointee(op)
    dtype, memory, on_access = storage(elem), c.state.memory, recorder(op, c, ATOMIC)
    bits = np.dtype(f"u{dtype.itemsize}")
    combine = None if cas else _mode(attr(op, "mode"), elem)
    sync = _sync(op, c)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        addresses = np.asarray(env[ptrs])
        vals = [np.broadcast_to(np.asarray(env[s]).astype(dtype, copy=False), addresses.shape) for s in args]
        m = np.ones(addresses.shape, bool) if mask is None else np.broadcast_to(env[mask], addresses.shape)
        picked = [v[m] for v in vals]
        if combine is None:
            cmp, swap = picked

            def update(old: Array, pos: Array) -> Array:
                return np.where(old.view(bits) == cmp[pos].view(bits), swap[pos], old)

            result = np.array(vals[0])
        else:
            (arg,) = picked

            def update(old: Array, pos: Array) -> Array:
                return combine(old, arg[pos])

            result = np.full(addresses.shape, poison_value(elem)).astype(dtype)
        olds = _apply(memory, addresses[m], update, dtype, on_access)
        result[m] = olds
        env[out] = result
        if sync is not None:
            wrote = np.ones(olds.size, bool) if combine is not None else olds.view(bits) == picked[0].view(bits)
            sync(addresses[m].reshape(-1), wrote.reshape(-1))
        order.end(env)
        return None

    return step


def _red_view(op: Operation, c: Compiler) -> Step:
    view, idx = c.slot(operand(op, "view")), c.slots(operands(op, "index"))  # type: ignore[arg-type]  # required
    value, order = c.slot(operand(op, "value")), Ordering(op, c)  # type: ignore[arg-type]  # required
    vt = operand(op, "value").type  # type: ignore[union-attr]  # required operand
    assert isinstance(vt, TileType)
    assert isinstance(vt.element, ScalarType)
    elem = vt.element
    update, memory, on_access = _mode(attr(op, "mode"), elem), c.state.memory, recorder(op, c, ATOMIC)
    sync = _sync(op, c)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        v = env[view]
        addresses, mask = v.addresses([env[i] for i in idx])
        vals = np.broadcast_to(np.asarray(env[value]), addresses.shape)
        if mask is not None:
            addresses, vals = addresses[mask], vals[mask]
        _apply(memory, addresses, lambda old, pos: update(old, vals.reshape(-1)[pos]), storage(elem), on_access)
        if sync is not None:
            sync(addresses.reshape(-1), np.ones(addresses.size, bool))
        order.end(env)
        return None

    return step


def _multimem_reduce(op: Operation, c: Compiler) -> Step:
    """``multimem_reduce_view_tko`` on a one-member multicast group: an atomic reduction into the view."""
    view, idx = c.slot(operand(op, "view")), c.slots(operands(op, "index"))  # type: ignore[arg-type]  # required
    value, order = c.slot(operand(op, "tile")), Ordering(op, c)  # type: ignore[arg-type]  # required
    vt = op.operands[1].type
    assert isinstance(vt, TileType)
    assert isinstance(vt.element, ScalarType)
    elem = vt.element
    kind = str(attr(op, "reduction"))
    mode = "addf" if kind == "add" and elem.is_float else kind
    update, memory, on_access = _mode(mode, elem), c.state.memory, recorder(op, c, ATOMIC)
    sync = _sync(op, c)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        addresses, mask = env[view].addresses([env[i] for i in idx])
        vals = np.broadcast_to(np.asarray(env[value]), addresses.shape)
        if mask is not None:
            addresses, vals = addresses[mask], vals[mask]
        flat = vals.reshape(-1)
        _apply(memory, addresses, lambda old, pos: update(old, flat[pos]), storage(elem), on_access)
        if sync is not None:
            sync(addresses.reshape(-1), np.ones(addresses.size, bool))
        order.end(env)
        return None

    return step


HANDLERS: dict[str, StepFactory] = {
    "atomic_rmw_tko": lambda op, c: _rmw_like(op, c, cas=False),
    "atomic_cas_tko": lambda op, c: _rmw_like(op, c, cas=True),
    "atomic_red_view_tko": _red_view,
    "multimem_reduce_view_tko": _multimem_reduce,
}
