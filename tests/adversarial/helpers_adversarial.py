"""Loading kernel-language modules for the adversarial tests: kernels are source (shape strings are const generics,
undefined for Python and mypy), so they live in a file and are imported by path; error messages point at its lines."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import numpy as np

import tile.compiler as tc
import tile.frontend as tile
from tile import ir

KERNELS = Path(__file__).resolve().parent / "kernels"


def load_path(name: str, path: Path) -> ModuleType:
    """Import the file ``path`` as module ``name`` once (later calls return the same module)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_source(name: str, source: str, folder: Path) -> ModuleType:
    """Write ``source`` to ``folder/<name>.py`` and import it (a fresh module: any earlier one of that name is
    replaced)."""
    path = folder / f"{name}.py"
    path.write_text(source)
    sys.modules.pop(name, None)
    return load_path(name, path)


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Turn a hang into a TimeoutError (SIGALRM; the tests run on the main thread)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def vec(n: int = 128) -> tile.Tensor:
    """``arange(n)`` as an f32 input."""
    return tile.from_numpy(np.arange(n, dtype=np.float32))


def out16() -> tile.Partition:
    """A 16-element f32 output, one tile."""
    return tile.zeros(tile.f32, [16]).partition([16])


def ir_lines(fn: object) -> list[str]:
    """The printed Tile IR of ``fn`` specialized for ``z`` (16,) and ``x`` (128,) (no cache, no cubin)."""
    compiled = tc.compile_kernel(fn, tc.specialize(fn, {"z": (16,), "x": (128,)}), "sm_90", cache=False, cubin=False)
    return ir.print_module(ir.read_bytecode(compiled.bytecode)).splitlines()


FUZZ_SOURCE = """
import tile.compiler.lang as tl
from tile.compiler.lang import Mut, Tensor, f16, f32


def copy32(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tl.load_tile_like(x, z))


def add16(z: Mut[Tensor[f16, "B"]], x: Tensor[f16, -1], y: Tensor[f16, -1]):
    z.store(tl.load_tile_like(x, z) + tl.load_tile_like(y, z))


def looped(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: int):
    acc = tl.load_tile_like(x, z)
    for i in range(n):
        if i < 3:
            acc = acc + acc
    z.store(acc)
"""
"""Three small kernels (f32 copy, f16 add, a loop with a branch) whose compiled bytecode the fuzz reviews mutate;
compile them with ``Specialization.make(consts={"B": 16})``."""


def fuzz_kernels(name: str, folder: Path) -> ModuleType:
    """`FUZZ_SOURCE` loaded as module ``name`` from ``folder`` (set TILE_CACHE_DIR and clear the compiler's memory
    cache first: each test compiles them afresh)."""
    return load_source(name, FUZZ_SOURCE, folder)


class Bomb:
    """Cyclic garbage whose finalizer, on the ``countdown``-th collection that finds it, runs ``fire`` (each earlier
    one leaves a new bomb): with the collector run at every allocation, ``fire`` runs at a chosen allocation."""

    countdown = -1
    fire: Callable[[], None] = staticmethod(lambda: None)

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        if Bomb.countdown <= 0:
            return
        Bomb.countdown -= 1
        if Bomb.countdown == 0:
            Bomb.fire()
        else:
            Bomb()


@contextlib.contextmanager
def fire_at_collection(n: int, fire: Callable[[], None]) -> Iterator[None]:
    """Run the block with the collector at every allocation and ``fire`` run by a finalizer at its ``n``-th
    collection (a finalizer, or another thread's work, landing at a chosen allocation of the code under test)."""
    gc.collect()
    threshold = gc.get_threshold()
    Bomb.countdown, Bomb.fire = n, fire
    Bomb()
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        Bomb.countdown = -1


def spy_destroyed(sim: Any, destroy: str, calls: list[tuple[str, int]]) -> tuple[list[int], list[tuple[str, int]]]:
    """Wrap the simulated driver's ``destroy`` call (``cuStreamDestroy``/``cuEventDestroy``) and each of ``calls``
    (name, position of the handle): the handles destroyed, and every call that named one after its destroy."""
    destroyed: list[int] = []
    on_destroyed: list[tuple[str, int]] = []
    for name, at in [(destroy, 0), *calls]:
        real = getattr(sim, name)

        def call(*args: Any, name: str = name, at: int = at, real: Any = real) -> Any:
            handle = int(args[at])
            if handle in destroyed:
                on_destroyed.append((name, handle))
            if name == destroy:
                destroyed.append(handle)
            return real(*args)

        setattr(sim, name, call)
    return destroyed, on_destroyed
