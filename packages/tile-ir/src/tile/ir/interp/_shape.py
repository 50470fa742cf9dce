"""Constants and shape manipulation: constant, iota, reshape, broadcast, permute, cat, extract, insert.

Tiles are immutable values, so shape ops return numpy views where they can (a splat constant is a
broadcast view of one element, reshape/permute/broadcast are views); no step ever writes into an operand.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tile.ir._attrs import DenseElementsAttr
from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType

from ._arith import element_of
from ._compile import Compiler, Env, Signal, Step, StepFactory, attr, operand, operands
from ._dtypes import Array, storage

__all__ = ["HANDLERS", "decode_dense"]


def decode_dense(value: DenseElementsAttr) -> Array:
    """Return the tile a dense-elements constant holds (a splat is a read-only broadcast view)."""
    t = value.type
    elem = t.element
    if not isinstance(elem, ScalarType):
        raise TypeError(f"constant of non-number element type {elem}")
    raw = np.frombuffer(value.data, dtype=np.uint8)
    count = int(np.prod(t.shape, dtype=np.int64))
    if elem.bits == 1:  # bit-packed, LSB first; a splat is one byte of all zeros or all ones (as in MLIR)
        splat = raw.size == 1 and int(raw[0]) in (0x00, 0xFF)
        flat = raw != 0 if splat else np.unpackbits(raw, bitorder="little")[:count].astype(bool)
    elif elem.name == "tf32":
        b = raw.reshape(-1, 3).astype(np.uint32)
        flat = ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 13).view(np.float32)
    elif elem.bits == 4:
        nibbles = (raw & 0xF).astype(np.int8)
        if elem.name == "i4":
            flat = np.where(nibbles >= 8, nibbles - 16, nibbles).astype(ml_dtypes.int4)
        else:
            flat = nibbles.astype(np.uint8).view(ml_dtypes.float4_e2m1fn)
    else:
        flat = np.frombuffer(value.data, dtype=storage(elem))
    flat = np.asarray(flat).reshape(-1)
    if flat.size == 1:
        return np.broadcast_to(flat.reshape(()), t.shape)
    return flat.reshape(t.shape)


def _constant(op: Operation, c: Compiler) -> Step:
    value = attr(op, "value")
    c.template[c.slot(op.results[0])] = decode_dense(value)
    return _nothing


def _nothing(env: Env) -> Signal | None:
    return None


def _result_shape(op: Operation) -> tuple[int, ...]:
    t = op.results[0].type
    assert isinstance(t, TileType)
    return t.shape


def _iota(op: Operation, c: Compiler) -> Step:
    (n,) = _result_shape(op)
    c.template[c.slot(op.results[0])] = np.arange(n).astype(storage(element_of(op)))
    return _nothing


def _unary(op: Operation, c: Compiler, fn: Any) -> Step:
    src, out = c.slot(op.operands[0]), c.slot(op.results[0])

    def step(env: Env) -> Signal | None:
        env[out] = fn(env[src])
        return None

    return step


def _reshape(op: Operation, c: Compiler) -> Step:
    shape = _result_shape(op)
    return _unary(op, c, lambda x: np.reshape(x, shape))


def _broadcast(op: Operation, c: Compiler) -> Step:
    shape = _result_shape(op)
    return _unary(op, c, lambda x: np.broadcast_to(x, shape))


def _permute(op: Operation, c: Compiler) -> Step:
    perm = tuple(attr(op, "permutation"))
    return _unary(op, c, lambda x: np.transpose(x, perm))


def _cat(op: Operation, c: Compiler) -> Step:
    a, b = c.slots(op.operands)
    out, dim = c.slot(op.results[0]), int(attr(op, "dim"))

    def step(env: Env) -> Signal | None:
        env[out] = np.concatenate([env[a], env[b]], axis=dim)
        return None

    return step


def _slices(piece: tuple[int, ...], env: Env, slots: list[int]) -> tuple[slice, ...]:
    starts = [int(env[s]) * n for s, n in zip(slots, piece, strict=False)]
    return tuple(slice(s, s + n) for s, n in zip(starts, piece, strict=False))


def _extract(op: Operation, c: Compiler) -> Step:
    src, out = c.slot(operand(op, "source")), c.slot(op.results[0])  # type: ignore[arg-type]  # required operand
    idx = c.slots(operands(op, "indices"))
    piece = _result_shape(op)

    def step(env: Env) -> Signal | None:
        env[out] = env[src][_slices(piece, env, idx)]
        return None

    return step


def _insert(op: Operation, c: Compiler) -> Step:
    src_value = operand(op, "source")
    assert src_value is not None
    assert isinstance(src_value.type, TileType)
    src, dst = c.slot(src_value), c.slot(operand(op, "destination"))  # type: ignore[arg-type]  # required operand
    idx, out = c.slots(operands(op, "indices")), c.slot(op.results[0])
    piece = src_value.type.shape

    def step(env: Env) -> Signal | None:
        result = np.array(env[dst], copy=True)
        result[_slices(piece, env, idx)] = env[src]
        env[out] = result
        return None

    return step


def _pack(op: Operation, c: Compiler) -> Step:
    return _unary(op, c, lambda x: np.ascontiguousarray(x).view(np.int8).reshape(-1))


def _unpack(op: Operation, c: Compiler) -> Step:
    dtype = storage(element_of(op))
    return _unary(op, c, lambda x: np.ascontiguousarray(x).view(dtype).reshape(-1))


HANDLERS: dict[str, StepFactory] = {
    "constant": _constant,
    "iota": _iota,
    "reshape": _reshape,
    "broadcast": _broadcast,
    "permute": _permute,
    "cat": _cat,
    "extract": _extract,
    "insert": _insert,
    "pack": _pack,
    "unpack": _unpack,
}
