"""The launch-boundary ownership checks (docs/frontend/ownership.md) and the move of every handle into the launch.

Invariants: `check` raises before anything is moved; it finds aliasing by absolute byte ranges (views, slices and
foreign borrows included), never by object identity: an output may overlap no other argument and no other live
handle anywhere. `move` then marks every handle argument moved (naming the launch site) and returns the fresh
handles that the launch hands back once its work is done; one tensor passed as several read-only inputs comes back
as one handle in each of those positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tile.frontend._errors import AliasError, BorrowError, DeviceMismatchError
from tile.frontend._partition import Partition
from tile.frontend._placement import device_name
from tile.frontend._shared import HANDLES, Shared, tensor_of
from tile.frontend._signature import Param
from tile.frontend._storage import overlapping
from tile.frontend._tensor import Tensor

__all__ = ["check", "move"]


def check(kernel: str, params: Sequence[Param], args: Sequence[Any], unchecked: bool) -> Any:
    """Check devices and aliasing of the handle arguments; return their common device (None if no tensors)."""
    handles = [(p, a) for p, a in zip(params, args, strict=False) if isinstance(a, HANDLES)]
    devices = {tensor_of(a).device for _, a in handles}
    if len(devices) > 1:
        listed = ", ".join(f"'{p.name}' on {device_name(tensor_of(a).device)}" for p, a in handles)
        raise DeviceMismatchError(
            f"{kernel}(): arguments live on different devices ({listed}); a kernel runs on one device: move them "
            "there first (tensor.to(device))"
        )
    if not unchecked:
        for p, a in handles:
            if isinstance(a, Partition):
                _check_output(kernel, p, a, handles)
    return next(iter(devices)) if devices else None


def _check_output(kernel: str, p: Param, out: Partition, handles: list[tuple[Param, Any]]) -> None:
    t = out._tensor
    lo, hi = t._byte_range()
    for q, other in handles:
        if other is out and q is p:
            continue
        a, b = tensor_of(other)._byte_range()
        if other is out or (a < hi and lo < b):
            role = "output" if isinstance(other, Partition) else "input"
            raise AliasError(
                f"{kernel}(): output '{p.name}' and {role} '{q.name}' overlap in memory "
                f"([0x{lo:x}, 0x{hi:x}) and [0x{a:x}, 0x{b:x})); a block could read what another block writes. "
                "Pass separate tensors (write into a new tile.empty(...) and swap), or copy the input with .copy()"
            )
    arg_tensors = tuple(tensor_of(a) for _, a in handles)
    others = overlapping(t._storage, lo, hi, exclude=arg_tensors)
    if others:
        listed = "; ".join(h._describe() for h in others[:4])
        del others  # the traceback keeps this frame: it must not keep the conflicting handles alive
        raise BorrowError(
            f"{kernel}(): output '{p.name}' overlaps other live handles: {listed}. An output needs exclusive memory "
            "for the whole launch: drop them first (`del ...`)"
        )


def move(kernel: str, args: Sequence[Any], site: str) -> list[Any]:
    """Move every handle argument into the launch; return the handles it will hand back (scalars as they are)."""
    where = f"moved into the launch of {kernel} at {site}"
    for a in args:  # all checked before any is moved: a failed call moves nothing
        if isinstance(a, (Tensor, Partition, Shared)):
            a._check(admit=True)
    fresh: dict[int, Any] = {}
    out = []
    for a in args:
        if isinstance(a, Shared):
            out.append(a)  # a share is not moved: the launch counts itself as one of its users
        elif isinstance(a, (Tensor, Partition)):
            if id(a) not in fresh:
                fresh[id(a)] = a._move("launch", where, admit=True)
            out.append(fresh[id(a)])
        else:
            out.append(a)
    return out
