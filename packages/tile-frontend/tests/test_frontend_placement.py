"""Device placement on the CPU: naming devices, ``tensor.to``, and the one-device rule of a launch."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tile.frontend as tile
from tile.frontend import f32
from tile.frontend._placement import resolve
from tile.frontend._storage import HOST, Storage
from tile.frontend._tensor import Tensor


@pytest.mark.parametrize("spelling", ["cpu", "host"])
def test_host_spellings(spelling: str) -> None:
    assert resolve(spelling) == HOST
    assert tile.zeros(f32, [4], device=spelling).device == HOST


@pytest.mark.parametrize("bad", [-1, "cuda:x", "tpu", 1.5, True])
def test_bad_device_is_an_argument_error(bad: object) -> None:
    with pytest.raises(tile.ArgumentError, match="is not a device"):
        tile.zeros(f32, [4], device=bad)


def test_missing_gpu_is_a_backend_error() -> None:
    if tile.gpu_available():
        pytest.skip("a GPU is visible: GPU 99 is checked by the multi_gpu tests' count instead")
    with pytest.raises(tile.BackendError, match="GPU 1 is not available"):
        tile.zeros(f32, [4], device=1)


def test_to_host_round_trip_copies() -> None:
    x = tile.arange(f32, 12).reshape(3, 4)
    y = x.to("cpu")
    np.testing.assert_array_equal(y.to_numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert y.data_ptr() != x.data_ptr()  # fresh memory: the two are independent owners
    z = y.partition([4, 4])  # the copy is exclusive: no handle of x overlaps it
    assert not x.moved
    del z


def test_to_copies_a_strided_view_densely() -> None:
    x = tile.arange(f32, 12).reshape(3, 4)
    y = x.T.to("cpu")
    assert y.is_contiguous
    np.testing.assert_array_equal(y.to_numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)


def test_to_reads_only_live_handles() -> None:
    x = tile.ones(f32, [8])
    lent = x.lend()
    with pytest.raises(tile.MovedError, match="lend"):
        x.to("cpu")
    lent.reclaim()


def _elsewhere(values: np.ndarray) -> Tensor:
    """A tensor whose storage claims another device (host bytes under another name): what a second GPU looks like
    to the launch checks, without a GPU."""
    storage = Storage.host_owned(values.nbytes)
    storage.device = "cuda:7"
    assert storage.host is not None
    storage.host[: values.nbytes] = values.view(np.uint8)
    return Tensor._make(storage, f32, values.shape)


def test_launch_on_two_devices_names_both(k: ModuleType) -> None:
    z = tile.zeros(f32, [256]).partition([128])
    x, y = tile.ones(f32, [256]), _elsewhere(np.ones(256, np.float32))
    with pytest.raises(tile.DeviceMismatchError, match=r"'x' on cpu, 'y' on cuda:7") as info:
        k.add(z, x, y)
    assert isinstance(info.value, tile.ArgumentError)
    assert isinstance(info.value, tile.BackendError)  # what callers caught before it had its own class
    assert not z.moved
    assert not x.moved
    assert not y.moved


def test_a_loan_names_the_device_of_its_memory() -> None:
    """Mutant killed (scripts/mutation.py): ``Lent.__repr__``'s device test inverted (a GPU loan shown on cpu)."""
    lent = _elsewhere(np.ones(4, np.float32)).lend()
    assert repr(lent) == "Lent(f32, [4], cuda:7, 0 consumer(s))"
    assert repr(tile.zeros(f32, [4]).lend()) == "Lent(f32, [4], cpu, 0 consumer(s))"
