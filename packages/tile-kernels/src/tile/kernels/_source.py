"""Loading the kernel-language source files (``*.tilepy``) that sit beside this module.

Kernel source is not a ``.py`` module: its shape strings are const generics the compiler binds, which typed Python
tools cannot read. Each file is imported once, by path, under ``tile.kernels.<stem>``.

Programmatic dependent launch (PDL): each file is also imported, on first request, as a second module
``tile.kernels.<stem>_pdl`` in which the module global ``PDL`` (read with `loading_pdl` while the file executes) is
True. Its kernels are ``@tile.entry(pdl=PDL)``: compiled to wait for the kernels before them at entry (so they may be
launched before those end, safe by construction), and their ``if PDL: tile.launch_dependents()`` hints are compiled
in (the compiler resolves module globals at compile time, so the plain module's kernels hold neither op and need no
Tile IR bytecode 13.4). `kernels` hands out the PDL module inside ``with launch_pdl(True)``: a caller such as a model
(`tile.kernels.qwen3.Qwen3(pdl=True)`) chooses per launch, and results are the same either way.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

__all__ = ["kernels", "launch_pdl", "loading_pdl", "pdl_requested", "source_digest"]

_HERE = Path(__file__).resolve().parent
_LOCK = threading.RLock()  # re-entrant: a kernel file imports this module while it loads
_PDL: contextvars.ContextVar[bool] = contextvars.ContextVar("tile_kernels_pdl", default=False)
_LOADING = threading.local()  # .pdl: the module being executed now is the PDL copy


def pdl_requested() -> bool:
    """Whether the library's launches made now use the PDL kernels (inside ``with launch_pdl(True)``)."""
    return _PDL.get()


@contextlib.contextmanager
def launch_pdl(on: object) -> Iterator[None]:
    """Within the block (this thread or task), `kernels` returns the PDL copies of the kernel modules (``on``) or
    the plain ones. Launches already made keep what they were made with."""
    if not isinstance(on, bool):
        from tile.frontend import ArgumentError

        raise ArgumentError(f"launch_pdl({on!r}): pass True or False")
    token = _PDL.set(on)
    try:
        yield
    finally:
        _PDL.reset(token)


def loading_pdl() -> bool:
    """For a kernel file's ``PDL = loading_pdl()``: True while `kernels` executes its PDL copy."""
    return bool(getattr(_LOADING, "pdl", False))


def kernels(stem: str) -> ModuleType:
    """Return the module of ``<stem>.tilepy`` (for example ``"_gemm_kernels"``), importing it on first use: its PDL
    copy inside ``with launch_pdl(True)`` (see the module docstring)."""
    pdl = _PDL.get()
    name = f"tile.kernels.{stem}{'_pdl' if pdl else ''}"
    with _LOCK:
        module = sys.modules.get(name)
        if module is None:
            loader = importlib.machinery.SourceFileLoader(name, str(_HERE / f"{stem}.tilepy"))
            spec = importlib.util.spec_from_loader(name, loader)
            assert spec is not None
            module = importlib.util.module_from_spec(spec)
            _LOADING.pdl = pdl
            try:
                loader.exec_module(module)
            finally:
                _LOADING.pdl = False
            sys.modules[name] = module
        return module


@functools.cache
def source_digest(stem: str) -> str:
    """A short sha256 of ``<stem>.tilepy``: autotuning records made for other kernel source are ignored.

    Read once per process, as the module itself is imported once (`kernels`): the digest names the source that runs,
    and the families ask for it on every call."""
    import hashlib

    return hashlib.sha256((_HERE / f"{stem}.tilepy").read_bytes()).hexdigest()[:16]
