"""Programmatic dependent launch (``prepare(..., pdl=True)``) over the simulated driver: the launch goes through
``cuLaunchKernelEx`` with the programmatic-stream-serialization attribute only when asked, only with the caller's
``unchecked`` promise, and only on sm_90+; every other launch stays the plain ``cuLaunchKernel`` call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as real

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, counting_calls, simulated, sm90_cubin

PROGRAMMATIC = int(real.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated() as driver:
        yield driver


def _vec_add() -> tc.Function:
    return tc.Module.from_cubin(sm90_cubin()).function("vec_add")


def _args(n: int) -> tuple[list[Any], tc.DeviceBuffer]:
    x = tc.DeviceBuffer.from_host(np.arange(n, dtype=np.float32))
    y = tc.DeviceBuffer.from_host(np.ones(n, np.float32))
    z = tc.DeviceBuffer.allocate(4 * n)
    return [x, n, 1, y, n, 1, z, n, 1], z


def _launches(calls: Any) -> dict[str, int]:
    return {name: count for name, count in calls.items() if name.startswith("cuLaunch")}


def test_a_pdl_launch_carries_the_programmatic_attribute_and_computes(sim: SimDriver) -> None:
    fn = _vec_add()
    args, z = _args(300)
    with counting_calls(sim) as calls:  # a prepared launch keeps the driver function it calls: prepare inside
        step = tc.prepare(fn, 3, 1, args, signature=VEC_ADD_SIGNATURE, unchecked=True, pdl=True)
        step()
        step()
    assert _launches(calls) == {"cuLaunchKernelEx": 2, "cuLaunchKernel": 2}  # the simulator's Ex runs its plain launch
    assert sim.kinds("launch_attrs") == [("launch_attrs", (PROGRAMMATIC,))] * 2
    assert [entry[2] for entry in sim.kinds("launch")][-2:] == [(3, 1, 1), (3, 1, 1)]
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(300) + 1)


def test_a_launch_without_pdl_stays_a_plain_launch(sim: SimDriver) -> None:
    fn = _vec_add()
    args, z = _args(64)
    with counting_calls(sim) as calls:
        tc.prepare(fn, 1, 1, args, signature=VEC_ADD_SIGNATURE, unchecked=True)()
    assert _launches(calls) == {"cuLaunchKernel": 1}
    assert sim.kinds("launch_attrs") == []
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(64) + 1)


def test_pdl_needs_the_unchecked_promise_and_a_bool(sim: SimDriver) -> None:
    fn = _vec_add()
    args, _ = _args(64)
    with pytest.raises(tc.LaunchArgumentError, match=r"griddepcontrol\.wait.*unchecked=True"):
        tc.prepare(fn, 1, 1, args, signature=VEC_ADD_SIGNATURE, pdl=True)
    with pytest.raises(tc.LaunchArgumentError, match="must be True or False"):
        tc.prepare(fn, 1, 1, args, signature=VEC_ADD_SIGNATURE, unchecked=True, pdl=1)  # type: ignore[arg-type]
    assert sim.kinds("launch") == []


def test_before_sm90_a_pdl_launch_is_a_plain_launch(sim: SimDriver, monkeypatch: pytest.MonkeyPatch) -> None:
    fn = _vec_add()  # loaded on the simulated sm_90; then the device answers as an sm_80 would
    monkeypatch.setattr(tc.Device, "compute_capability", property(lambda self: (8, 0)))
    assert fn.module.device.compute_capability == (8, 0)
    args, z = _args(64)
    with counting_calls(sim) as calls:
        tc.prepare(fn, 1, 1, args, signature=VEC_ADD_SIGNATURE, unchecked=True, pdl=True)()
    assert _launches(calls) == {"cuLaunchKernel": 1}
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(64) + 1)
