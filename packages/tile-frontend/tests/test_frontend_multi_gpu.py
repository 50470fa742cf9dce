"""Two GPUs (lead's 2-GPU batch): creation on GPU 1, peer copies, the one-device rule, per-arch compile reuse, and
the NCCL collectives across two processes (torch needed for those).

Run with ``TILE_REQUIRE_MULTI_GPU=1 pytest packages/tile-frontend/tests/test_frontend_multi_gpu.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32

sys.path.insert(0, str(Path(__file__).parent))
from helpers_distributed import run_ranks

pytestmark = [pytest.mark.multi_gpu, pytest.mark.requires_tileiras]
N = 1 << 20


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


def test_create_on_each_device() -> None:
    for spelling in (1, "cuda:1", tile.Device(1)):
        t = tile.arange(f32, 10, device=spelling)
        assert t.device is tile.Device(1)
        np.testing.assert_array_equal(t.to_numpy(), np.arange(10, dtype=np.float32))


def test_new_tensors_follow_tile_aios_default_gpu() -> None:
    """tile.distributed.init makes the rank's GPU the default this way, so one script serves every rank."""
    with aio.use_device(1):
        assert tile.zeros(f32, [4]).device is tile.Device(1)
        assert tile.from_numpy(np.ones(3, np.float32)).device is tile.Device(1)
    assert tile.zeros(f32, [4]).device is tile.Device(0)


@pytest.mark.parametrize(("src", "dst"), [(0, 1), (1, 0), (1, 1)])
def test_peer_copy_round_trip(src: int, dst: int) -> None:
    values = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    x = tile.from_numpy(values, device=src)
    y = x.to(dst)
    assert y.device is tile.Device(dst)
    assert y.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(y.to_numpy(), values)
    np.testing.assert_array_equal(y.to("cpu").to_numpy(), values)
    np.testing.assert_array_equal(tile.from_numpy(values, device="cpu").to(dst).to_numpy(), values)


def test_peer_access_is_enabled_where_possible() -> None:
    d0, d1 = tile.Device(0), tile.Device(1)
    assert d0.enable_peer_access(d1) == d0.can_access_peer(d1)
    assert d0.enable_peer_access(d1) == d0.can_access_peer(d1)  # idempotent


def test_strided_view_copies_to_another_gpu() -> None:
    x = tile.arange(f32, 12, device=0).reshape(3, 4)
    np.testing.assert_array_equal(x.T.to(1).to_numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)


def test_launch_runs_on_its_arguments_device_and_reuses_the_arch_compile(k: ModuleType) -> None:
    args = {
        dev: (tile.zeros(f32, [N], device=dev).partition([1024]), tile.ones(f32, [N], device=dev)) for dev in (0, 1)
    }
    compiled = {dev: k.add.compile(z, x, x) for dev, (z, x) in args.items()}
    if tile.Device(0).arch == tile.Device(1).arch:
        assert compiled[0] is compiled[1]  # one compile per arch; each device loads its own module
    z, _x, _ = k.add(*args[1], args[1][1]).sync()
    assert z.unpartition().device is tile.Device(1)


def test_arguments_on_two_gpus_name_both(k: ModuleType) -> None:
    z = tile.zeros(f32, [N], device=0).partition([1024])
    with pytest.raises(tile.DeviceMismatchError, match=r"'z' on cuda:0, 'x' on cuda:1"):
        k.add(z, tile.ones(f32, [N], device=1), tile.ones(f32, [N], device=0))


def test_nccl_collectives_on_two_gpus() -> None:
    pytest.importorskip("torch")
    outputs = run_ranks(Path(__file__).resolve().parent / "helpers_distributed.py", ["nccl"])
    assert [o.strip().splitlines()[-1] for o in outputs] == ["rank 0 ok", "rank 1 ok"]


def test_one_shot_all_reduce_on_two_gpus() -> None:
    """torch's symmetric-memory one-shot path of small sums: against numpy, against NCCL, captured in a graph."""
    pytest.importorskip("torch")
    outputs = run_ranks(Path(__file__).resolve().parent / "helpers_distributed.py", ["nccl-one-shot"])
    assert [o.strip().splitlines()[-1] for o in outputs] == ["rank 0 ok", "rank 1 ok"]


def test_a_launch_on_a_stream_of_another_gpu_is_refused(k: ModuleType) -> None:
    """Review 44: ``sync_on`` a GPU 1 stream with GPU 0 tensors, and a ``.then`` link of GPU 1 tensors in a chain run
    on GPU 0, are `DeviceMismatchError` (they launched on the wrong GPU with the other GPU's addresses)."""
    z, x = tile.zeros(f32, [N], device=0).partition([1024]), tile.ones(f32, [N], device=0)
    with pytest.raises(tile.DeviceMismatchError, match=r"on cuda:0 but was executed on .*cuda:1"):
        k.add(z, x, x).sync_on(tile.Device(1).create_stream())
    z, x = tile.zeros(f32, [N], device=0).partition([1024]), tile.ones(f32, [N], device=0)
    z1, x1 = tile.zeros(f32, [N], device=1).partition([1024]), tile.ones(f32, [N], device=1)
    with pytest.raises(tile.DeviceMismatchError, match=r"on cuda:1 but was executed on .*cuda:0"):
        k.add(z, x, x).then(lambda out: k.add(z1, x1, x1)).sync()
    z, x = tile.zeros(f32, [N], device=1).partition([1024]), tile.ones(f32, [N], device=1)
    out, _, _ = k.add(z, x, x).sync_on(tile.Device(1).create_stream())  # its own GPU's stream: runs
    np.testing.assert_array_equal(out.unpartition().to_numpy(), np.full(N, 2, np.float32))


class _Claims:
    """Forwards an array's DLPack export but claims another device in ``__dlpack_device__``."""

    def __init__(self, array: tile.Tensor, device: tuple[int, int]) -> None:
        self.array, self.device = array, device

    def __dlpack__(self, **kwargs: object) -> object:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def test_a_dlpack_claim_of_another_gpu_is_refused_by_the_drivers_word() -> None:
    """Review 44: a producer claiming GPU 1 for GPU 0 memory is refused (tile.core asks the driver where the memory
    lives); an honest read-only import reads and moves to the other GPU."""
    from tile import core

    t = tile.from_numpy(np.arange(N, dtype=np.float32), device=0)
    with pytest.raises(core.WrongDeviceError, match="the driver places it on device 0"):
        tile.from_dlpack(_Claims(t, (2, 1)))
    back = tile.from_dlpack(_Claims(t, (2, 0)))
    np.testing.assert_array_equal(back.to(1).to_numpy(), np.arange(N, dtype=np.float32))


def test_a_peer_copy_outlives_a_free_of_its_source_made_before_it_ran() -> None:
    """Review 44 (tile.core): an asynchronous peer copy GPU 0 -> GPU 1, its source freed at once: the free waits for
    the copy (recorded on the source), so the bytes arrive and nothing faults."""
    from tile import core

    values = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    for _ in range(20):
        a = core.DeviceBuffer.from_host(values, device=core.Device(0))
        b = core.DeviceBuffer.allocate(values.nbytes, device=core.Device(1))
        core.copy(b, a, sync=False)
        a.free()
        junk = core.DeviceBuffer.from_host(np.zeros(N, np.float32), device=core.Device(0))  # may reuse a's memory
        np.testing.assert_array_equal(b.view(np.float32, N).to_numpy(), values)
        junk.free()
        b.free()
