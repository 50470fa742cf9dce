"""Handles whose reports the checks trust: their classes cannot be subclassed or forged, their fields not reassigned.

Invariants: a class made with the `Exact` metaclass cannot be subclassed (`FinalClassError` when the subclass is
defined) and ``isinstance(x, C)`` is true only for an object whose type is exactly ``C`` - the builtin test also
accepts any object whose ``__class__`` attribute claims ``C``, which a plain class can define; a `Frozen` object's
fields named in ``_frozen`` are set once (by the constructor) and then refuse assignment and deletion with
`ReadOnlyError`. Bounds, device and lifetime checks read those fields (``nbytes``, ``shape``, ``stream``, ...), so a
subclass overriding them, a forged instance or a reassigned field would let a check pass on a lie.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tile.core._errors import FinalClassError, ReadOnlyError

__all__ = ["Exact", "Frozen"]


class Exact(type):
    """Metaclass of tile.core's trusted handle classes: final, and ``isinstance`` by exact type."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Exact:
        for base in bases:
            if isinstance(base, Exact):
                raise FinalClassError(
                    f"class {name} cannot subclass tile.core's {base.__name__}: the bounds and lifetime checks trust "
                    f"what a {base.__name__} reports (its pointer, size, shape, stream), so it cannot be overridden; "
                    f"wrap the handle in a class of your own (has-a, not is-a) and pass the handle itself"
                )
        return super().__new__(mcs, name, bases, namespace, **kwargs)

    def __instancecheck__(cls, instance: object) -> bool:
        # Called only when type(instance) is not cls (CPython tests that first): a forged ``__class__`` lands here.
        return type(instance) is cls


class Frozen:
    """Mixin: the fields named in ``_frozen`` are set once and then refuse assignment and deletion."""

    __slots__ = ()
    _frozen: ClassVar[frozenset[str]] = frozenset()

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
