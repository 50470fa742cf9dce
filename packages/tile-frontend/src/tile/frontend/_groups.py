"""Tuple parameters: a kernel taking ``tuple[Tensor[...], ...]`` or ``tuple[Mut[Tensor[...]], ...]`` (a grouped GEMM's
A, B and C groups, each of its own shape).

A call flattens each tuple argument into one argument per element, under the parameters ``name[0]`` ..
``name[n-1]`` of the element's kind, so every element goes through exactly the checks, ownership rules and moves of a
lone argument: each output element must be a partition (moved into the launch, handed back when done), and the
aliasing check sees every element, so an output element may overlap no other element, no other output and no input.
The tuple's length is part of the specialization (a compile-time ``len(name)`` in the kernel). The launch hands the
arguments back grouped as they came, each tuple argument as a tuple.

Invariant: flattening reads only the argument containers (it touches no handle), so a rejected call leaves every
handle usable. Each container is read once (`snapshot`): a list whose ``__len__`` disagrees with its ``__iter__``, or
one another thread mutates, cannot give the lengths one answer and the flattened arguments another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tile.aio import ExecutionContext
from tile.compiler._typecheck_entry import MAX_TUPLE
from tile.frontend._errors import ArgumentError
from tile.frontend._launch import Launch
from tile.frontend._signature import Param

__all__ = ["GroupedLaunch", "Lengths", "flat_params", "flatten", "lengths_of", "regroup", "snapshot"]

Lengths = tuple[int | None, ...]
"""Per parameter: the length of its tuple argument, or None for a parameter that is not a tuple."""


def snapshot(params: Sequence[Param], args: Sequence[Any]) -> tuple[Any, ...]:
    """``args`` with each tuple parameter's argument read once into a tuple (other arguments as they are), so that
    `lengths_of` and `flatten` see the same elements; a container that is not a tuple or list is left for
    `lengths_of` to refuse."""
    return tuple(
        tuple(a) if p.kind == "tuple" and isinstance(a, (tuple, list)) else a
        for p, a in zip(params, args, strict=False)
    ) + tuple(args[len(params) :])


def lengths_of(kernel: str, params: Sequence[Param], args: Sequence[Any]) -> Lengths:
    """The length of each tuple argument (None for other parameters); raise `ArgumentError` for a bad container."""
    out: list[int | None] = []
    for p, a in zip(params, args, strict=False):
        if p.kind != "tuple":
            out.append(None)
            continue
        what = "Mut partitions" if p.element == "mut" else "tensors"
        if not isinstance(a, (tuple, list)):
            raise ArgumentError(
                f"argument '{p.name}' of {kernel}() is a tuple of {what}, got {type(a).__name__}: pass a tuple or "
                f"list, e.g. ({p.name}0, {p.name}1)"
            )
        if not 1 <= len(a) <= MAX_TUPLE:
            raise ArgumentError(
                f"argument '{p.name}' of {kernel}() holds {len(a)} {what}; a tuple parameter takes 1 to {MAX_TUPLE}"
            )
        out.append(len(a))
    return tuple(out)


def flat_params(params: Sequence[Param], lengths: Lengths) -> tuple[Param, ...]:
    """``params`` with each tuple parameter replaced by its elements ``name[i]`` (of the element's kind)."""
    out: list[Param] = []
    for p, n in zip(params, lengths, strict=True):
        if n is None:
            out.append(p)
        else:
            out += [Param(f"{p.name}[{i}]", p.element or "tensor", p.dtype, p.shape) for i in range(n)]
    return tuple(out)


def flatten(args: Sequence[Any], lengths: Lengths) -> tuple[Any, ...]:
    """The arguments with each tuple argument spliced in place, element by element."""
    out: list[Any] = []
    for a, n in zip(args, lengths, strict=True):
        if n is None:
            out.append(a)
        else:
            out += list(a)
    return tuple(out)


def regroup(values: Sequence[Any], lengths: Lengths) -> tuple[Any, ...]:
    """Inverse of `flatten`: the elements of each tuple argument gathered back into a tuple."""
    out: list[Any] = []
    at = 0
    for n in lengths:
        if n is None:
            out.append(values[at])
            at += 1
        else:
            out.append(tuple(values[at : at + n]))
            at += n
    return tuple(out)


class GroupedLaunch(Launch, _tile_internal=True):
    """The launch of a kernel with tuple parameters: it hands the arguments back grouped, tuples as tuples."""

    __slots__ = ("_lengths",)

    def __init__(self, lengths: Lengths, *args: Any) -> None:
        self._lengths = lengths
        super().__init__(*args)

    def _execute(self, ctx: ExecutionContext, lend: bool = True) -> tuple[Any, ...]:
        return regroup(super()._execute(ctx, lend), self._lengths)

    _run_in = _execute
