"""Typed misuse errors of tile.core: each names what was misused, where, and how to fix it.

Invariants: a misuse error is raised before any driver call that would act on the misuse, so nothing has
changed when it propagates; every class derives from ``tile.bindings.TileError`` and from the builtin a caller
would catch; all carry only their message and pickle by the default ``BaseException`` protocol.
"""

from __future__ import annotations

import tile.errors
from tile.bindings import TileError

__all__ = [
    "ArchMismatchError",
    "DoubleFreeError",
    "FactoryError",
    "FinalClassError",
    "HandleCopyError",
    "HostFunctionError",
    "LaunchArgumentError",
    "LayoutMismatchError",
    "NullHandleError",
    "OutOfBoundsError",
    "ReadOnlyError",
    "StateError",
    "StreamClosedError",
    "UntrackedExportError",
    "UseAfterFreeError",
    "WrongDeviceError",
    "WrongTypeError",
]


class UseAfterFreeError(TileError, RuntimeError):
    """A buffer, stream, event or module was used after it was freed or closed."""


class UntrackedExportError(TileError, AttributeError):
    """An export tile.core could not track was asked for: a buffer's or view's ``__cuda_array_interface__`` hands out
    a raw pointer and its consumer (cupy, numba) never says when it is done, so an explicit ``free()`` could release
    the memory while it still reads. Also an ``AttributeError``, so ``hasattr`` is False and libraries take the DLPack
    route, which tile.core tracks (a free waits for the consumer), as tile.frontend's ``UntrackedExportError``."""


def untracked_export_error(what: str) -> UntrackedExportError:
    """The refusal of ``what``'s ``__cuda_array_interface__``; the message says to export through DLPack."""
    return UntrackedExportError(
        f"{what} has no __cuda_array_interface__, an export tile.core does not track (an explicit free() could "
        "release the memory while the consumer still reads it); export through DLPack instead, which tile.core "
        "tracks: cupy.from_dlpack(buf) or torch.from_dlpack(buf)"
    )


class DoubleFreeError(TileError, RuntimeError):
    """Something already freed was freed again."""


class OutOfBoundsError(TileError, IndexError):
    """A view, copy or fill would reach outside the memory it was given."""


class LayoutMismatchError(TileError, ValueError):
    """Sizes, shapes or dtypes of a copy's two sides (or a view's layout) do not agree."""


class WrongDeviceError(TileError, ValueError):
    """Memory or a stream of one device was used with another device."""


class WrongTypeError(TileError, TypeError):
    """An object of a kind the call cannot use was passed: a copy's end that is neither a host array nor device
    memory, a foreign array with no DLPack or ``__cuda_array_interface__``, a stream of an unknown library. The
    message names the type and the kinds that are accepted."""


class FactoryError(WrongTypeError):
    """A handle class was called directly instead of its factory (``DeviceBuffer()`` instead of
    ``DeviceBuffer.allocate(n)``, ``Function(...)`` instead of ``module.function(name)``, ``PreparedLaunch(...)``
    instead of ``prepare(...)``): the factory makes the resource and runs the checks the handle stands for. The
    message names the factory."""


def factory_error(cls: str, factory: str) -> FactoryError:
    """The error for calling ``cls`` directly; ``factory`` says what to call instead."""
    return FactoryError(f"a tile.core {cls} cannot be made directly: use {factory} (it makes and checks the handle)")


class StreamClosedError(UseAfterFreeError):
    """A stream was used after it was closed."""


class NullHandleError(TileError, ValueError):
    """A null pointer or handle was given where a live one is required."""


class ArchMismatchError(TileError, ValueError):
    """A cubin was built for an architecture the device cannot run."""


class LaunchArgumentError(TileError, TypeError):
    """Kernel arguments do not match the kernel (count, kind or value range)."""


class StateError(TileError, RuntimeError):
    """An object is not in a state that allows the call (event never recorded, timing disabled, ...)."""


class HostFunctionError(TileError, RuntimeError):
    """tile.core was asked to call the CUDA driver (allocate, copy, launch, synchronize, ...) from code running inside
    a CUDA host function (``cuLaunchHostFunc``, e.g. the function of ``tile.aio.host_call``), where CUDA forbids every
    driver call: the driver fails it or deadlocks. Raised before the call; the message says to do the work after the
    host function."""


class HandleCopyError(TileError, TypeError):
    """An owning handle (a buffer, stream, event, module, ...) was copied, deep-copied or pickled.

    A copy would be a second owner of one resource: two frees, two closes, or a write racing a pending use. The
    message names the handle and what to do instead.
    """


class ReadOnlyError(tile.errors.ReadOnlyError):
    """An attribute that tile.core's checks read (a buffer's ``nbytes``, a view's ``shape``, a stream's ``handle``, a
    prepared launch's ``buffers``, ...) was assigned or deleted: the checks would then pass on a lie.

    A ``tile.errors.ReadOnlyError`` (so a `TileError`, a ``tile.errors.ProtectedError`` and an ``AttributeError``),
    as is tile.frontend's ``FrozenError``."""


class FinalClassError(tile.errors.FinalClassError):
    """A subclass of a tile.core handle class was defined: an override of ``ptr``, ``nbytes`` or ``shape`` would lie to
    the bounds and lifetime checks, which trust what the handle reports.

    A ``tile.errors.FinalClassError`` (so a `TileError`, a ``tile.errors.ProtectedError`` and a ``TypeError``), as
    is tile.frontend's ``FinalClassError``."""
