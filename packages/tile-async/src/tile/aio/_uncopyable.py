"""`Uncopyable`: tile.core's copy-refusing mixin, raising tile.aio's `UncopyableError` (a ``HandleCopyError``).

Invariant: an op, a graph, a context, a completion or a policy has exactly one Python object per ownership (of its
inputs, its recorded work, its stream); ``copy.copy`` of a ``__slots__`` object copies every slot, which would make a
second owner (an op executed twice, a graph freed twice), so each protocol raises `UncopyableError` naming the object
and what to do instead. Errors are not owners: they keep pickling through ``__reduce__``.
"""

from __future__ import annotations

from typing import NoReturn

import tile.core
from tile.aio._errors import UncopyableError
from tile.core._nocopy import describe

__all__ = ["Uncopyable"]


class Uncopyable(tile.core.Uncopyable):
    """Mixin: ``copy.copy``, ``copy.deepcopy`` and ``pickle`` raise `UncopyableError`; ``_copy_fix`` is the advice."""

    __slots__ = ()
    _copy_fix = "pass the object itself (it may be shared between threads)"

    def _refuse(self, how: str) -> NoReturn:
        raise UncopyableError(describe(self), how, self._copy_fix)
