"""The floor under a safe launch from Python: how much of a small kernel's launch host time is the driver's.

bench_frontend compares Tile's safe launch (checks, moves, op, hand-back) with ``ct.launch``; this benchmark shows
where that comparison's budget goes. In one process on one GPU, with rounds interleaved, it times the same ``add``
launch (1024 elements, Tile's cubin and Tile's packed argument block) through:

- ``cuLaunchKernel`` from a C loop (``launch_floor.c``): the driver alone;
- one C call per launch from Python (``METH_FASTCALL``): the floor of any launcher that makes a Python call per
  launch;
- cuda.bindings' ``cuLaunchKernel``, and tile.core's prepared launch;
- cuTile Python's ``ct.launch`` (its own build of the kernel), and Tile's safe ``.then`` chain, on the compiled launch
  path and (names ending in ``[pure-Python path]``) on the pure-Python one;
- `MinimalModel`: the least a safe launch must do in Python (liveness, aliasing and borrow tests, three moves, the
  pending counts), written flat, around the C call: a lower bound for any pure-Python design;

and, waiting after every launch: a C launch + ``cuStreamSynchronize``, ``ct.launch`` + synchronize, and Tile's
``add(...).sync_on(s)`` and the model with a wait. ``margin_us`` is what ``ct.launch`` spends beyond the driver:
the whole budget a safe launch has for its checks, moves and bookkeeping if it is to be no slower.

The C module is built at run time with the machine's C compiler against the stable ABI, or loaded from
``--shim PATH`` (a build from a machine with the same CPU architecture, any Python 3.10+). Run on the GPU machine
from the repository root: ``python benchmarks/bench_launch_floor.py``. Results: ``benchmarks/results/
launch_floor.json``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import bench_frontend as bf
from bench_frontend import SMALL_N, SMALL_TILE, TileLoop, add

import tile.frontend as tile
from tile.frontend import f32

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "benchmarks" / "launch_floor.c"
RESULTS = ROOT / "benchmarks" / "results" / "launch_floor.json"
LAUNCHES = 2000


def shim() -> ModuleType:
    """The C module: ``--shim PATH`` if given, else built here."""
    if "--shim" in sys.argv:
        path = Path(sys.argv[sys.argv.index("--shim") + 1])
    else:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            sys.exit("no C compiler: build launch_floor.c elsewhere and pass --shim PATH")
        path = Path(tempfile.mkdtemp()) / "launch_floor.abi3.so"
        include = sysconfig.get_paths()["include"]
        command = [cc, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(path), "-ldl"]
        subprocess.run(command, check=True)
    loader = importlib.machinery.ExtensionFileLoader("launch_floor", str(path))
    spec = importlib.util.spec_from_loader("launch_floor", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class _Storage:
    __slots__ = ("freed", "handles", "pending")
    freed: bool
    handles: dict[int, weakref.ref[_Handle]]
    pending: int


class _Handle:
    __slots__ = ("__weakref__", "fate", "span", "storage")
    fate: str | None
    span: tuple[int, int]
    storage: _Storage


def _handle(storage: _Storage, lo: int) -> _Handle:
    h = _Handle()
    h.storage, h.fate, h.span = storage, None, (lo, lo + 4096)
    storage.handles[id(h)] = weakref.ref(h)
    return h


class MinimalModel:
    """The least a safe launch of ``add(z, x, y)`` must do in Python, written flat for speed: test each handle live,
    test the output against the inputs and against other handles on its memory, move the three handles (new
    handles, registry, old ones marked), count the launch as pending, launch; release after the wait. No call sites,
    no op object, no error messages: a lower bound for any pure-Python design, not a usable one."""

    def __init__(self, launch: Any) -> None:
        self.launch = launch
        self.args = [_handle(self._storage(), i * 8192) for i in range(3)]

    @staticmethod
    def _storage() -> _Storage:
        s = _Storage()
        s.freed, s.handles, s.pending = False, {}, 0
        return s

    def call(self, args: list[_Handle]) -> list[_Handle]:
        for h in args:
            if h.fate is not None or h.storage.freed:
                raise RuntimeError("moved or freed")
        lo, hi = args[0].span
        for h in args[1:]:
            if h.span[0] < hi and lo < h.span[1]:
                raise RuntimeError("aliasing")
        if len(args[0].storage.handles) != 1:
            raise RuntimeError("borrowed")
        moved = []
        for h in args:
            new = _Handle()
            new.storage, new.fate, new.span = h.storage, None, h.span
            handles = h.storage.handles
            del handles[id(h)]
            handles[id(new)] = weakref.ref(new)
            h.fate = "moved"
            h.storage.pending += 1
            moved.append(new)
        self.launch()
        return moved

    @staticmethod
    def release(values: list[_Handle]) -> None:
        for h in values:
            h.storage.pending -= 1

    def back_to_back(self, count: int, wait: Any) -> None:
        done = []
        for _ in range(count):
            self.args = self.call(self.args)
            done.append(self.args)
        wait()
        for values in done:
            self.release(values)

    def with_wait(self, wait: Any) -> None:
        self.args = self.call(self.args)
        wait()
        self.release(self.args)


def tile_paths(loop: TileLoop) -> dict[str, tuple[Any, int, int]]:
    """Tile's safe launch back to back and with a wait, on each launch path (the active one under the plain names,
    the pure-Python one with `PURE_LABEL`), switched in-process before each sample."""
    paths: dict[str, tuple[Any, int, int]] = {}
    for path, label in bf.launch_paths():
        chain = bf.on_path(path, lambda: loop.chain(LAUNCHES))
        paths[f"tile .then chain (safe){label}"] = (chain, LAUNCHES, 1)
        paths[f"tile add(...).sync_on(s) (safe){label}"] = (bf.on_path(path, loop.run, 50), 50, LAUNCHES // 200)
    return paths


def main() -> None:
    if tile.backend() != "gpu":
        sys.exit("bench_launch_floor needs a GPU")
    c = shim()
    import tile.bindings as tb

    errors: dict[str, str] = {}
    peers = bf.load_peers(errors)
    stream = bf.tile_stream()
    args = [tile.zeros(f32, [SMALL_N]).partition([SMALL_TILE]), tile.ones(f32, [SMALL_N]), tile.ones(f32, [SMALL_N])]
    loop = TileLoop(add, args, stream)
    loop.run()
    # tile.core's prepared launch of this plan: (kernel, grid..., block..., shared memory, stream, params, extra).
    plan = add._last
    assert plan is not None, "the launch above made a plan"
    assert plan.prepared is not None, "a GPU launch leaves its plan's prepared launch"
    prepared = plan.prepared[3]
    call = prepared._call
    kernel, grid, raw, params = int(call[0]), call[1], int(call[8]), int(call[9])
    d = tb.driver()
    bindings_launch = d.cuLaunchKernel

    def wait() -> None:
        d.cuStreamSynchronize(d.CUstream(raw))

    def repeat(launch_once: Any, finish: Any, count: int = LAUNCHES) -> Any:
        """``count`` launches, then ``finish`` (the wait)."""

        def run() -> None:
            for _ in range(count):
                launch_once()
            finish()

        return run

    paths: dict[str, tuple[Any, int, int]] = {
        "C loop (the driver alone)": (lambda: c.loop(kernel, grid, raw, params, LAUNCHES), LAUNCHES, 1),
        "C call per launch": (repeat(lambda: c.launch(kernel, grid, raw, params), wait), LAUNCHES, 1),
        "cuda.bindings cuLaunchKernel": (repeat(lambda: bindings_launch(*call), wait), LAUNCHES, 1),
        "tile.core prepared": (repeat(prepared, wait), LAUNCHES, 1),
        "C launch + synchronize": (repeat(lambda: c.launch(kernel, grid, raw, params), wait, 1), 1, LAUNCHES // 4),
    }
    paths |= tile_paths(loop)
    model = MinimalModel(lambda: c.launch(kernel, grid, raw, params))
    paths["minimal Python model + C launch"] = (lambda: model.back_to_back(LAUNCHES, wait), LAUNCHES, 1)
    paths["minimal Python model + C launch + synchronize"] = (lambda: model.with_wait(wait), 1, LAUNCHES // 4)
    ct = peers.get("ct")
    if ct is not None:
        ops = bf.Operands(peers.get("torch"))
        x, y, z = (ops.randn((SMALL_N,), f32) for _ in range(3))
        s, ct_kernel, ct_grid = ops.stream, peers["ct_add"], (SMALL_N // SMALL_TILE, 1, 1)

        def ct_once() -> None:
            ct.launch(s, ct_grid, ct_kernel, (x, y, z, SMALL_TILE))

        paths["ct.launch back to back"] = (repeat(ct_once, s.synchronize), LAUNCHES, 1)
        paths["ct.launch + synchronize"] = (repeat(ct_once, s.synchronize, 1), 1, LAUNCHES // 4)
    us = {name: seconds * 1e6 for name, seconds in bf.interleaved(paths, warmup=5).items()}
    for name, value in us.items():
        print(f"  {name:34s} {value:7.2f} us")
    report: dict[str, Any] = {"benchmark": "launch_floor", "device": bf.device_name(), "versions": bf.versions()}
    report |= {"kernel": f"add, {SMALL_N} f32 elements, tiles of {SMALL_TILE}", "us_per_launch": us}
    if ct is not None:
        report["margin_us"] = {
            "back to back: ct.launch over the driver alone": us["ct.launch back to back"]
            - us["C loop (the driver alone)"],
            "with a wait: ct.launch + synchronize over C launch + synchronize": us["ct.launch + synchronize"]
            - us["C launch + synchronize"],
        }
        print(f"margin: {json.dumps(report['margin_us'])}")
    report["errors"] = errors
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
