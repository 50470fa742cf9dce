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
