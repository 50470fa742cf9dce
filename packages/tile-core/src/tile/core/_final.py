"""Handles whose reports the checks trust: their classes cannot be subclassed or forged, their fields not reassigned.

Invariants: a class made with the `Exact` metaclass (``tile.errors.Exact``, shared with tile.frontend) that mixes
in `Frozen` cannot be subclassed (tile.core's `FinalClassError`, from ``Frozen.subclass_error``, when the subclass is
defined) and ``isinstance(x, C)`` is true only for an object whose type is exactly ``C`` - the builtin test also
accepts any object whose ``__class__`` attribute claims ``C``, which a plain class can define; a `Frozen` object's
fields named in ``_frozen`` are set once (by the constructor) and then refuse assignment and deletion with
`ReadOnlyError`. Bounds, device and lifetime checks read those fields (``nbytes``, ``shape``, ``stream``, ...), so a
subclass overriding them, a forged instance or a reassigned field would let a check pass on a lie."""

from __future__ import annotations

from typing import Any, ClassVar

from tile.core._errors import FinalClassError, ReadOnlyError
from tile.errors import Exact

__all__ = ["Exact", "Frozen"]


class Frozen:
    """Mixin: the fields named in ``_frozen`` are set once and then refuse assignment and deletion."""

    __slots__ = ()
    _frozen: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error `Exact` raises for defining ``qualname``, a subclass of ``cls`` (a tile.core handle class)."""
        return FinalClassError(
            f"class {qualname} cannot subclass tile.core's {cls.__name__}: the bounds and lifetime checks trust "
            f"what a {cls.__name__} reports (its pointer, size, shape, stream), so it cannot be overridden; "
            f"wrap the handle in a class of your own (has-a, not is-a) and pass the handle itself"
        )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # `Exact.__new__` refuses subclasses of a final class, but ``type.__new__(Exact, ...)`` skips it; this hook
        # runs for every class creation, so a handle class stays final either way.
        for base in cls.__mro__[1:]:
            if isinstance(base, Exact):
                raise base.subclass_error(cls.__qualname__)
        super().__init_subclass__(**kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if name[0] != "_" and name in self._frozen and _is_set(self, name):
            raise ReadOnlyError(
                f"{type(self).__name__}.{name} is read-only: tile.core's checks trust it (bounds, devices, lifetimes); "
                "make a new handle instead (a new view, buffer, stream or prepared launch)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._frozen:
            raise ReadOnlyError(f"{type(self).__name__}.{name} cannot be deleted: tile.core's checks trust it")
        object.__delattr__(self, name)


def _is_set(obj: object, name: str) -> bool:
    try:
        object.__getattribute__(obj, name)
    except AttributeError:
        return False
    return True
