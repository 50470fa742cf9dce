"""Lazy initialisation and device queries, against a simulated missing driver and a fake driver module."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from cuda.bindings import driver as cu

import tile.bindings as tb
from tile.bindings import _device, _driver

OK = cu.CUresult.CUDA_SUCCESS


class FakeDriver:
    """Answers the device queries tile.bindings makes, for one H100-like device."""

    CUresult = cu.CUresult
    CUdevice_attribute = cu.CUdevice_attribute
    _ATTRS: ClassVar[dict[Any, int]] = {
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 132,
    }

    def __init__(self) -> None:
        self.init_calls = 0

    def cuInit(self, flags: int) -> tuple[cu.CUresult]:
        self.init_calls += 1
        return (OK,)

    def cuDriverGetVersion(self) -> tuple[cu.CUresult, int]:
        return OK, 13000

    def cuDeviceGetCount(self) -> tuple[cu.CUresult, int]:
        return OK, 1

    def cuDeviceGet(self, ordinal: int) -> tuple[cu.CUresult, int]:
        return OK, ordinal

    def cuDeviceGetAttribute(self, attr: Any, dev: int) -> tuple[cu.CUresult, int]:
        return (OK, self._ATTRS[attr]) if attr in self._ATTRS else (cu.CUresult.CUDA_ERROR_INVALID_VALUE, 0)

    def cuDeviceGetName(self, size: int, dev: int) -> tuple[cu.CUresult, bytes]:
        return OK, b"NVIDIA H100 80GB HBM3".ljust(size, b"\0")

    def cuDeviceTotalMem(self, dev: int) -> tuple[cu.CUresult, int]:
        return OK, 80 * 2**30

    def cuGetErrorString(self, code: cu.CUresult) -> tuple[cu.CUresult, bytes]:
        return OK, b"fake description"


@pytest.fixture
def fresh_driver_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget any cached initialisation for the test, and restore it after."""
    monkeypatch.setattr(_driver._state, "module", None)
    monkeypatch.setattr(_driver._state, "failure", None)


@pytest.fixture
def no_driver(fresh_driver_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(flags: int) -> None:
        raise RuntimeError('"cuda" is an NVIDIA driver library and can only be found via system search')

    monkeypatch.setattr(cu, "cuInit", missing)


@pytest.fixture
def fake_driver(fresh_driver_state: None, monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fake = FakeDriver()
    monkeypatch.setattr(_driver, "_initialise", lambda: fake)
    return fake


def test_import_touches_no_driver() -> None:
    code = "import sys, tile.bindings; print('cuda.bindings.driver' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.usefixtures("no_driver")
def test_missing_driver_is_reported_never_raised() -> None:
    assert tb.driver_available() is False
    assert tb.driver_available() is False
    reason = tb.driver_unavailable_reason()
    assert reason is not None
    assert "could not be loaded" in reason


@pytest.mark.usefixtures("no_driver")
@pytest.mark.parametrize("query", [tb.driver, tb.device_count, tb.driver_version, lambda: tb.device_name(0)])
def test_gpu_apis_without_a_driver_raise_a_clear_error(query: Any) -> None:
    with pytest.raises(tb.DriverNotFoundError, match="needs an NVIDIA GPU") as info:
        query()
    assert isinstance(info.value, RuntimeError)
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.usefixtures("fresh_driver_state")
def test_cuinit_failure_is_driver_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cu, "cuInit", lambda flags: (cu.CUresult.CUDA_ERROR_NO_DEVICE,))
    with pytest.raises(tb.DriverNotFoundError, match="CUDA_ERROR_NO_DEVICE") as info:
        tb.driver()
    assert isinstance(info.value.__cause__, tb.CudaError)


@pytest.mark.usefixtures("fresh_driver_state")
def test_missing_bindings_is_driver_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    with pytest.raises(tb.DriverNotFoundError, match="pip install cuda-bindings"):
        tb.driver()


def test_initialisation_runs_once_across_threads(fresh_driver_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDriver()
    monkeypatch.setattr(cu, "cuInit", fake.cuInit)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(tb.driver())) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.init_calls == 1
    assert results == [cu] * 16


def test_device_queries_through_the_driver(fake_driver: FakeDriver) -> None:
    assert tb.driver_version() == (13, 0)
    assert tb.device_count() == 1
    assert tb.device_name(0) == "NVIDIA H100 80GB HBM3"
    assert tb.compute_capability(0) == (9, 0)
    assert tb.device_attribute(0, "multiprocessor_count") == 132
    assert tb.device_attribute(0, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT") == 132
    assert tb.device_total_memory(0) == 80 * 2**30


@pytest.mark.usefixtures("fake_driver")
@pytest.mark.parametrize("ordinal", [-1, 1, 7, True, 0.0])
def test_bad_ordinal_is_invalid_device(ordinal: Any) -> None:
    with pytest.raises(tb.InvalidDeviceError, match="1 device"):
        tb.device_name(ordinal)


@pytest.mark.usefixtures("fake_driver")
def test_unknown_attribute_is_invalid_device() -> None:
    with pytest.raises(tb.InvalidDeviceError, match="unknown device attribute 'warp_count'"):
        tb.device_attribute(0, "warp_count")


@pytest.mark.usefixtures("fake_driver")
def test_failed_attribute_query_names_the_call() -> None:
    with pytest.raises(tb.CudaError, match="cuDeviceGetAttribute failed with CUDA_ERROR_INVALID_VALUE") as info:
        tb.device_attribute(0, "l2_cache_size")
    assert info.value.message == "fake description"


@pytest.mark.gpu
def test_real_driver_answers() -> None:
    assert tb.driver_available()
    assert tb.driver_version() >= (12, 0)
    count = tb.device_count()
    assert count >= 1
    for ordinal in range(count):
        assert tb.compute_capability(ordinal) >= (8, 0)
        assert tb.device_name(ordinal)
        assert tb.device_total_memory(ordinal) > 2**30
    print(f"[tile.bindings] driver CUDA {tb.driver_version()}, {count} device(s), {tb.device_name(0)}")


class _Refused(Exception):
    pass


def _refuse() -> None:
    raise _Refused("refused by the query guard")


def test_the_query_guard_runs_before_every_query(fake_driver: FakeDriver) -> None:
    """`set_query_guard`: the guard's error stops each query before its driver call; without one they answer."""
    previous = _device._GUARD[0]
    tb.set_query_guard(_refuse)
    try:
        queries: list[Callable[[], object]] = [tb.device_count, tb.driver_version, lambda: tb.device_name(0)]
        queries += [lambda: tb.device_total_memory(0), lambda: tb.compute_capability(0)]
        queries += [lambda: tb.device_attribute(0, "multiprocessor_count")]
        for query in queries:
            with pytest.raises(_Refused, match="refused by the query guard"):
                query()
    finally:
        tb.set_query_guard(previous)
    assert tb.device_count() == 1
