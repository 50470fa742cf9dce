"""`Uncopyable`: the mixin that makes tile.aio's owning objects refuse ``copy.copy``, ``copy.deepcopy`` and pickling.

Invariant: an op, a graph, a context, a completion or a policy has exactly one Python object per ownership (of its
inputs, its recorded work, its stream); ``copy.copy`` of a ``__slots__`` object copies every slot, which would make a
second owner (an op executed twice, a graph freed twice), so each protocol raises `UncopyableError` naming the object
and what to do instead. Errors are not owners: they keep pickling through ``__reduce__``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from tile.aio._errors import UncopyableError

__all__ = ["Uncopyable"]


class Uncopyable:
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and ``pickle`` raise `UncopyableError`; ``_copy_fix`` is the advice."""

    __slots__ = ()
    _copy_fix = "pass the object itself (it may be shared between threads)"

    def _refuse(self, how: str) -> NoReturn:
        try:
            what = repr(self)
        except Exception:  # a half-built or closed object: its class still names it
            what = f"a {type(self).__name__}"
        raise UncopyableError(what, how, self._copy_fix)

    def __copy__(self) -> NoReturn:
        self._refuse("copy.copy")

    def __deepcopy__(self, memo: dict[int, Any]) -> NoReturn:
        self._refuse("copy.deepcopy")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        self._refuse("pickling")

    def __reduce__(self) -> NoReturn:
        self._refuse("pickling")
