"""The launcher's check that the compiled code views each memory argument as the argument it is given.

The launcher partitions, checks and moves arguments by the parameters it read from the kernel's annotations; the
compiled code addresses memory by what the compiler read (its ABI, `tile.compiler.KernelABI`). Review 38 found the
two reading the annotations apart (a global in an annotation rebound between them): code compiled for 32-element
tiles ran over a grid of 16-element tiles, and each block wrote other blocks' tiles. That hole is closed where it
was, and this module closes the class: before a plan of a call layout is made (once per layout, never per launch:
the fast paths reuse the plan only for arguments of the very layout it was made for), `check_abi` compares, for
every memory argument (a tuple parameter's elements one by one, as ``name[i]``), what the code was compiled for with
what is passed:

- the element dtype (the base pointer slot's ``ptr<dtype>``) and the rank (its shape and stride slots, axes 0..r-1);
- the static extents compiled into the code as constants (``KernelABI.static_extents``);
- whether it is a ``Mut`` output and, for one, its tile shape (``KernelABI.tiles``), which the code's own-tile,
  ``subtiles`` and ``tiles()`` addressing all assume;

and that the code takes no memory argument the call does not pass. A disagreement is a bug in Tile (the user's call
was already checked against the kernel's parameters), raised as `InternalError` before anything is moved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tile.compiler import CompiledKernel
from tile.compiler._spec import canonical_dtype
from tile.frontend._errors import InternalError
from tile.frontend._partition import Partition
from tile.frontend._shared import HANDLES, tensor_of
from tile.frontend._signature import Param

__all__ = ["check_abi"]


def check_abi(compiled: CompiledKernel, params: Sequence[Param], args: Sequence[Any]) -> None:
    """Raise `InternalError` unless ``compiled``'s ABI views every memory argument in ``args`` (bound to ``params``,
    tuple parameters flattened) as what it is: dtype, rank, static extents, output or input, tile shape."""
    abi = compiled.abi
    bases: dict[str, str] = {}
    axes: dict[tuple[str, str], list[int]] = {}
    for slot in abi.slots:
        if slot.role == "base":
            bases[slot.param] = slot.dtype
        elif slot.role in ("shape", "stride"):
            axes.setdefault((slot.param, slot.role), []).append(slot.axis)
    static = dict(abi.static_extents)
    passed: set[str] = set()
    for p, a in zip(params, args, strict=False):
        if not isinstance(a, HANDLES):
            continue
        name = p.name
        passed.add(name)
        t = tensor_of(a)
        want = f"ptr<{canonical_dtype(t.dtype.name)}>"
        if bases.get(name) != want:
            _disagree(compiled, name, f"a tensor of {t.dtype.name} is passed, the code reads {bases.get(name, 'none')}")
        rank = list(range(t.ndim))
        for role in ("shape", "stride"):
            if sorted(axes.get((name, role), ())) != rank:
                got = len(axes.get((name, role), ()))
                _disagree(compiled, name, f"a rank-{t.ndim} tensor is passed, the code takes {got} {role} slot(s)")
        dims = static.get(name)
        if dims is not None and (
            len(dims) != t.ndim or any(d is not None and d != n for d, n in zip(dims, t.shape, strict=False))
        ):
            _disagree(compiled, name, f"a tensor of shape {t.shape} is passed, the code has extents {dims} built in")
        tile = abi.tile_of(name)
        given = a.tile_shape if type(a) is Partition else None
        if tile != given:
            passed_as = f"a partition in tiles of {given}" if given is not None else "an input (no partition)"
            compiled_as = f"an output in tiles of {tile}" if tile is not None else "an input"
            _disagree(compiled, name, f"{passed_as} is passed, the code was compiled for {compiled_as}")
    unpassed = sorted({*bases, *(n for n, _ in abi.tiles), *static} - passed)
    if unpassed:
        _disagree(compiled, unpassed[0], "the code takes it as a tensor, the call passes none")


def _disagree(compiled: CompiledKernel, param: str, what: str) -> None:
    raise InternalError(
        f"{compiled.name}(): the compiled code and the launcher disagree about argument '{param}': {what}. This is "
        "a bug in Tile, not in the kernel; nothing was moved or launched. Please report it with the kernel and the "
        "call (a stale compile cache can be cleared with `python -m tile.compiler cache clear`)"
    )
