"""Structured control flow, terminators, grid queries, assume, assert and print.

``for`` runs its body for ``lb, lb+step, ... < ub`` (signed compare unless ``unsignedCmp``); ``loop`` runs
until a ``break``; ``if`` runs one region. Terminators return a `Signal`; a ``break``/``continue`` inside an
``if`` propagates to the enclosing loop. A failed ``assert`` raises `KernelAssertionError` (the launcher adds
the block id) with its message as the device prints it (``%%`` -> ``%``; a message or file name with any other
``%`` is refused, as the verifier does); a violated ``assume`` on an integer value (a promise the device would
silently rely on) is an `InterpError`. ``print_tko`` formats like C printf, a tile argument as ``[e0, e1, ...]``
per row.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import numpy as np

from tile.ir._attrs import Bounded, DivBy
from tile.ir._format_text import assert_format_texts, format_text_problem, render_format_text
from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType

from ._compile import BlockProgram, Compiler, Env, Signal, Step, StepFactory, attr, operand, operands
from ._dtypes import Array, storage, unsigned_view
from ._errors import InterpError, KernelAssertionError
from ._memops import Ordering

__all__ = ["HANDLERS", "MAX_LOOP_ITERATIONS", "c_format"]

MAX_LOOP_ITERATIONS = 1 << 20
"""A ``loop`` that runs this often without ``break`` is taken to wait for another block, which never comes."""


def _terminator(op: Operation, c: Compiler) -> Step:
    kind, slots = op.name, c.slots(op.operands)

    def step(env: Env) -> Signal | None:
        return (kind, [env[s] for s in slots])

    return step


def _region(op: Operation, c: Compiler, index: int) -> BlockProgram | None:
    region = op.regions[index]
    return c.block(region.blocks[0]) if region.blocks else None


def _for(op: Operation, c: Compiler) -> Step:
    lb, ub, st = (c.slot(operand(op, n)) for n in ("lowerBound", "upperBound", "step"))  # type: ignore[arg-type]
    inits, outs = c.slots(operands(op, "initValues")), c.slots(op.results)
    iv_type = operand(op, "lowerBound").type  # type: ignore[union-attr]  # required operand
    assert isinstance(iv_type, TileType)
    assert isinstance(iv_type.element, ScalarType)
    elem, make_iv = iv_type.element, storage(iv_type.element).type
    unsigned = bool(attr(op, "unsignedCmp", False))
    body = _region(op, c, 0)
    assert body is not None

    def bound(x: Any) -> int:
        return int(unsigned_view(x, elem)) if unsigned else int(x)

    def step(env: Env) -> Signal | None:
        i, end, inc = bound(env[lb]), bound(env[ub]), bound(env[st])
        if inc <= 0:
            raise InterpError(f"'for' step must be positive, got {inc}")
        values = [env[s] for s in inits]
        while i < end:
            signal = body.run(env, [make_iv(i), *values])
            if signal is not None:
                if signal[0] == "return":
                    return signal
                values = signal[1]
                if signal[0] == "break":
                    break
            i += inc
        for slot, value in zip(outs, values, strict=True):
            env[slot] = value
        return None

    return step


def _loop(op: Operation, c: Compiler) -> Step:
    inits, outs = c.slots(operands(op, "initValues")), c.slots(op.results)
    body = _region(op, c, 0)
    assert body is not None

    def step(env: Env) -> Signal | None:
        values = [env[s] for s in inits]
        for _ in range(MAX_LOOP_ITERATIONS):
            signal = body.run(env, values)
            if signal is None or signal[0] == "yield":
                raise InterpError("a 'loop' body ended without 'continue' or 'break'")
            if signal[0] == "return":
                return signal
            values = signal[1]
            if signal[0] == "break":
                break
        else:
            raise InterpError(
                f"a 'loop' ran {MAX_LOOP_ITERATIONS} iterations without 'break'. Tile blocks run one at a time here, "
                "in launch order (x fastest), so a loop that waits for another block (a spin lock, a flag) ends only "
                "if a block that ran before it did the releasing; this one waits for a later block (or for something "
                "no block does), which never comes in the interpreter: run the kernel on a device"
            )
        for slot, value in zip(outs, values, strict=True):
            env[slot] = value
        return None

    return step


def _if(op: Operation, c: Compiler) -> Step:
    cond, outs = c.slot(operand(op, "condition")), c.slots(op.results)  # type: ignore[arg-type]  # required
    then, other = _region(op, c, 0), _region(op, c, 1)

    def step(env: Env) -> Signal | None:
        branch = then if bool(env[cond]) else other
        if branch is None:
            return None
        signal = branch.run(env)
        if signal is None or signal[0] != "yield":
            return signal
        for slot, value in zip(outs, signal[1], strict=True):
            env[slot] = value
        return None

    return step


def _grid_query(op: Operation, c: Compiler) -> Step:
    outs, state = c.slots(op.results), c.state
    if op.name == "get_num_tile_blocks":
        for slot, n in zip(outs, state.grid, strict=True):
            c.template[slot] = np.int32(n)
        return _noop

    def step(env: Env) -> Signal | None:
        for slot, value in zip(outs, state.block_values, strict=True):
            env[slot] = value
        return None

    return step


def _noop(env: Env) -> Signal | None:
    return None


def _assume(op: Operation, c: Compiler) -> Step:
    src, out = c.slot(op.operands[0]), c.slot(op.results[0])
    t = op.operands[0].type
    pred = attr(op, "predicate")
    check = isinstance(t, TileType) and isinstance(t.element, ScalarType) and not t.element.is_float

    def step(env: Env) -> Signal | None:
        value = env[src]
        if check and not _holds(pred, value):
            raise InterpError(
                f"assume {pred} does not hold for the value {np.asarray(value).tolist()}; "
                "the device would silently miscompile: fix the kernel or its launch arguments"
            )
        env[out] = value
        return None

    return step


def _holds(pred: Any, value: Array) -> bool:
    x = np.asarray(value).astype(np.int64)
    if isinstance(pred, Bounded):
        return bool((pred.lb is None or (x >= pred.lb).all()) and (pred.ub is None or (x <= pred.ub).all()))
    if isinstance(pred, DivBy) and pred.every is None:
        return bool((x % pred.divisor == 0).all())
    return True


def _assert(op: Operation, c: Compiler) -> Step:
    """The device prints the message through ``printf`` as format text (see `tile.ir._format_text`): so does this."""
    for what, text in assert_format_texts(op):
        if (problem := format_text_problem(text, what)) is not None:
            raise InterpError(problem, None, c.location(op))
    cond, message = c.slot(op.operands[0]), render_format_text(str(attr(op, "message", "")))

    def step(env: Env) -> Signal | None:
        ok = np.asarray(env[cond], dtype=bool)
        if not ok.all():
            where = np.argwhere(~ok)
            element = f" (first false element at index {tuple(int(i) for i in where[0])})" if ok.ndim else ""
            raise KernelAssertionError(f"kernel assertion failed: {message}{element}")
        return None

    return step


_SPEC = re.compile(r"%([-+ #0]*)(\d*|\*)(?:\.(\d+))?(hh|h|ll|l|L|z|j|t)?([diuoxXeEfFgGaAcs%])")


def c_format(fmt: str, args: list[Any], types: list[Any]) -> str:
    """Format `args` (tiles) with the C printf string `fmt`; a non-scalar tile prints as a nested list."""
    pieces, pos, it = [], 0, iter(zip(args, types, strict=True))
    for m in _SPEC.finditer(fmt):
        pieces.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(5) == "%":
            pieces.append("%")
            continue
        value, t = next(it, (None, None))
        if value is None:
            raise InterpError(f"print format {fmt!r} has more conversions than arguments")
        pieces.append(_format_tile(m, np.asarray(value), t))
    pieces.append(fmt[pos:])
    return "".join(pieces)


def _format_tile(m: re.Match[str], value: Array, t: Any) -> str:
    flags, width, prec, conv = m.group(1), m.group(2), m.group(3), m.group(5)
    if conv in "uoxX" and isinstance(t, TileType) and isinstance(t.element, ScalarType) and not t.element.is_float:
        value = unsigned_view(value, t.element)  # C prints these conversions of a negative int as two's complement
    spec = "%" + flags + (width if width != "*" else "") + (f".{prec}" if prec is not None else "")
    conv = {"u": "d", "i": "d"}.get(conv, conv)

    def one(x: Any) -> str:
        if conv in "aA":
            return float(x).hex()
        if conv in "dioxXc":
            return (spec + conv) % int(x)
        return (spec + conv) % float(x)

    def nested(a: Array) -> str:
        return one(a) if a.ndim == 0 else "[" + ", ".join(nested(row) for row in a) + "]"

    return nested(value)


def _print(op: Operation, c: Compiler) -> Step:
    args = operands(op, "args")
    slots, types = c.slots(args), [a.type for a in args]
    fmt, state, order = str(attr(op, "str", "")), c.state, Ordering(op, c)

    def step(env: Env) -> Signal | None:
        order.begin(env)
        text = c_format(fmt, [env[s] for s in slots], types)
        (state.stdout or sys.stdout).write(text)
        order.end(env)
        return None

    return step


HANDLERS: dict[str, StepFactory] = {
    "for": _for,
    "loop": _loop,
    "if": _if,
    **dict.fromkeys(("yield", "continue", "break", "return"), _terminator),
    "get_tile_block_id": _grid_query,
    "get_num_tile_blocks": _grid_query,
    "assume": _assume,
    "assert": _assert,
    "print_tko": _print,
}
