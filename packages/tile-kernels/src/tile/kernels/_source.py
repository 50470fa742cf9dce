"""Loading the kernel-language source files (``*.tilepy``) that sit beside this module.

Kernel source is not a ``.py`` module: its shape strings are const generics bound by the compiler, which typed
Python tools cannot read. Each file is imported once, by path, under ``tile.kernels.<stem>``.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

__all__ = ["kernels", "source_digest"]

_HERE = Path(__file__).resolve().parent
_LOCK = threading.Lock()


def kernels(stem: str) -> ModuleType:
    """Return the module of ``<stem>.tilepy`` (for example ``"_gemm_kernels"``), importing it on first use."""
    name = f"tile.kernels.{stem}"
    with _LOCK:
        module = sys.modules.get(name)
        if module is None:
            loader = importlib.machinery.SourceFileLoader(name, str(_HERE / f"{stem}.tilepy"))
            spec = importlib.util.spec_from_loader(name, loader)
            assert spec is not None
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[name] = module
        return module


@functools.cache
def source_digest(stem: str) -> str:
    """A short sha256 of ``<stem>.tilepy``: autotuning records made for other kernel source are ignored.

    Read once per process, as the module itself is imported once (`kernels`): the digest names the source that runs,
    and the families ask for it on every call."""
    import hashlib

    return hashlib.sha256((_HERE / f"{stem}.tilepy").read_bytes()).hexdigest()[:16]
