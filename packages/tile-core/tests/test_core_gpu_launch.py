"""GPU: loading the vec_add cubin (assembled by tileiras in the test) and launching it, checked and prepared."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable

import numpy as np
import pytest

import tile.bindings as tb
import tile.core as tc

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]

SIGNATURE = ("ptr", "i32", "i32") * 3
TILE = 128


def vec_args(x: tc.DeviceBuffer, y: tc.DeviceBuffer, z: tc.DeviceBuffer, n: int) -> list[object]:
    return [x, n, 1, y, n, 1, z, n, 1]


def test_function_metadata(vec_add: tc.Function) -> None:
    assert vec_add.num_params == 9
    assert vec_add.param_layout == tc.param_layout(SIGNATURE)
    assert vec_add.attributes["num_regs"] > 0


@pytest.mark.parametrize("n", [1, 128, 1000, 4096])
def test_vec_add_matches_numpy(vec_add: tc.Function, device: tc.Device, n: int) -> None:
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    bx, by = tc.DeviceBuffer.from_host(x, device=device), tc.DeviceBuffer.from_host(y, device=device)
    bz = tc.DeviceBuffer.allocate(4 * n, device=device)
    bz.view(np.float32).fill(np.nan)  # poisoned output
    tc.launch(vec_add, math.ceil(n / TILE), 1, vec_args(bx, by, bz, n), signature=SIGNATURE)
    got = bz.to_numpy(np.float32)
    np.testing.assert_allclose(got.astype(np.float64), x.astype(np.float64) + y, rtol=1e-6)
    for b in (bx, by, bz):
        b.free()


def test_prepared_launch_reuses_its_argument_block(vec_add: tc.Function, device: tc.Device) -> None:
    n = 1024
    ones = tc.DeviceBuffer.from_host(np.ones(n, np.float32), device=device)
    acc = tc.DeviceBuffer.from_host(np.zeros(n, np.float32), device=device)
    step = tc.prepare(vec_add, n // TILE, 1, vec_args(acc, ones, acc, n), signature=SIGNATURE)
    for _ in range(10):
        step()
    np.testing.assert_array_equal(acc.to_numpy(np.float32), np.full(n, 10, np.float32))
    acc.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed"):
        step()
    ones.free()


def test_launch_misuse_is_caught_first(vec_add: tc.Function, device: tc.Device) -> None:
    x = tc.DeviceBuffer.allocate(512, device=device)
    with pytest.raises(tc.LaunchArgumentError, match="takes 9 parameters but 8"):
        tc.launch(vec_add, 1, 1, vec_args(x, x, x, 128)[:8], signature=SIGNATURE[:8])
    with pytest.raises(tc.LaunchArgumentError, match="pass a signature"):
        tc.launch(vec_add, 1, 1, vec_args(x, x, x, 128))
    with pytest.raises(tc.LaunchArgumentError, match="grid"):
        tc.launch(vec_add, 0, 1, vec_args(x, x, x, 128), signature=SIGNATURE)
    closed = device.create_stream()
    closed.close()
    with pytest.raises(tc.StreamClosedError, match="was closed: create a new Stream"):
        tc.launch(vec_add, 1, 1, vec_args(x, x, x, 128), signature=SIGNATURE, stream=closed)
    with pytest.raises(tb.CudaError, match="CUDA_ERROR_NOT_FOUND"):
        vec_add.module.function("no_such_kernel")
    x.free()
    with pytest.raises(tc.UseAfterFreeError, match="was freed: allocate a new buffer"):
        tc.launch(vec_add, 1, 1, vec_args(x, x, x, 128), signature=SIGNATURE)


def test_wrong_arch_cubin_is_refused(device: tc.Device, assemble_vec_add: Callable[[str], bytes]) -> None:
    other = "sm_80" if device.compute_capability[0] != 8 else "sm_90"
    with pytest.raises(tc.ArchMismatchError, match=f"built for {other}"):
        tc.Module.from_cubin(assemble_vec_add(other), device=device)


def test_alloc_launch_free_cycles_leave_memory_flat(
    vec_add: tc.Function, device: tc.Device, gpu_summary: list[str]
) -> None:
    cycles, n = 100_000, 256
    x = tc.DeviceBuffer.from_host(np.ones(n, np.float32), device=device)
    gc.collect()  # buffers dropped by earlier tests are freed now, not in the middle of the measurement
    device.synchronize()
    pool_before, (free_before, _) = device.memory_pool.used_bytes, device.mem_info()
    start = time.perf_counter()
    for _ in range(cycles):
        z = tc.DeviceBuffer.allocate(4 * n, device=device)
        tc.launch(vec_add, 2, 1, vec_args(x, x, z, n), signature=SIGNATURE)
        z.free()
    device.synchronize()
    elapsed = time.perf_counter() - start
    pool_after, (free_after, _) = device.memory_pool.used_bytes, device.mem_info()
    assert pool_after == pool_before
    assert abs(free_after - free_before) <= 64 << 20  # the pool may keep one extra chunk reserved
    x.free()
    gpu_summary.append(
        f"{cycles} alloc/launch/free cycles: {elapsed:.2f} s ({elapsed / cycles * 1e6:.1f} us/cycle), "
        f"pool used {pool_before} -> {pool_after} B, driver free {free_before - free_after:+d} B"
    )
