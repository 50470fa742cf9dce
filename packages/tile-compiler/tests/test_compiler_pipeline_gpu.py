"""On a GPU: a cubin from `compile_kernel` loads, its entry symbol resolves, and a launch packed from its ABI computes
the right answer (raw cuda.bindings, so this checks the compiler's output, not the runtime layers above it)."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.compiler as tc

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

ADD = textwrap.dedent(
    """
    import tile.compiler.lang as tl
    from tile.compiler.lang import Mut, Tensor, f32


    def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
        z.store(tl.load_tile_like(x, z) + tl.load_tile_like(y, z))
    """
)
N, B = 1000, 128  # N not a multiple of B: the last tile is partial and must be masked


def _ok(result: Any) -> Any:
    from cuda.bindings import driver

    err, *rest = result if isinstance(result, tuple) else (result,)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return rest[0] if len(rest) == 1 else rest


@pytest.fixture(scope="module")
def device_arch() -> Iterator[str]:
    from cuda.bindings import driver

    _ok(driver.cuInit(0))
    device = _ok(driver.cuDeviceGet(0))
    context = _ok(driver.cuDevicePrimaryCtxRetain(device))
    _ok(driver.cuCtxSetCurrent(context))
    attr = driver.CUdevice_attribute
    major = _ok(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = _ok(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
    yield f"sm_{major}{minor}"
    _ok(driver.cuDevicePrimaryCtxRelease(device))


def _slot_value(slot: tc.AbiSlot, arrays: dict[str, tuple[int, np.ndarray]]) -> np.ndarray:
    pointer, host = arrays[slot.param]
    if slot.role == "base":
        return np.array([pointer], dtype=np.uint64)
    value = host.shape[slot.axis] if slot.role == "shape" else host.strides[slot.axis] // host.itemsize
    return np.array([value], dtype=np.int32 if slot.dtype == "i32" else np.int64)


def test_compiled_add_runs_and_masks_the_partial_tile(device_arch: str, tmp_path: Path) -> None:
    from cuda.bindings import driver

    source = tmp_path / "tile_gpu_add.py"
    source.write_text(ADD)
    spec = importlib.util.spec_from_file_location("tile_gpu_add", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = tc.compile_kernel(module.add, tc.Specialization.make(consts={"B": B}), device_arch)
    assert kernel.cubin is not None

    cu_module = _ok(driver.cuModuleLoadData(kernel.cubin))
    function = _ok(driver.cuModuleGetFunction(cu_module, kernel.entry.encode()))
    rng = np.random.default_rng()
    hosts = {"x": rng.standard_normal(N).astype(np.float32), "y": rng.standard_normal(N).astype(np.float32)}
    hosts["z"] = np.full(N, np.nan, dtype=np.float32)
    arrays: dict[str, tuple[int, np.ndarray]] = {}
    poison = np.full(N + B, np.nan, np.float32)  # kept alive: the driver copies from its address
    for name, host in hosts.items():  # every buffer is poisoned one tile past its end, to catch overruns
        pointer = int(_ok(driver.cuMemAlloc(host.nbytes + B * 4)))
        _ok(driver.cuMemcpyHtoD(pointer, poison.ctypes.data, poison.nbytes))
        _ok(driver.cuMemcpyHtoD(pointer, host.ctypes.data, host.nbytes))
        arrays[name] = (pointer, host)
    values = [_slot_value(slot, arrays) for slot in kernel.abi.slots]
    params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
    grid = -(-N // B)
    _ok(driver.cuLaunchKernel(function, grid, 1, 1, 1, 1, 1, 0, 0, params.ctypes.data, 0))
    _ok(driver.cuCtxSynchronize())
    out = np.empty(N + B, dtype=np.float32)
    _ok(driver.cuMemcpyDtoH(out.ctypes.data, arrays["z"][0], out.nbytes))
    expected = hosts["x"].astype(np.float64) + hosts["y"].astype(np.float64)
    np.testing.assert_allclose(out[:N], expected, rtol=1e-6, atol=1e-6)
    assert np.isnan(out[N:]).all(), "the partial last tile wrote past the end of the output"
    for pointer, _ in arrays.values():
        _ok(driver.cuMemFree(pointer))
    _ok(driver.cuModuleUnload(cu_module))
