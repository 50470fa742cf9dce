"""What every handle shares: the fix each fate's error suggests, the fate check, and the base of the handles that wrap
one tensor (`Partition`, `Shared`, `Lent`).

Invariants: a handle whose ``_fate`` is set was moved (``(kind, where)``) or is in flight (`InFlight`); `check_fate`
refuses it with `MovedError` / `InFlightError`. Only the kernel call's own checks and move admit an in-flight handle,
by passing ``admit=True`` at those call sites: no thread-wide switch, so user code that runs during a kernel call (a
scalar's ``__int__``, a generic's ``__eq__``) cannot use an in-flight handle. A wrapper is move-only and uncopyable;
its metadata is its tensor's, read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tile.compiler.lang import DType
from tile.core import Uncopyable
from tile.frontend._errors import InFlight, InFlightError, MovedError

if TYPE_CHECKING:
    from tile.frontend._tensor import Tensor

__all__ = ["FIX", "Wrapper", "check_fate"]

FIX = {
    "launch": "use the handles the launch returned: `z, x, y = kernel(z, x, y).sync()` (or `await`)",
    "partition": "use the handle it returned (`.unpartition()` / `.unshare()` / `.reclaim()` give the tensor back)",
    "unpartition": "use the Tensor that .unpartition() returned",
    "unshare": "use the Tensor that .unshare() returned",
    "reclaim": "use the Tensor that .reclaim() returned",
    "graph_write": "use the Tensor that tile.graph_write(...).sync() (or await) returned",
    "inflight": "a .then() function may only pass it to a launch it returns (run after this one, in order); read it "
    "from what .sync()/await returns once the chain is done",
    "captured": "it belongs to the graph until graph.close(), which hands it back (`z, x = graph.close()`), so replays "
    "and reads never overlap",
}
"""The fix an error suggests, by the kind of fate (``fate[0]``)."""


def check_fate(what: str, fate: tuple[str, str], admit: bool = False) -> None:
    """Raise unless a handle described by ``what`` with this (non-None) ``fate`` may be used here: an in-flight handle
    only by a kernel call taking it (``admit``: see ``_launch``), a moved one never."""
    if type(fate) is not InFlight:
        raise MovedError(what, fate[1], FIX[fate[0]])
    if not (admit and fate.takeable()):
        raise InFlightError(what, fate[1], FIX[fate[0]])


class Wrapper(Uncopyable):
    """A handle around one tensor (its memory, moved into the wrapper): the fate check and the tensor's metadata."""

    __slots__ = ("_fate", "_tensor")
    _tensor: Tensor
    _fate: tuple[str, str] | None

    def _describe(self) -> str:
        raise NotImplementedError

    def _check(self, admit: bool = False) -> Tensor:
        """Raise if this handle cannot be used (``admit``: by the kernel call taking it); return its tensor."""
        fate = self._fate
        if fate is not None and not (admit and type(fate) is InFlight and fate.takeable()):
            check_fate(self._describe(), fate, admit)  # raises; described only then (chains take in-flight handles)
        self._tensor._check()
        return self._tensor

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents of the whole tensor."""
        return self._tensor.shape

    @property
    def dtype(self) -> DType:
        """Element type."""
        return self._tensor.dtype

    @property
    def ndim(self) -> int:
        """Rank."""
        return self._tensor.ndim

    @property
    def device(self) -> object:
        """Where the memory lives (see `Tensor.device`)."""
        return self._tensor.device
