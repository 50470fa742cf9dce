"""The one root of every error Tile raises, and the guards every package puts on the objects its checks trust.

Tile has two bottom layers that share no other package: tile-ir (pure Python, no CUDA) and tile-bindings (the CUDA
driver). Both derive every exception they define from `TileError`, and every package above them re-exports this
same class as its own ``TileError``, so ``except tile.frontend.TileError`` catches whatever any Tile package raised:
a verifier error, an interpreter data race, a compile error or a driver error. ``except`` matches on the real class
hierarchy (``__mro__``), not on virtual subclasses, which is why the root is one class in one tiny package instead of
a root per stack joined afterwards.

Both runtime stacks hand out handles whose reports their checks trust (a tile.core buffer's size, a tile.frontend
tensor's shape), and neither may import the other (tile-frontend loads tile.core only when a GPU is used), so the
guards on those handles live here once: `Exact`, the metaclass that makes a class final and its ``isinstance`` exact,
and `ProtectedError`, the base of the two refusals, `ReadOnlyError` (a trusted attribute was assigned or deleted) and
`FinalClassError` (a trusted class was subclassed). Each package derives its own classes from these two
(``tile.core.ReadOnlyError``, ``tile.frontend.FrozenError``, ``tile.core.FinalClassError``,
``tile.frontend.FinalClassError``), so ``except tile.errors.ProtectedError`` catches the refusals of both.

Invariants: this package imports only ``typing``; every error class is a `TileError` and each concrete error also
derives from the builtin a caller would naturally catch (``AttributeError``, ``TypeError``, ...), so ``except``
clauses written against the builtin keep working; errors carry only their message and pickle by the default protocol.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Exact", "FinalClassError", "ProtectedError", "ReadOnlyError", "TileError"]


class TileError(Exception):
    """Root of every error any Tile package raises (tile-ir, tile-bindings, tile-core, tile-async, tile-compiler,
    tile-frontend); each package re-exports it as its own ``TileError``."""


class ProtectedError(TileError):
    """Base of the refusals to change what Tile's checks trust: `ReadOnlyError` and `FinalClassError`.

    A check that reads a handle's size, shape or pointer passes on whatever the handle reports; reassigning that field
    or overriding it in a subclass would make the check pass on a lie (an access past an allocation). The fix is always
    to make a new handle, or to wrap one in a class of your own (has-a, not is-a).
    """


class ReadOnlyError(ProtectedError, AttributeError):
    """An attribute that Tile's checks read was assigned or deleted. Packages raise their own subclass
    (``tile.core.ReadOnlyError``, ``tile.frontend.FrozenError``), whose message names the attribute and the fix."""


class FinalClassError(ProtectedError, TypeError):
    """A subclass of a class whose instances Tile's checks trust was defined. Packages raise their own subclass
    (``tile.core.FinalClassError``, ``tile.frontend.FinalClassError``) through `Exact.subclass_error`."""


class Exact(type):
    """Metaclass of the handle classes Tile's checks trust: the class is final and ``isinstance`` is by exact type.

    Final: defining a subclass of an ``Exact`` class raises ``base.subclass_error(qualname)`` (a `FinalClassError`)
    before the subclass exists. A class names its package's error by defining ``subclass_error`` as a classmethod;
    the default raises this package's `FinalClassError`.

    Exact: the builtin ``isinstance`` also reads the object's ``__class__``, which any class can define
    (``__class__ = tile.Tensor``); such a forgery would pass every handle check and report the shape and address it
    liked. Because the classes are final, ``type(instance) is cls`` is the whole test. (CPython tests
    ``type(instance) is cls`` itself before calling ``__instancecheck__``, so a real instance never reaches it.)
    """

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], /, **kwargs: Any) -> Exact:
        for base in bases:
            if isinstance(base, Exact):
                raise base.subclass_error(str(namespace.get("__qualname__", name)))
        return super().__new__(mcs, name, bases, namespace, **kwargs)

    def __instancecheck__(cls, instance: object) -> bool:
        return type(instance) is cls

    def subclass_error(cls, qualname: str) -> FinalClassError:
        """The error for defining a class ``qualname`` that subclasses ``cls`` (overridable by a classmethod)."""
        return FinalClassError(
            f"class {qualname} cannot subclass {cls.__module__}.{cls.__qualname__}: Tile's checks trust what it "
            f"reports, so it cannot be overridden; wrap it in a class of your own (has-a, not is-a)"
        )
