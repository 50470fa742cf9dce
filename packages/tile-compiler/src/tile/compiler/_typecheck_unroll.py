"""``for`` loops unrolled at compile time: over a tuple (``for a in As``) or over a constant range whose variable
indexes a tuple (``for g in range(len(As)): As[g]``).

A tuple parameter's elements are distinct tensors with their own views and shapes, so ``As[g]`` needs ``g`` at
compile time; such a loop runs its body once per value with the variable bound to a Python int (or the element),
in order, as straight-line code. Invariant: nothing in the unrolled body can leave it early (``break``, ``continue``
at its level and ``return`` are compile errors: there is no loop op for them to leave), and the range has
compile-time bounds, so the unrolled code does exactly what the Python loop would.
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tile.compiler._typecheck import Checker

__all__ = ["MAX_UNROLL", "unroll_values"]

MAX_UNROLL = 64
"""The most iterations a compile-time loop unrolls (a tuple parameter has at most 64 elements too)."""


def unroll_values(ch: Checker, node: ast.For) -> tuple[object, ...] | None:
    """The values the variable of ``node`` takes when the loop is unrolled, or None for an ordinary loop."""
    it = node.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and ch.expr(it.func) is builtins.range:
        indexed = _indexed_tuple(ch, node)
        if indexed is None:
            return None
        return _checked(ch, node, _constant_range(ch, it, indexed))
    if isinstance(it, (ast.Name, ast.Subscript, ast.Tuple)):
        source = ch.expr(it)
        if isinstance(source, tuple):
            return _checked(ch, node, source)
    return None


def _indexed_tuple(ch: Checker, node: ast.For) -> str | None:
    """The name of a tuple the loop variable indexes in the body (``As[g]``), or None."""
    if not isinstance(node.target, ast.Name):
        return None
    var = node.target.id
    for n in (n for s in node.body for n in ast.walk(s)):
        indexes = isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id == var
        if indexes and isinstance(n.value, ast.Name) and isinstance(ch.env.get(n.value.id), tuple):  # type: ignore[attr-defined]  # a Subscript
            return n.value.id  # type: ignore[attr-defined]  # a Subscript
    return None


def _constant_range(ch: Checker, it: ast.Call, indexed: str) -> tuple[object, ...]:
    args = [ch.expr(a) for a in it.args]
    if it.keywords or not 1 <= len(args) <= 3 or not all(type(a) is int for a in args):
        ch.fail(
            f"this loop indexes the tuple '{indexed}' with its variable, so it is unrolled at compile time and its "
            f"range needs compile-time int bounds, e.g. range(len({indexed}))",
            it,
        )
    if len(args) == 3 and args[2] == 0:
        ch.fail("the range step must not be zero", it)
    return tuple(range(*(int(a) for a in args)))  # type: ignore[call-overload]  # ints, checked above


def _checked(ch: Checker, node: ast.For, values: tuple[object, ...]) -> tuple[object, ...]:
    if len(values) > MAX_UNROLL:
        ch.fail(f"a loop unrolled at compile time runs at most {MAX_UNROLL} times, this one {len(values)}", node.iter)
    if (leaves := _leaves(node.body)) is not None:
        ch.fail(
            f"'{leaves}' is not supported in a loop unrolled at compile time (over a tuple, or indexing one with its "
            "variable); compute a flag and test it with 'if' instead",
            node,
        )
    if not isinstance(node.target, (ast.Name, ast.Tuple)):
        ch.fail("the loop variable must be a name or a tuple of names", node.target)
    return values


def _leaves(body: list[ast.stmt]) -> str | None:
    """``break``/``continue`` of this loop (not of a loop nested in it) or any ``return`` in ``body``."""
    for s in body:
        for n in ast.walk(s):
            if isinstance(n, ast.Return):
                return "return"
        if isinstance(s, (ast.Break, ast.Continue)):
            return "break" if isinstance(s, ast.Break) else "continue"
        if isinstance(s, ast.If) and (found := _leaves(s.body) or _leaves(s.orelse)) is not None:
            return found
    return None
