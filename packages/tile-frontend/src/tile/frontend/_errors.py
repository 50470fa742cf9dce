"""Typed errors of ``tile.frontend``'s runtime: ownership, aliasing, arguments, grids and backends.

Invariants: every class derives from ``tile.bindings.TileError`` (the runtime stack's root) and from the builtin a
caller would catch; each is raised *before* any memory is touched or any handle is moved, so the caller's handles
are still usable after catching it; every message says what happened, where, and what to do. Errors with extra
fields pickle through ``__reduce__``. Kernel-source problems are ``tile.compiler.CompileError`` (toolchain stack).

`InFlight` is the state behind `InFlightError`: the fate a launch gives the handles it hands on before its work is
done (to a ``.then()``/``.map()`` function, or as a graph's output); only a kernel call's own checks admit such a
handle (see ``_handle.check_fate``).
"""

from __future__ import annotations

from typing import Any

import tile.errors
import tile.ir
from tile.bindings import TileError
from tile.errors import Exact

__all__ = [
    "IN_FLIGHT",
    "AliasError",
    "ArgumentError",
    "BackendError",
    "BorrowError",
    "DeviceMismatchError",
    "Exact",
    "FinalClassError",
    "FreedError",
    "FrozenError",
    "GridError",
    "HostMemoryError",
    "InFlight",
    "InFlightError",
    "InternalError",
    "KernelFaultError",
    "MovedError",
    "OwnershipError",
    "TileError",
    "as_kernel_fault",
    "final_class_error",
    "refuse_subclass",
]


class OwnershipError(TileError, ValueError):
    """Base of the errors that enforce the ownership rules (the ownership guide): moved, freed, borrowed, aliased."""


