"""A ``for idx in z.tiles()`` walk on the outputs' own grid, as the one iteration it is: ``if lb < ub: body``.

Launched without an explicit grid, a kernel gets one block per tile of its outputs (`Specialization.own_grid`), so the
walk's loop runs exactly once per block. As a loop, tileiras still pipelines its loads across iterations: on Hopper
the flash-attention kernel got two more block-wide barriers, seven more barrier waits and 500 more instructions than
the same body without the loop (SASS, see docs/compiler/performance.md). The checker emits the walk as a loop (every
check and diagnostic of the loop form applies) and `run_once` then rewrites the emitted ``for`` op in place: the body
becomes the ``then`` block of an ``if`` on ``lb < ub`` with the loop variable and the carried values replaced by their
first values, and its final ``continue`` becomes the ``yield``; the ``else`` block yields the initial values. The
``if`` keeps the ``for``'s result values, so nothing after it changes. On a larger grid a block past the last tile
does nothing; no tile is ever written twice or out of range.

A body that leaves early (a ``continue`` or ``break`` of this loop, a ``return`` anywhere) keeps the loop.
"""

from __future__ import annotations

from collections.abc import Callable

from tile.compiler._kir import Block, Op, Value

__all__ = ["run_once"]

_LOOPS = frozenset({"for", "loop"})


def run_once(parent: Block, compare: Callable[[Value, Value], Value]) -> bool:
    """Rewrite the ``for`` op just emitted at the end of ``parent`` into an ``if``; False (nothing changed) when its
    body leaves early. ``compare(lb, ub)`` emits ``lb < ub`` at the end of ``parent`` and returns the i1 value."""
    loop = parent.ops[-1]
    assert loop.name == "for", "run_once rewrites the op just emitted"
    body = loop.regions[0]
    if _leaves_early(body.ops[:-1]) or body.ops[-1].name != "continue":
        return False
    lb, ub, _, inits = loop.operands
    assert isinstance(lb, Value), "a for op's lower bound"
    assert isinstance(ub, Value), "a for op's upper bound"
    assert isinstance(inits, list), "a for op's initial values"
    parent.ops.pop()
    cond = compare(lb, ub)
    first = {arg.id: value for arg, value in zip(body.args, [lb, *inits], strict=True)}
    _substitute(body, first)
    body.ops[-1].name = "yield"  # continue [values] -> yield [values]
    then = Block([], body.ops)
    other = Block([], [Op("yield", [list(inits)], [], {}, loc=loop.loc, inlined_from=loop.inlined_from)])
    parent.ops.append(Op("if", [cond], loop.results, {}, [then, other], loc=loop.loc, inlined_from=loop.inlined_from))
    return True


def _leaves_early(ops: list[Op]) -> bool:
    """A ``return`` anywhere, or a ``continue``/``break`` that is not an inner loop's."""
    for op in ops:
        if op.name == "return" or op.name in ("continue", "break"):
            return True
        if op.name in _LOOPS:
            if any(o.name == "return" for region in op.regions for o in _walk(region)):
                return True
            continue
        if any(_leaves_early(region.ops) for region in op.regions):
            return True
    return False


def _walk(block: Block) -> list[Op]:
    out: list[Op] = []
    for op in block.ops:
        out.append(op)
        for region in op.regions:
            out.extend(_walk(region))
    return out


def _substitute(block: Block, values: dict[int, Value]) -> None:
    """Replace every use of a value in ``values`` (by id) inside ``block``, nested regions included."""
    for op in _walk(block):
        op.operands = [_replaced(o, values) for o in op.operands]


def _replaced(operand: Value | list[Value] | None, values: dict[int, Value]) -> Value | list[Value] | None:
    if isinstance(operand, Value):
        return values.get(operand.id, operand)
    if isinstance(operand, list):
        return [values.get(v.id, v) for v in operand]
    return operand
