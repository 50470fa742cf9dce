"""`Uncopyable`: the mixin that makes an owning handle refuse ``copy.copy``, ``copy.deepcopy`` and pickling.

Invariant: an object that owns a resource (device memory, a stream, an event, a loaded module, an op's inputs) or a
share of one has exactly one Python handle per ownership; the copy protocols would silently make a second
(``copy.copy`` of a ``__slots__`` object copies every slot), so each refuses with `HandleCopyError` naming the handle
and the fix. Classes whose copy has a safe meaning (a data copy) override the method that has it; packages above
override `Uncopyable._refuse` to raise their own subclass of `HandleCopyError`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tile.core._errors import HandleCopyError

__all__ = ["Uncopyable", "describe"]


def describe(handle: object) -> str:
    """``repr(handle)``, or its class name for a half-built or closed object whose repr fails."""
    try:
        return repr(handle)
    except Exception:  # any repr failure: the class still names the object
        return f"a {type(handle).__name__}"


class Uncopyable:
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and ``pickle`` raise `HandleCopyError`.

    Subclasses set ``_copy_fix`` to the advice the message ends with.
    """

    __slots__ = ()
    _copy_fix = "pass the handle itself (it is safe to share between threads) instead of a copy"

    def _refuse(self, how: str) -> NoReturn:
        raise HandleCopyError(
            f"{how} of {describe(self)} would make a second owner of what it holds (a double free, or a write "
            f"racing a pending use), so handles cannot be copied or pickled; {self._copy_fix}"
        )

    def __copy__(self) -> Any:
        self._refuse("copy.copy")

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        self._refuse("copy.deepcopy")

    def __reduce_ex__(self, protocol: Any) -> Any:
        self._refuse("pickling")