class MovedError(OwnershipError, RuntimeError):
    """A handle was used after it was moved into a launch or a partition.

    Parameters
    ----------
    what : str
        The handle, e.g. ``"Tensor(f32, [1024])"``.
    fate : str
        Where it went, e.g. ``"moved into the launch of add at demo.py:12"``.
    fix : str
        What to use instead.
    """

    def __init__(self, what: str, fate: str, fix: str) -> None:
        self.what, self.fate, self.fix = what, fate, fix
        super().__init__(f"{what} was {fate}; {fix}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.what, self.fate, self.fix))


class InFlightError(MovedError):
    """A handle was used while the launch that handed it on is not done: inside (or escaped from) a ``.then()`` or
    ``.map()`` function, or a graph's output while the graph is open. Only a launch may take it (see ``_launch``)."""


IN_FLIGHT = "inflight"
"""The kind of an `InFlight` fate given to a then/map function (the one object: the launch fast path tests identity)."""


class InFlight(tuple[str, str]):
    """The fate ``(kind, where)`` of a handle a launch handed on before its work was done, with the launch's context.

    ``kind`` is ``"inflight"`` (given to a then/map function: a launch taking it runs after the producer in stream
    order) or ``"captured"`` (the output of a graph capture: it belongs to the graph until ``close()``). The producer's
    release clears it. One instance serves every handle of a launch (and the launches of one call site on one context).
    """

    ctx: Any  # the producer's execution context
    site: str  # the producer's call site (what a cached instance is reused for)

    @classmethod
    def make(cls, kind: str, where: str, ctx: Any, site: str) -> InFlight:
        """The fate of handles lent by the launch at ``site`` on ``ctx``."""
        fate = cls((kind, where))
        fate.ctx, fate.site = ctx, site
        return fate

    def takeable(self) -> bool:
        """Whether a kernel call may take the handle: in flight always, captured only while its capture records."""
        return self[0] is IN_FLIGHT or bool(self.ctx.capturing)


class FrozenError(tile.errors.ReadOnlyError):
    """An attribute that launches were checked against was assigned after the checks (``kernel.unchecked = True``,
    ``tensor.dtype = f64``).

    A ``tile.errors.ReadOnlyError`` (so a `TileError`, a ``tile.errors.ProtectedError`` and an ``AttributeError``),
    as is tile.core's ``ReadOnlyError``."""


def frozen(handle: object, name: str, fix: str) -> FrozenError:
    """The error for assigning ``handle.name``: what launches check must not change under them."""
    return FrozenError(f"{handle!r}.{name} is read-only: launches and partitions were checked against it; {fix}")


class FinalClassError(tile.errors.FinalClassError):
    """A subclass of a class whose instances launches trust (`Tensor`, `Partition`, `Shared`, `Lent`, `Kernel`,
    `Launch`): an override of ``shape``, ``tile_shape`` or ``unchecked`` would change what a launch checked and
    packed, and ``handle.__class__ = Subclass`` would give any live handle the override.

    A ``tile.errors.FinalClassError`` (so a `TileError`, a ``tile.errors.ProtectedError`` and a ``TypeError``), as
    is tile.core's ``FinalClassError``."""


def final_class_error(base: type, qualname: str) -> FinalClassError:
    """The error for defining a class ``qualname`` that subclasses ``base``, one of Tile's final classes.

    The handle classes made with `Exact` (``tile.errors.Exact``: `Tensor`, `Partition`, `Shared`, `Lent`) bind it as
    their ``subclass_error`` classmethod, which the metaclass raises before the subclass exists; their
    ``__init_subclass__`` (and `Kernel`'s and `Launch`'s) raises it too, through `refuse_subclass`.
    """
    return FinalClassError(
        f"class {qualname} cannot subclass tile's {base.__name__}: launches trust what a {base.__name__} "
        f"reports (shapes, strides, tile shapes, the checks it asks for), so it cannot be overridden. Wrap the handle "
        f"in a class of your own (has-a, not is-a) and pass the handle itself to kernels"
    )


def refuse_subclass(cls: type) -> FinalClassError:
    """The error for defining ``cls``, a subclass of one of Tile's final classes (raised by ``__init_subclass__``)."""
    return final_class_error(cls.__mro__[1], cls.__qualname__)


class FreedError(OwnershipError, RuntimeError):
    """A handle was used after its storage was freed with ``.free()``."""


class BorrowError(OwnershipError):
    """A partition was requested while other live handles (views, shares, foreign imports) overlap its memory."""


class UntrackedExportError(OwnershipError, AttributeError):
    """An export Tile could not track was asked for: a device tensor's ``__cuda_array_interface__`` hands out a raw
    pointer and never says when the consumer is done, so a free or a partition could follow while it still reads.
    Also an `AttributeError`, so ``hasattr`` is False and libraries take the DLPack route, which Tile tracks."""


class AliasError(OwnershipError):
    """Two launch arguments overlap in memory and at least one of them is written (a ``Mut`` output)."""


class ArgumentError(TileError, TypeError):
    """A launch argument does not match its parameter: kind, dtype, rank, shape, generic or count."""


class HostMemoryError(TileError, MemoryError):
    """The host could not allocate a tensor (the CPU backend's memory, or a host copy): nothing was made."""


class GridError(TileError, ValueError):
    """The launch grid cannot be determined, or the outputs' partitions disagree about it."""


class BackendError(TileError, RuntimeError):
    """The requested backend cannot run here, or arguments live on a different device than the launch."""


class InternalError(TileError, RuntimeError):
    """Two of Tile's own parts disagreed about a launch (the compiled code's view of an argument and the argument the
    launcher passes): a bug in Tile, not in the kernel. Raised before anything is moved or launched; please report it
    with the kernel and the call."""


class DeviceMismatchError(ArgumentError, BackendError):
    """Tensors that one call needs on one device live on two (a launch's arguments, a collective's tensors, a copy's
    ends): the message names both devices. Move one with ``tensor.to(device)``."""


class KernelFaultError(TileError, RuntimeError):
    """A kernel went wrong while the CPU interpreter ran it: a data race between blocks, a failed ``assert_``, an
    access outside its tensors, an unordered read-modify-write.

    The instance raised is also the interpreter's own error (``tile.ir.interp.DataRaceError``,
    ``KernelAssertionError``, ...), with its fields (both block ids, the element, the source location), so it can
    be caught as either.
    """


_FAULTS: dict[type[tile.ir.TileError], type[tile.ir.TileError]] = {}


def as_kernel_fault(exc: tile.ir.TileError) -> tile.ir.TileError:
    """Make the interpreter's ``exc`` also a `KernelFaultError`, so ``tile.frontend.TileError`` catches it.

    The interpreter lives in tile-ir, which cannot know the runtime stack's root; the frontend, which promises
    one root to its users, re-classes the error in place (same instance, fields, message and traceback) to a
    subclass of both its own class and `KernelFaultError`.
    """
    cls = type(exc)
    fault = _FAULTS.get(cls)
    if fault is None:
        fault = _FAULTS[cls] = type(cls.__name__, (cls, KernelFaultError), {"__module__": cls.__module__})
    exc.__class__ = fault
    return exc
