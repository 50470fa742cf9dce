"""``python -m tile.frontend.demo``: the README's main demo.

Runs the add example of DESIGN §2 and a few more kernels (SAXPY with a partial edge tile, row softmax, an f16
GEMM) on the GPU when one is visible, else on the CPU interpreter; checks each result against numpy and prints the
backend, one line per kernel, and the two errors the ownership rules give for a reused handle and an aliased
output. Exits non-zero when a result is wrong.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import f16, f32

__all__ = ["main"]

_KERNELS = Path(__file__).with_name("_demo_kernels.tilepy")


def _load_kernels() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("tile.frontend._demo_kernels", str(_KERNELS))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


def _add(k: Any, big: bool) -> str:
    n = 1 << (24 if big else 16)
    x, y = tile.ones(f32, [n]), tile.ones(f32, [n])
    z = tile.zeros(f32, [n]).partition([1024])
    z, x, y = k.add(z, x, y).sync()
    out = z.unpartition().to_numpy()
    _check(out, np.full(n, 2.0))
    return f"add        {n:>10} elements, z = x + y = {out[0]:.0f} everywhere"


def _saxpy(k: Any, big: bool) -> str:
    n = (1 << (24 if big else 16)) + 77
    x, y = tile.randn(f32, [n]), tile.randn(f32, [n])
    expected = 2.0 * x.to_numpy().astype(np.float64) + y.to_numpy()
    z, _, _, _ = k.saxpy(tile.empty(f32, [n]).partition([1024]), 2.0, x, y).sync()
    _check(z.unpartition().to_numpy(), expected, tol=1e-5)
    return f"saxpy      {n:>10} elements (last tile partial, store masked)"


def _softmax(k: Any, big: bool) -> str:
    rows, cols = (4096, 1024) if big else (256, 256)
    x = tile.randn(f32, [rows, cols])
    ref = np.exp(x.to_numpy().astype(np.float64))
    ref /= ref.sum(axis=1, keepdims=True)
    z, _ = k.softmax(tile.empty(f32, [rows, cols]).partition([4, cols]), x).sync()
    _check(z.unpartition().to_numpy(), ref, tol=1e-5)
    return f"softmax    {rows}x{cols} rows"


def _gemm(k: Any, big: bool) -> str:
    size, (bm, bn, bk) = (4096, (128, 128, 64)) if big else (256, (64, 64, 32))
    x, y = tile.randn(f16, [size, size]), tile.randn(f16, [size, size])
    ref = x.to_numpy().astype(np.float64) @ y.to_numpy().astype(np.float64)
    start = time.perf_counter()
    z, _, _, _ = k.gemm(tile.empty(f32, [size, size]).partition([bm, bn]), x, y, BK=bk).sync()
    seconds = time.perf_counter() - start
    _check(z.unpartition().to_numpy(), ref, tol=2e-3)
    return f"gemm f16   {size}x{size}x{size} in {seconds * 1e3:.1f} ms (first call includes compiling)"


def _ownership(k: Any, big: bool) -> str:
    x, y = tile.ones(f32, [1024]), tile.ones(f32, [1024])
    k.add(tile.zeros(f32, [1024]).partition([128]), x, y).sync()
    try:
        x.to_numpy()
    except tile.MovedError as err:
        print(f"  reused handle   -> MovedError: {str(err).split(';')[1].strip()}")
    buffer = np.zeros(1024, np.float32)
    out = tile.from_dlpack(buffer).partition([128])
    try:
        k.add(out, tile.from_dlpack(buffer), tile.ones(f32, [1024], device="cpu"))  # all three on the host
    except tile.BorrowError as err:
        print(f"  aliased output  -> BorrowError: {str(err).split(' (')[0]}: {str(err).split(': ')[1].split(',')[0]}")
    return "ownership  both misuses rejected before anything ran"


def _check(out: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], tol: float = 0.0) -> None:
    if not np.allclose(out, expected, rtol=tol, atol=tol):
        raise SystemExit(f"wrong result: max error {np.abs(out - expected).max()}")


DEMOS: tuple[Callable[[Any, bool], str], ...] = (_add, _saxpy, _softmax, _gemm, _ownership)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; ``--small`` keeps GPU sizes as small as the interpreter's."""
    args = sys.argv[1:] if argv is None else argv
    backend = tile.backend()
    where = "the CPU interpreter (tile.ir.interp)" if backend == "cpu" else _gpu_name()
    print(f"tile demo, backend: {backend} -- kernels run on {where}")
    kernels = _load_kernels()
    big = backend == "gpu" and "--small" not in args
    for demo in DEMOS:
        print(f"{demo(kernels, big)}: OK")
    return 0


def _gpu_name() -> str:
    import tile.bindings as tb

    return f"{tb.device_name(0)} (GPU 0)"


if __name__ == "__main__":
    raise SystemExit(main())
