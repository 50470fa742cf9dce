"""Modules loaded from cubins and the kernel functions in them (through ``cuda.core.ObjectCode``).

Invariants: a cubin's architecture is checked against the device before the driver sees it, so a wrong-arch
image fails with :class:`ArchMismatchError` naming both archs; an empty or null image is refused; a missing
kernel name raises ``KeyError``-compatible :class:`LaunchArgumentError` listing nothing it cannot know; parameter
layout (count, sizes) is read once per function from the driver and cached for launch checks.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

import tile.bindings as tb
from tile.core import _reaper
from tile.core._context import Device
from tile.core._cubin import cubin_arch, runs_on
from tile.core._errors import ArchMismatchError, NullHandleError, UseAfterFreeError, factory_error
from tile.core._final import Exact, Frozen
from tile.core._nocopy import Uncopyable
from tile.core._stream import invalidation, use_lock

__all__ = ["Function", "Module"]

_ATTRIBUTES = ("num_regs", "max_threads_per_block", "shared_size_bytes", "local_size_bytes", "const_size_bytes")


class Module(Frozen, Uncopyable, metaclass=Exact):
    """Loaded device code (one cubin) for one device; make it with :meth:`from_cubin` or :meth:`load`.

    Final, and ``device``, ``name`` and ``arch`` are read-only (see ``tile.core._final``).
    """

    _copy_fix = "pass the module itself, or load the cubin again with Module.load(...)"
    _frozen = frozenset({"device", "name", "arch"})

    device: Device
    name: str
    arch: tuple[int, int] | None
    _code: Any
    _functions: dict[str, Function]
    _closed: bool

    def __init__(self) -> None:
        raise factory_error("Module", "Module.from_cubin(data) or Module.load(path)")

    @classmethod
    def from_cubin(cls, data: bytes, *, device: Device | None = None, name: str = "") -> Module:
        """Load a cubin image.

        Raises
        ------
        NullHandleError
            For an empty image.
        ArchMismatchError
            When the cubin targets an architecture ``device`` cannot run.
        """
        image = bytes(data)
        if not image:
            raise NullHandleError("the cubin image is empty: pass the bytes tileiras (or nvcc) produced")
        device = device if device is not None else Device(0)
        arch = cubin_arch(image)
        if arch is not None and not runs_on(arch, device.compute_capability):
            raise ArchMismatchError(
                f"cubin {name or '(in memory)'} was built for sm_{arch[0]}{arch[1]} but {device!r} is "
                f"{device.arch}: recompile it for {device.arch} (tileiras --gpu-name={device.arch})"
            )
        from cuda.core import ObjectCode

        device.make_current()
        self = cls.__new__(cls)
        self.device, self.name, self.arch = device, name, arch
        self._code = ObjectCode.from_cubin(image, name=name)
        self._functions = {}
        self._closed = False
        return self

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, device: Device | None = None) -> Module:
        """Load a cubin file."""
        file = Path(path)
        return cls.from_cubin(file.read_bytes(), device=device, name=str(file))

    def __repr__(self) -> str:
        arch = f"sm_{self.arch[0]}{self.arch[1]}" if self.arch else "unknown arch"
        return f"<Module {self.name or '(in memory)'} ({arch}) on device {self.device.ordinal}>"

    def function(self, name: str) -> Function:
        """Return the kernel called ``name`` (its symbol name in the cubin).

        Raises
        ------
        tile.bindings.CudaError
            ``CUDA_ERROR_NOT_FOUND`` when the cubin has no such kernel.
        """
        if self._closed:
            raise UseAfterFreeError(f"{self!r} was unloaded: load it again")
        found = self._functions.get(name)
        if found is None:
            self.device.make_current()
            try:
                kernel = self._code.get_kernel(name)
            except Exception as exc:
                raise _as_cuda_error(exc, "cuLibraryGetKernel", name) from exc
            found = self._functions[name] = Function._make(self, name, kernel)
        return found

    def unload(self) -> None:
        """Forget the module; its functions can no longer be launched (the driver unloads it when unreferenced)."""
        # Under use_lock: a launch or prepare on another thread comes wholly before (and a prepared launch's guard
        # then sees the invalidation) or after (its kernel read raises) - never with the guard's epoch taken after.
        with use_lock:
            self._closed = True
            for function in self._functions.values():
                function._closed = True
            self._functions.clear()
            invalidation[0] += 1  # prepared launches of its functions recheck them

    def __del__(self) -> None:
        _keep_until_safe(getattr(self, "_code", None))


def _keep_until_safe(held: object) -> None:
    """Inside a host function, keep ``held`` (a cuda.core library or kernel, whose own finalizer unloads the library
    through the driver) alive until the next safe point, where dropping it may call the driver (tile.core._reaper)."""
    try:
        if held is not None and _reaper.deferring():
            _reaper.defer(lambda: held is not None)
    except Exception:  # a finalizer must not raise (interpreter shutdown)
        pass


def _as_cuda_error(exc: Exception, call: str, name: str) -> Exception:
    text = str(exc)
    for result in ("CUDA_ERROR_NOT_FOUND", "CUDA_ERROR_NO_BINARY_FOR_GPU", "CUDA_ERROR_INVALID_IMAGE"):
        if result in text:
            d = _reaper.driver()
            return tb.error_for(int(getattr(d.CUresult, result)), f"{call}({name!r})")
    return exc


class Function(Frozen, Uncopyable, metaclass=Exact):
    """A kernel in a loaded module: its name, parameter layout and attributes.

    Final, and ``module``, ``name`` and ``param_layout`` are read-only: launches check arguments against the layout.
    """

    _copy_fix = "pass the function itself, or get it again with module.function(name)"
    _frozen = frozenset({"module", "name", "param_layout"})

    module: Module
    name: str
    _kernel: Any
    _closed: bool
    # The plan of its latest signature's checked launches (`tile.core._plan`), read by every checked launch: a class
    # default, so the read is a plain attribute one (no lookup that can miss).
    _launch_plan: Any = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise factory_error("Function", "module.function(name)")

    @classmethod
    def _make(cls, module: Module, name: str, kernel: Any) -> Function:
        """The function ``name`` of ``module`` (its ``cuda.core`` kernel); only `Module.function` calls this."""
        self = cls.__new__(cls)
        self.module, self.name, self._kernel, self._closed = module, name, kernel, False
        return self

    def __repr__(self) -> str:
        return f"<Function {self.name} in {self.module!r}>"

    def __del__(self) -> None:
        _keep_until_safe(getattr(self, "_kernel", None))

    @property
    def kernel(self) -> Any:
        """The ``cuda.core.Kernel``; raises once the module was unloaded."""
        if self._closed:
            raise UseAfterFreeError(f"{self!r} belongs to an unloaded module: load it again")
        return self._kernel

    @property
    def cu_function(self) -> Any:
        """The kernel as the ``CUfunction`` that ``cuLaunchKernel`` takes (a ``CUkernel``, launched in the stream's
        context), made once; raises once the module was unloaded."""
        if self._closed:
            raise UseAfterFreeError(f"{self!r} belongs to an unloaded module: load it again")
        handle = self.__dict__.get("_cu_function")
        if handle is None:
            handle = self.__dict__["_cu_function"] = _reaper.driver().CUfunction(int(self._kernel.handle))
        return handle

    @cached_property
    def param_layout(self) -> tuple[tuple[int, int], ...]:
        """``(offset, size)`` in bytes of each kernel parameter, as the driver reports it."""
        self.module.device.make_current()
        return tuple((int(info.offset), int(info.size)) for info in self.kernel.arguments_info)

    @property
    def num_params(self) -> int:
        """Number of kernel parameters."""
        return len(self.param_layout)

    @cached_property
    def attributes(self) -> dict[str, int]:
        """Register count, thread and shared-memory limits of the kernel on its module's device."""
        self.module.device.make_current()
        attrs, ordinal = self.kernel.attributes, self.module.device.ordinal
        # cuda.core exposes these as properties (1.2) or as methods taking a device id (earlier releases).
        values = {name: getattr(attrs, name) for name in _ATTRIBUTES}
        return {name: int(value(ordinal) if callable(value) else value) for name, value in values.items()}
