"""`Uncopyable`: the mixin that makes an owning handle refuse ``copy.copy``, ``copy.deepcopy`` and pickling.

Invariant: an object that owns a resource (device memory, a stream, an event, a loaded module) or a share of one has
exactly one Python handle per ownership; the copy protocols would silently make a second (``copy.copy`` of a
``__slots__`` object copies every slot), so each refuses with `HandleCopyError` naming the handle and the fix. Classes
whose copy has a safe meaning (a data copy) override the method that has it.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tile.core._errors import HandleCopyError

__all__ = ["Uncopyable", "refuse_copy"]


def refuse_copy(handle: object, how: str, fix: str) -> NoReturn:
    """Raise `HandleCopyError` for ``how`` (``"copy.copy"``, ``"pickle"``, ...) of ``handle``."""
    raise HandleCopyError(
        f"{how} of {handle!r} would make a second owner of what it holds (a double free, or a write racing a "
        f"pending use), so handles cannot be copied or pickled; {fix}"
    )


class Uncopyable:
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and ``pickle`` raise `HandleCopyError`.

    Subclasses set ``_copy_fix`` to the advice the message ends with.
    """

    __slots__ = ()
    _copy_fix = "pass the handle itself (it is safe to share between threads) instead of a copy"

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "copy.copy", self._copy_fix)

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        refuse_copy(self, "copy.deepcopy", self._copy_fix)

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        refuse_copy(self, "pickling", self._copy_fix)
