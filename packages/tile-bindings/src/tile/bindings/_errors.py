"""The driver's error types, under Tile's one error root.

`TileError` is `tile.errors.TileError`, the root shared with tile-ir (re-exported here, the same class).
Invariants: every exception raised by ``tile.bindings``, ``tile.core`` and ``tile.aio`` derives from
:class:`TileError` and from the builtin a caller would naturally catch; every exception that carries
extra fields pickles through ``__reduce__`` (errors cross process boundaries in workers and tuners).
Messages say what happened, where, and what to do.
"""

from __future__ import annotations

from typing import Any

from tile.errors import TileError

__all__ = ["CudaError", "DriverNotFoundError", "TileError"]

# Hints for the results a user can act on; any other code gets the driver's own message only.
_HINTS: dict[str, str] = {
    "CUDA_ERROR_NO_DEVICE": "no GPU is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES",
    "CUDA_ERROR_INSUFFICIENT_DRIVER": "the installed driver is older than this code needs: upgrade the NVIDIA driver",
    "CUDA_ERROR_OUT_OF_MEMORY": "free device buffers you no longer need, or allocate less",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the cubin was built for another architecture: recompile for this device's arch",
    "CUDA_ERROR_INVALID_IMAGE": "the image is not a valid cubin for this driver: rebuild it with a matching toolchain",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the code needs a newer driver than the one installed",
    # Tile's safe kernels also end this way when a tile-index guard fails (GPU guards fault instead of asserting,
    # because an assert's vprintf slows the whole kernel); the interpreter reports the access, its line and block.
    "CUDA_ERROR_ILLEGAL_ADDRESS": (
        "a kernel accessed memory out of bounds, or a Tile kernel's tile-index guard failed; the context is lost: "
        "restart, and rerun with TILE_DEBUG_GUARDS=1 (the GPU prints which partition access failed and where) or "
        "TILE_INTERPRET=1 (the CPU interpreter reports the access, its line and its block)"
    ),
    "CUDA_ERROR_LAUNCH_FAILED": "a kernel faulted; the context is unusable: restart the process",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "reduce the block size or the registers/shared memory the kernel uses",
    "CUDA_ERROR_INVALID_HANDLE": "the handle was destroyed or belongs to another context",
    "CUDA_ERROR_NOT_FOUND": "the symbol is not in the module: check the kernel's name",
    "CUDA_ERROR_DEINITIALIZED": "the driver is shutting down: do not use CUDA from atexit handlers",
    "CUDA_ERROR_INVALID_CONTEXT": "no context is current on this thread: go through tile.core.Device",
}


class CudaError(TileError, RuntimeError):
    """A CUDA driver call returned something other than ``CUDA_SUCCESS``.

    Parameters
    ----------
    code : int
        The numeric ``CUresult``.
    name : str
        Its enumerator name, e.g. ``"CUDA_ERROR_OUT_OF_MEMORY"``.
    message : str
        The driver's description of the result.
    call : str
        The driver call that failed, e.g. ``"cuMemAllocAsync"``.
    """

    def __init__(self, code: int, name: str, message: str, call: str) -> None:
        self.code = code
        self.name = name
        self.message = message
        self.call = call
        text = f"{call} failed with {name} ({code}): {message}"
        if hint := _HINTS.get(name):
            text += f"; {hint}"
        super().__init__(text)

    @property
    def hint(self) -> str | None:
        """What to do about this result, when there is a known remedy."""
        return _HINTS.get(self.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.name, self.message, self.call))


class DriverNotFoundError(TileError, RuntimeError):
    """No usable CUDA driver on this machine (library missing, or ``cuInit`` failed).

    Parameters
    ----------
    reason : str
        Why the driver cannot be used.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(
            f"the CUDA driver is not usable: {reason}; this needs an NVIDIA GPU with its driver installed "
            "(`python -m tile.bindings` prints what was found)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason,))
