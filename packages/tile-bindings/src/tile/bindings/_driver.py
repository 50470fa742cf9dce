"""Lazy, thread-safe access to ``cuda.bindings.driver`` and the result checker every driver call goes through.

Invariants: the driver library is loaded and ``cuInit`` runs at most once per process, on first use and never
at import; the outcome (module or failure reason) is cached. :func:`driver_available` never raises, whatever
is missing. :func:`check` turns every non-success ``CUresult`` into a :class:`CudaError` naming the call; it
needs no loaded driver to build the error, so error mapping works on machines without a GPU.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

from tile.bindings._errors import CudaError, DriverNotFoundError

__all__ = ["check", "driver", "driver_available", "driver_unavailable_reason", "error_for"]


class _State:
    """The once-per-process outcome of initialisation (a namespace, so no ``global`` rebinding is needed)."""

    lock = threading.Lock()
    module: ModuleType | None = None
    failure: DriverNotFoundError | None = None


_state = _State()


def _initialise() -> ModuleType:
    """Import the bindings and run ``cuInit(0)``; raise DriverNotFoundError (with the cause) on any failure."""
    try:
        module = importlib.import_module("cuda.bindings.driver")
    except ImportError as exc:
        raise DriverNotFoundError(f"cuda-bindings is not installed ({exc}); pip install cuda-bindings") from exc
    try:
        result = module.cuInit(0)
    except Exception as exc:  # the loader raises RuntimeError or OSError subclasses depending on the platform
        raise DriverNotFoundError(f"the driver library could not be loaded ({exc})") from exc
    try:
        check(result, "cuInit")
    except CudaError as exc:
        raise DriverNotFoundError(f"cuInit failed: {exc}") from exc
    return module


def _detached(exc: DriverNotFoundError) -> DriverNotFoundError:
    """``exc`` kept for the process without the tracebacks of it and the exceptions it
    chains: a traceback holds its frames, and through ``f_back`` every caller's frame with its locals. Kept, it kept
    alive for good whatever the first call that looked for the driver had in hand, e.g. the Tile handles of a refused
    ``tk.append_kv``'s caches: their memory could never be partitioned (written by a kernel) again."""
    pending: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while pending:
        e = pending.pop()
        if e is not None and id(e) not in seen:
            seen.add(id(e))
            e.__traceback__ = None
            pending += [e.__cause__, e.__context__]
    return exc


def driver() -> ModuleType:
    """Return ``cuda.bindings.driver`` with the driver initialised.

    Returns
    -------
    module
        The ``cuda.bindings.driver`` module, ready for calls.

    Raises
    ------
    DriverNotFoundError
        When cuda-bindings or the driver is missing, or ``cuInit`` fails (the same error on every call).
    """
    module = _state.module
    if module is not None:
        return module
    return _driver_slow()


def _driver_slow() -> ModuleType:
    with _state.lock:
        if _state.module is None and _state.failure is None:
            try:
                _state.module = _initialise()
            except DriverNotFoundError as exc:
                _state.failure = _detached(exc)
        if _state.failure is not None:
            raise DriverNotFoundError(_state.failure.reason) from _state.failure.__cause__
        assert _state.module is not None
        return _state.module


def driver_available() -> bool:
    """Return True when the CUDA driver loads and initialises; never raises."""
    return driver_unavailable_reason() is None


def driver_unavailable_reason() -> str | None:
    """Return why the driver cannot be used, or None when it can. Never raises."""
    try:
        driver()
    except DriverNotFoundError as exc:
        return exc.reason
    return None


def _result_name(code: int) -> str:
    try:
        from cuda.bindings import driver as module

        return str(module.CUresult(code).name)
    except (ImportError, ValueError):
        return f"CUresult({code})"


def _result_message(code: int) -> str:
    """Ask the driver for its description; it may be absent, so fall back to a neutral text."""
    module = _state.module
    if module is not None:
        try:
            err, text = module.cuGetErrorString(module.CUresult(code))
            if err == 0 and text:
                return text.decode() if isinstance(text, bytes) else str(text)
        except (ValueError, RuntimeError):
            pass
    return "no description (driver not loaded)"


def error_for(code: int, call: str) -> CudaError:
    """Build the :class:`CudaError` for a failed driver call (without raising it).

    Parameters
    ----------
    code : int
        The ``CUresult`` the call returned.
    call : str
        The driver function's name, e.g. ``"cuMemcpyHtoD"``.
    """
    return CudaError(int(code), _result_name(int(code)), _result_message(int(code)), call)


def check(result: Any, call: str) -> Any:
    """Raise :class:`CudaError` unless a driver call succeeded; return its outputs.

    Parameters
    ----------
    result : CUresult or tuple
        What a ``cuda.bindings.driver`` function returned: ``(CUresult, *outputs)`` or a bare ``CUresult``.
    call : str
        The function's name, carried by the error.

    Returns
    -------
    object
        None without outputs, the output itself when there is one, else the tuple of outputs.
    """
    if type(result) is tuple:
        if result[0] != 0:
            raise error_for(result[0], call)
        n = len(result)
        return None if n == 1 else result[1] if n == 2 else result[1:]
    if result != 0:
        raise error_for(result, call)
    return None
