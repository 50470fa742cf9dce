"""Host time per launch of a small kernel (9 parameters) through five launch paths, in one process on one GPU.

Paths: tile.core (a prepared launch, and the fully checked ``tile.core.launch``), ``cuda.core.launch``, raw
``cuda.bindings`` ``cuLaunchKernel`` with a pre-built parameter array, cuTile Python ``ct.launch``, and
``torch.add``. The first four launch the same cubin: the ``vec_add`` fixture of tile-core's tests (Tile IR bytecode
exported by cuTile Python, assembled here by tileiras for the device); cuTile Python launches its own JIT build of
the same kernel. Each round times ``LAUNCHES`` back-to-back launches (host time only: the queue is drained between
rounds, outside the timed region); rounds alternate between paths and the median round is reported, as
microseconds per launch and as a ratio to cuda.core. Results go to ``benchmarks/results/launch.json``.

Run on a GPU machine from the repository root: ``python benchmarks/bench_launch.py`` (targets: the prepared and the
checked tile.core launch within 1.1x of cuda.core). ``tile.core.launch`` is the compiled one where tile-core's
extension is built (``python packages/tile-core/hatch_build.py``), and then the pure-Python one is timed beside it.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tile.kernels.bench import versions  # the same provenance every benchmark records

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "packages" / "tile-core" / "tests" / "fixtures" / "vec_add.tileirbc"
RESULTS = ROOT / "benchmarks" / "results" / "launch.json"
N, TILE = 1024, 128
LAUNCHES, ROUNDS = 2000, 15
SIGNATURE = ("ptr", "i32", "i32") * 3


def assemble(arch: str) -> bytes:
    import tile.bindings as tb

    found = tb.find_tileiras()
    if found is None:
        sys.exit("tileiras not found: pip install nvidia-cuda-tileiras")
    out = Path(tempfile.mkdtemp()) / "vec_add.cubin"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    subprocess.run([str(found.path), f"--gpu-name={arch}", "-o", str(out), str(FIXTURE)], check=True, env=env)
    return out.read_bytes()


def time_rounds(
    paths: dict[str, tuple[Callable[[], None], Callable[[], None]]], errors: dict[str, str]
) -> dict[str, float]:
    """Median microseconds per launch for each (launch, drain) pair, rounds interleaved across paths.

    A path that fails during warm-up is dropped, with its error recorded in ``errors``.
    """
    for name, (launch_once, drain) in list(paths.items()):  # warm-up: JIT, lazy loading, caches
        try:
            for _ in range(50):
                launch_once()
            drain()
        except Exception as exc:  # one broken peer must not cost the other measurements
            errors[name] = f"{type(exc).__name__}: {exc}"
            del paths[name]
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(ROUNDS):
        for name, (launch_once, drain) in paths.items():
            start = time.perf_counter()
            for _ in range(LAUNCHES):
                launch_once()
            samples[name].append((time.perf_counter() - start) / LAUNCHES * 1e6)
            drain()
    return {name: statistics.median(values) for name, values in samples.items()}


def tile_paths(device: Any, cubin: bytes) -> tuple[dict[str, Any], Any, list[Any]]:
    import tile.core as tc
    from tile.core import _launch

    function = tc.Module.from_cubin(cubin, device=device).function("vec_add")
    stream = device.create_stream()
    x, y, z = (tc.DeviceBuffer.allocate(4 * N, device=device, stream=stream) for _ in range(3))
    args = [x, N, 1, y, N, 1, z, N, 1]
    grid = N // TILE
    prepared = tc.prepare(function, grid, 1, args, stream=stream, signature=SIGNATURE)
    paths = {
        "tile.core prepared": (prepared, stream.synchronize),
        "tile.core launch (checked)": (
            lambda: tc.launch(function, grid, 1, args, stream=stream, signature=SIGNATURE),
            stream.synchronize,
        ),
    }
    if tc.launch is not _launch.launch:  # the compiled launch is in use: time the pure-Python one beside it
        paths["tile.core launch (checked, pure)"] = (
            lambda: _launch.launch(function, grid, 1, args, stream=stream, signature=SIGNATURE),
            stream.synchronize,
        )
    return paths, function, [x, y, z, stream]


def cuda_core_path(function: Any, keep: list[Any]) -> dict[str, Any]:
    from cuda.core import LaunchConfig, launch

    x, y, z, stream = keep
    core_stream = stream._cuda_core()
    config = LaunchConfig(grid=(N // TILE, 1, 1), block=(1, 1, 1))
    kernel = function.kernel
    n, one = np.int32(N), np.int32(1)
    args = (x.ptr, n, one, y.ptr, n, one, z.ptr, n, one)
    return {"cuda.core launch": (lambda: launch(core_stream, config, kernel, *args), stream.synchronize)}


def raw_bindings_path(cubin: bytes, keep: list[Any]) -> dict[str, Any]:
    from cuda.bindings import driver as d

    x, y, z, stream = keep

    def ok(result: Any) -> Any:
        if result[0] != d.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"driver call failed: {result[0]!r}")
        return result[1] if len(result) == 2 else None

    module = ok(d.cuModuleLoadData(cubin))
    func = ok(d.cuModuleGetFunction(module, b"vec_add"))
    values = [
        ctypes.c_uint64(x.ptr),
        ctypes.c_int32(N),
        ctypes.c_int32(1),
        ctypes.c_uint64(y.ptr),
        ctypes.c_int32(N),
        ctypes.c_int32(1),
        ctypes.c_uint64(z.ptr),
        ctypes.c_int32(N),
        ctypes.c_int32(1),
    ]
    pointers = (ctypes.c_void_p * 9)(*(ctypes.addressof(v) for v in values))
    address, raw_stream = ctypes.addressof(pointers), d.CUstream(stream.handle)
    keep += [module, values, pointers]
    grid = N // TILE
    launch = d.cuLaunchKernel
    return {
        "cuda.bindings cuLaunchKernel": (
            lambda: launch(func, grid, 1, 1, 1, 1, 1, 0, raw_stream, address, 0),
            stream.synchronize,
        )
    }


def cutile_and_torch_paths() -> dict[str, Any]:
    try:
        import cuda.tile as ct
        import torch
    except ImportError as exc:
        print(f"skipping cuTile Python / torch: {exc}")
        return {}

    @ct.kernel  # type: ignore[untyped-decorator]  # cuda.tile ships no type information
    def vec_add(x: Any, y: Any, z: Any) -> None:
        bid = ct.bid(0)
        a = ct.load(x, index=(bid,), shape=(TILE,))
        b = ct.load(y, index=(bid,), shape=(TILE,))
        ct.store(z, index=(bid,), tile=a + b)

    x, y, z = (torch.ones(N, dtype=torch.float32, device="cuda") for _ in range(3))
    torch.cuda.synchronize()  # the tensors were filled on the legacy stream
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)  # once, so the timed torch.add carries no stream-switch overhead
    grid = (N // TILE, 1, 1)
    ct.launch(stream, grid, vec_add, (x, y, z))
    stream.synchronize()
    if not torch.equal(z, x + y):
        raise RuntimeError("cuTile Python vec_add gave a wrong result")

    def torch_add() -> None:
        torch.add(x, y, out=z)

    return {
        "cuTile Python ct.launch": (lambda: ct.launch(stream, grid, vec_add, (x, y, z)), stream.synchronize),
        "torch.add": (torch_add, stream.synchronize),
    }


def check_result(prepared: Callable[[], None], keep: list[Any]) -> None:
    x, y, z, stream = keep[:4]
    x.copy_from(np.full(N, 1.5, np.float32), stream=stream)
    y.copy_from(np.full(N, 2.0, np.float32), stream=stream)
    z.fill(0, stream=stream)
    prepared()
    got = np.empty(N, np.float32)
    z.copy_to(got, stream=stream)
    if not (got == 3.5).all():
        raise RuntimeError("tile.core vec_add gave a wrong result")


def main() -> None:
    import tile.bindings as tb
    import tile.core as tc
    from tile.core import _compiled

    device = tc.Device(0)
    cubin = assemble(device.arch)
    paths, function, keep = tile_paths(device, cubin)
    paths.update(cuda_core_path(function, keep))
    paths.update(raw_bindings_path(cubin, keep))
    errors: dict[str, str] = {}
    try:
        paths.update(cutile_and_torch_paths())
    except Exception as exc:  # a peer's setup failing must not cost Tile's own measurements
        errors["cuTile Python / torch setup"] = f"{type(exc).__name__}: {exc}"
    results = time_rounds(paths, errors)
    check_result(paths["tile.core prepared"][0], keep)
    baseline = results["cuda.core launch"]
    print(f"{device.name} ({device.arch}), {LAUNCHES} launches x {ROUNDS} rounds, median host time per launch:")
    for name, micros in results.items():
        print(f"  {name:32s} {micros:7.2f} us   {micros / baseline:5.2f}x cuda.core")
    for name, error in errors.items():
        print(f"  {name:32s} failed: {error}")
    ratio = results["tile.core prepared"] / baseline
    print(f"target tile.core prepared <= 1.10x cuda.core: {'met' if ratio <= 1.10 else 'NOT met'} ({ratio:.2f}x)")
    checked = results["tile.core launch (checked)"] / baseline
    print(
        f"target tile.core launch (checked) <= 1.10x cuda.core: {'met' if checked <= 1.10 else 'NOT met'} "
        f"({checked:.2f}x; tile.core.launch: {_compiled.reason})"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "launch",
        "device": device.name,
        "arch": device.arch,
        "driver_cuda_version": ".".join(map(str, tb.driver_version())),
        "versions": versions(),
        "kernel": "vec_add fixture, 9 parameters (ptr, i32, i32) x 3, grid 8, block 1",
        "launches_per_round": LAUNCHES,
        "rounds": ROUNDS,
        "us_per_launch": results,
        "ratio_to_cuda_core": {name: micros / baseline for name, micros in results.items()},
        "target_met": ratio <= 1.10,
        "checked_target_met": checked <= 1.10,
        "checked_launch_path": _compiled.reason,
        "errors": errors,
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
