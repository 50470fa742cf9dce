"""Review 44: multi-device placement (issue 19's first part), attacked from safe code: ``tile.zeros(..., device=1)``,
``tile.Device(i)``, ``tensor.to(device)``, launches on their arguments' device, per-arch compile caches, peer copies,
streams and events of one device with another's memory, contexts per device, DLPack imports and ``tile.distributed``
placement. Two GPUs are simulated: tile.core's simulated driver (``tile.core.testing``, ``simulated(2)``) already
modelled several devices (a context, streams and a pool per ordinal); this review made it remember each allocation's
device and note a kernel enqueued on one device's stream that touches another's memory, and answer pointer queries
(``cuPointerGetAttribute``'s device ordinal) from its allocations; a test gives GPU 1 another compute capability.
Frontend launches run over it with bytecode-only compiles and a numpy body (as test_frontend_launch_calls.py), on
both launch paths. Each hole's test names it, failed before its fix and asserts the typed error.

Holes found and fixed:

- a launch executed on a stream of another device than its tensors': ``add(z, x, y).sync_on(s)`` with the tensors on
  GPU 0 and ``s`` a GPU 1 stream loaded the module on GPU 1 and launched it there with GPU 0's addresses (the frontend
  hands tile.core its checked addresses as numbers, so tile.core's own device check of buffers never saw them); the
  same for a ``.then()`` link of GPU 1 tensors in a chain run on GPU 0, and (by reading: the simulator has no graphs)
  a launch captured on another device's stream. Collectives refused this; launches now raise `DeviceMismatchError`
  before anything is enqueued (`tile.frontend._launch._require_device`, on the pure path, which prepares every new
  (plan, stream) pair: the compiled path only relaunches a prepared launch on the same stream). A launch of raw
  pointers and scalars only (an unchecked kernel) still runs on the stream it is given.
- a DLPack import placed where the producer said, not where the memory is: cuda.core takes the device from
  ``__dlpack_device__``, which a plain Python wrapper forwarding a GPU 0 tensor's export can answer ``(2, 1)``: the
  import was a tensor "on GPU 1" over GPU 0 memory (its launches with other GPU 1 tensors passed the one-device
  check). tile.core's ``borrow`` now asks the driver (``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``; managed memory and
  memory the driver does not know are left as named) and raises `WrongDeviceError`.
- ``enable_one_shot`` allocated torch's symmetric staging buffer on torch's *current* device, not the group's: a
  process that switched torch's device after ``init(device=0)`` staged its GPU 0 all-reduces in GPU 1's memory. It
  goes on the group's device now (torch-free test: a stand-in records the placement).
- ``tile.distributed.init("nccl", device="cpu")`` raised an AttributeError (``"cpu".ordinal``) and a ``LOCAL_RANK``
  that is not an ordinal int()'s ValueError; both are `ArgumentError` now, before torch's device is set.

Bug fixed on the way: an import whose producer exported it read-only (a Tile tensor's export re-offered) could not be
read: ``to_numpy()`` and ``.to(device)`` made a writable view of it, which tile.core refused (LayoutMismatchError).

Tried and found solid (tests below where cheap, else reasoned):

- ``tile.Device(-1)``, ``Device(2**31)``, ``Device(2**64)``, ``Device(True)``, numpy bools, floats, strings and an int
  subclass lying in ``__index__``/``__int__``/comparisons: tile.bindings' InvalidDeviceError (``tile.zeros(...,
  device=...)``: ArgumentError or BackendError), the ordinal taken as the exact int; no allocation, no Device made.
- per-arch compiles: GPU 0 sm_90 and GPU 1 sm_100 compile once each (the layout key holds the device, the compile
  cache the target), each device loads its own module (keyed by ordinal); an sm_90 cubin is never loaded on the
  sm_100 (tile.core's ArchMismatchError would refuse it anyway).
- peer copies: ``copy(b1, a0, sync=False)`` then a free of either side before the copy ran is ordered after it
  (recorded on both buffers); peer access is enabled both ways first; ``.to(device)`` is a blocking copy on the
  destination's home stream ordered after the source's, of a live handle only (moved, lent, partitioned or in-flight
  sources are refused by ``_check``, see test_frontend_placement.py).
- contexts: a free of GPU 1 memory (explicit or by its finalizer) while GPU 0's context is current is called with
  GPU 1's context current and enqueued on a GPU 1 stream (removing ``make_current`` fails the test); deferred
  releases run through the same ``_run``; module loads, function attributes and pools make their device current.
- streams and events of one device with another's memory: a copy or fill of GPU 0 memory on a GPU 1 stream, a GPU 0
  kernel given a GPU 1 buffer or a GPU 1 stream, a GPU 1 allocation on a GPU 0 stream and a GPU 0 event recorded on a
  GPU 1 stream are `WrongDeviceError` before the driver; a GPU 1 stream waiting for a GPU 0 event is allowed.
- a DLPack producer whose capsule is honest but whose ``__dlpack_device__`` names GPU 0 for GPU 0 memory imports
  normally; graph replays take no new tensors (``graph_write`` copies into a captured tensor through tile.core's
  copy, whose stream must be of one of the copy's devices), and a graph's launch on another device's context is
  refused by tile.aio (``CudaGraphExec.replay`` checks ``ctx.device``).
- ``tile.distributed``'s collectives check every tensor's device against the group's and the context's device
  against the tensors' (they did before this review).

GPU tests for the lead (two GPUs): ``TILE_REQUIRE_MULTI_GPU=1 pytest packages/tile-frontend/tests/
test_frontend_multi_gpu.py`` (three tests added by this review).
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from helpers_adversarial import load_source

import tile.core as tc
import tile.frontend as tile
import tile.frontend.distributed as d
from tile.compiler import compile_kernel
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver, SimKernel, simulated, sm90_cubin
from tile.frontend import _entry, _execute, f32

N, B = 256, 128

KERNELS = """
import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))
"""


def _floats(ptr: int, n: int) -> np.ndarray[Any, Any]:
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr))


def _add_body(values: tuple[int, ...], grid: tuple[int, int, int]) -> tuple[list[tuple[int, int]], Any]:
    z, nz, _, x, _, _, y, _, _ = values
    n = min(nz, grid[0] * B)

    def run() -> None:
        _floats(z, n)[:] = _floats(x, n) + _floats(y, n)

    return [(z, 4 * n), (x, 4 * n), (y, 4 * n)], run


def _cubin(arch: str) -> bytes:
    """The simulator's stand-in cubin, its ELF header naming ``arch`` (``"sm_90"``, ``"sm_100"``)."""
    image = bytearray(sm90_cubin())
    struct.pack_into("<I", image, 48, int(arch.removeprefix("sm_")) << 8)
    return bytes(image)


def _second_gpu_is(sim: SimDriver, major: int, minor: int) -> None:
    """GPU 1 of the simulator reports compute capability ``major.minor`` (GPU 0 stays sm_90)."""
    answer = sim.cuDeviceGetAttribute

    def attribute(attr: Any, dev: Any) -> tuple[Any, int]:
        name = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_")
        if int(dev) == 1 and name in ("MAJOR", "MINOR"):
            return answer(attr, dev)[0], major if name == "MAJOR" else minor
        return answer(attr, dev)

    sim.cuDeviceGetAttribute = attribute  # type: ignore[method-assign]


@pytest.fixture
def k(tmp_path: Path) -> ModuleType:
    return load_source("review44_kernels", KERNELS, tmp_path)


@pytest.fixture
def sim2(monkeypatch: pytest.MonkeyPatch, k: ModuleType) -> Iterator[SimDriver]:
    with simulated(2, asynchronous=True) as sim:
        sim.eagerness = 0.0
        sim.add_kernel(SimKernel("add", ["ptr", "i32", "i32"] * 3, _add_body))
        compiled_for: list[str] = []

        def compile_for_sim(fn: Any, spec: Any, target: Any, **kwargs: Any) -> Any:
            compiled = compile_kernel(fn, spec, target, cubin=False, **kwargs)
            if target.arch == "cpu":
                return compiled
            compiled_for.append(target.arch)
            return dataclasses.replace(compiled, cubin=_cubin(target.arch))

        monkeypatch.setattr(_entry, "compile_kernel", compile_for_sim)
        monkeypatch.setattr(_execute, "_modules", {})
        monkeypatch.setattr(_execute, "_prepared", {})
        sim.compiled_for = compiled_for  # type: ignore[attr-defined]
        tile.set_backend("gpu")
        try:
            yield sim
        finally:
            tile.set_backend("cpu")
            gc.collect()
    assert sim.bugs == [], sim.bugs


def _operands(device: tc.Device) -> list[Any]:
    return [
        tile.zeros(f32, [N], device=device).partition([B]),
        tile.from_numpy(np.arange(N, dtype=np.float32), device=device),
        tile.ones(f32, [N], device=device),
    ]


def test_a_launch_on_a_stream_of_another_device_is_refused(sim2: SimDriver, path: str, k: ModuleType) -> None:
    """Hole: ``add(z, x, y).sync_on(s)`` with the tensors on GPU 0 and ``s`` a stream of GPU 1 loaded the module on
    GPU 1 and launched it there with GPU 0's addresses (the frontend hands tile.core checked numbers, so tile.core's
    own device check of buffers never saw them): the kernel read and wrote another GPU's memory, unordered with its
    frees. A collective refused this; a launch now raises `DeviceMismatchError` before anything is enqueued, and a
    stream of the right device still runs it."""
    z, x, y = _operands(tc.Device(0))
    other = tc.Device(1).create_stream()
    op = k.add(z, x, y)
    with pytest.raises(tile.DeviceMismatchError, match=r"on cuda:0 but was executed on .*cuda:1"):
        op.sync_on(other)
    assert sim2.kinds("launch") == []  # nothing ran on GPU 1
    del op
    z, x, y = _operands(tc.Device(0))
    z, x, y = k.add(z, x, y).sync_on(tc.Device(0).create_stream())
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(N) + 1)
    [(_, stream, _)] = sim2.kinds("launch")
    assert sim2.stream_devices[stream] == 0


def _fake_torch(monkeypatch: pytest.MonkeyPatch, current: int) -> list[Any]:
    """A torch stand-in that records where the one-shot buffer is allocated; torch's current device is ``current``."""
    placed: list[Any] = []

    def empty(n: int, dtype: object, device: object) -> object:
        placed.append(device)
        return SimpleNamespace(nbytes=n)

    symm = SimpleNamespace(empty=empty, rendezvous=lambda buffer, name: None)
    dist = SimpleNamespace(group=SimpleNamespace(WORLD=SimpleNamespace(group_name="world")), _symmetric_memory=symm)
    torch = SimpleNamespace(
        distributed=dist,
        ops=SimpleNamespace(symm_mem=SimpleNamespace(one_shot_all_reduce_copy_out=object())),
        uint8="uint8",
        device=lambda kind, index: (kind, index),
        cuda=SimpleNamespace(current_device=lambda: current, set_device=placed.append),
    )
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # (init sets them when unset: restored after the test)
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    for name, module in (("torch", torch), ("torch.distributed", dist), ("torch.distributed._symmetric_memory", symm)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(d._State, "torch", torch)
    return placed


def test_the_one_shot_buffer_goes_on_the_groups_gpu_not_torchs_current_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hole: ``enable_one_shot`` allocated the symmetric staging buffer on ``torch.cuda.current_device()``: a process
    whose group runs on GPU 0 (``init(device=0)``) and that switched torch's current device afterwards (or a library
    that did) got the buffer on GPU 1, and every one-shot all-reduce of its GPU 0 tensors staged them in another
    GPU's memory. The buffer now goes on the group's device. (torch-free: a stand-in records the placement; the
    numerics on two GPUs are test_frontend_multi_gpu.py's.)"""
    with simulated(2):
        placed = _fake_torch(monkeypatch, current=1)
        monkeypatch.setattr(d._State, "group", d.Group(0, 2, tc.Device(0), "nccl"))
        monkeypatch.setattr(d._State, "one_shot", None)
        d.enable_one_shot(1024, unchecked=True)
        assert placed == [("cuda", 0)]
        assert d._State.one_shot is not None
        assert d._State.one_shot.capacity == 1024


@pytest.mark.parametrize(
    ("device", "local_rank"), [("cpu", None), ("host", None), (None, "abc"), (None, "-1"), (None, "1.0"), (None, "")]
)
def test_an_nccl_group_on_no_gpu_is_refused_before_torch_is_touched(
    monkeypatch: pytest.MonkeyPatch, device: object, local_rank: str | None
) -> None:
    """Hole (an untyped error, found torch-free): ``init("nccl", device="cpu")`` resolved the device to the host and
    then read ``.ordinal`` of the string "cpu" (AttributeError); a ``LOCAL_RANK`` that is not an ordinal raised
    int()'s ValueError. Both are `ArgumentError` now, before torch's device is set or a group joined."""
    with simulated(2):
        placed = _fake_torch(monkeypatch, current=0)
        if local_rank is None:
            monkeypatch.delenv("LOCAL_RANK", raising=False)
        else:
            monkeypatch.setenv("LOCAL_RANK", local_rank)
        with pytest.raises(tile.ArgumentError, match=r"is not a device|NCCL runs on a GPU"):
            d.init("nccl", device=device)
        assert placed == []


def test_a_chain_link_on_another_device_is_refused(sim2: SimDriver, path: str, k: ModuleType) -> None:
    """Hole (the class of the first): a ``.then()`` link runs on its chain's context, so a link launching GPU 1
    tensors in a chain run on GPU 0 (``.sync()`` picks the first launch's device) ran on GPU 0 with GPU 1's addresses
    (the simulator notes the kernel touching another device's memory). Refused with `DeviceMismatchError`."""
    ones = _operands(tc.Device(1))
    op = k.add(*_operands(tc.Device(0))).then(lambda out: k.add(*ones))
    with pytest.raises(tile.DeviceMismatchError, match=r"on cuda:1 but was executed on .*cuda:0"):
        op.sync()
    del op
    assert [sim2.stream_devices[s] for _, s, _ in sim2.kinds("launch")] == [0]  # only the first link ran


def test_each_arch_gets_its_own_compile_and_each_device_its_own_module(
    sim2: SimDriver, path: str, k: ModuleType
) -> None:
    """Tried and held: GPU 0 an sm_90, GPU 1 an sm_100. The compile cache is keyed by the target arch (the layout
    key holds the device), so GPU 1's launch compiles for sm_100 rather than reusing the sm_90 cubin (whose load
    there tile.core would refuse with ArchMismatchError), and the module cache is keyed by the device ordinal. A
    second launch on either GPU compiles nothing more."""
    _second_gpu_is(sim2, 10, 0)
    assert tc.Device(1).arch == "sm_100"
    for device in (0, 1, 0, 1):
        z, _, _ = k.add(*_operands(tc.Device(device))).sync()
        np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(N) + 1)
        assert z.device is tc.Device(device)
    assert sim2.compiled_for == ["sm_90", "sm_100"]
    assert [sim2.stream_devices[s] for _, s, _ in sim2.kinds("launch")] == [0, 1, 0, 1]
    assert sorted(ordinal for _, ordinal in _execute._modules) == [0, 1]


@pytest.fixture
def two() -> Iterator[SimDriver]:
    """tile.core over two simulated GPUs, lazily asynchronous; no driver bug at the end."""
    with simulated(2, asynchronous=True) as sim:
        sim.eagerness = 0.0
        yield sim
        gc.collect()
    assert sim.bugs == [], sim.bugs


@pytest.mark.parametrize("freed", ["source", "destination"])
def test_a_peer_copy_outlives_a_free_of_either_side_made_before_it_ran(two: SimDriver, freed: str) -> None:
    """Tried and held: ``copy(b1, a0, sync=False)`` between GPUs queues ``cuMemcpyPeerAsync`` on GPU 1's stream and
    records it on both buffers; a ``free()`` of either at once (before the copy ran) is ordered after it: the
    simulator sees no free under queued work and the bytes arrive."""
    a = tc.DeviceBuffer.from_host(np.arange(64, dtype=np.float32), device=tc.Device(0))
    b = tc.DeviceBuffer.allocate(256, device=tc.Device(1))
    tc.copy(b, a, sync=False)
    assert two.pending(), "the copy ran at once: the simulator is not asynchronous"
    (a if freed == "source" else b).free()
    if freed == "source":
        np.testing.assert_array_equal(b.view(np.float32, 64).to_numpy(), np.arange(64, dtype=np.float32))
    tc.Device(0).synchronize()
    tc.Device(1).synchronize()
    assert [entry[1] for entry in two.kinds("copy") if entry[1] == "Peer"] == ["Peer"]
    assert ("peer_access", 0xC0) in two.log  # peer access was enabled both ways before the copy
    assert ("peer_access", 0xC1) in two.log


def test_a_free_goes_to_its_own_device_whatever_context_is_current(two: SimDriver) -> None:
    """Tried and held: GPU 1's buffer freed (explicitly, or by its finalizer) while GPU 0's context is current on
    the thread: the free is enqueued on a stream of GPU 1, and the thread's context is GPU 1's when the free is
    called (tile.core makes the buffer's device current)."""
    seen: list[int] = []
    free = two.cuMemFreeAsync

    def spy(ptr: Any, stream: Any) -> tuple[Any]:
        seen.append(int(two.cuCtxGetCurrent()[1]))
        return free(ptr, stream)

    two.cuMemFreeAsync = spy  # type: ignore[method-assign]
    for drop in ("free", "finalizer"):
        buffer = tc.DeviceBuffer.allocate(64, device=tc.Device(1))
        tc.Device(0).make_current()
        if drop == "free":
            buffer.free()
        else:
            del buffer
            gc.collect()
        tc.Device(1).synchronize()
    assert seen == [0xC1, 0xC1]
    assert [two.stream_devices[entry[2]] for entry in two.kinds("free")] == [1, 1]


def test_streams_and_events_of_one_device_with_memory_of_another(two: SimDriver) -> None:
    """Tried and held: a stream of GPU 1 for a copy or fill of GPU 0 memory, a launch of a GPU 0 module with a GPU 1
    buffer or on a GPU 1 stream, a GPU 1 buffer allocated on a GPU 0 stream, and a GPU 0 event recorded on a GPU 1
    stream are `WrongDeviceError` before the driver (a GPU 1 stream waiting for a GPU 0 event is allowed, as in
    CUDA)."""
    d0, d1 = tc.Device(0), tc.Device(1)
    a, b = tc.DeviceBuffer.allocate(512, device=d0), tc.DeviceBuffer.allocate(512, device=d0)
    other = tc.DeviceBuffer.allocate(512, device=d1)
    s1 = d1.create_stream()
    function = tc.Module.from_cubin(sm90_cubin(), device=d0).function("vec_add")
    attempts: list[Callable[[], object]] = [
        lambda: tc.copy(a, b, stream=s1),
        lambda: a.view(np.float32, 128).fill(1.0, stream=s1),
        lambda: tc.launch(function, 1, 128, [a, 128, 1, b, 128, 1, other, 128, 1], signature=VEC_ADD_SIGNATURE),
        lambda: tc.launch(function, 1, 128, [a, 128, 1, b, 128, 1, a, 128, 1], stream=s1, signature=VEC_ADD_SIGNATURE),
        lambda: tc.DeviceBuffer.allocate(64, device=d1, stream=d0.default_stream),
        lambda: d0.create_event().record(s1),
    ]
    before = len(two.log)
    for attempt in attempts:
        with pytest.raises(tc.WrongDeviceError, match=r"device 0|device 1|device\(s\)"):
            attempt()
    assert not [e for e in two.log[before:] if e[0] in ("launch", "copy", "memset", "alloc")]
    event = d0.create_event()
    event.record(d0.default_stream)
    s1.wait(event)  # cross-device waits are fine


class _Claims:
    """Forwards an array's DLPack export but claims another device in ``__dlpack_device__``."""

    def __init__(self, array: Any, device: tuple[int, int]) -> None:
        self.array, self.device = array, device

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


@pytest.mark.parametrize("claim", [(2, 1), (2, 0)], ids=["other-gpu", "own-gpu"])
def test_a_dlpack_import_is_placed_on_the_device_its_memory_is_on(sim2: SimDriver, claim: tuple[int, int]) -> None:
    """Hole: cuda.core takes a DLPack producer's device from its ``__dlpack_device__``, and tile.core trusted it: a
    plain Python wrapper forwarding a GPU 0 tensor's export while claiming GPU 1 was imported as a tensor "on GPU 1"
    (its reads, copies and launches then ran on GPU 1's streams, and a launch with other GPU 1 tensors passed the
    one-device check: a GPU 1 kernel on GPU 0 memory). tile.core now asks the driver where the memory lives
    (``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``; the simulator answers from its allocations) and refuses a claim of
    another device with `WrongDeviceError`.

    Bug fixed on the way: an import its producer exported read-only (a Tile tensor's export, re-offered) could not
    be read: ``to_numpy()`` and ``.to(device)`` made a writable view of it, which tile.core refused
    (LayoutMismatchError). They read through a read-only view now."""
    t = tile.from_numpy(np.arange(8, dtype=np.float32), device=tc.Device(0))
    if claim[1] == 1:
        with pytest.raises(tc.WrongDeviceError, match="the driver places it on device 0"):
            tile.from_dlpack(_Claims(t, claim))
        return
    back = tile.from_dlpack(_Claims(t, claim))
    assert back.device is tc.Device(0)
    np.testing.assert_array_equal(back.to_numpy(), np.arange(8, dtype=np.float32))
    there = back.to(1)
    assert there.device is tc.Device(1)
    np.testing.assert_array_equal(there.to_numpy(), np.arange(8, dtype=np.float32))


class _Liar(int):
    """An int that claims, through every protocol a check might use, to be 0 (and in range)."""

    def __index__(self) -> int:
        return 0

    def __int__(self) -> int:
        return 0

    def __lt__(self, other: object) -> bool:
        return True

    def __ge__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize("bad", [-1, 2, 2**31, 2**64, True, False, np.True_, 1.0, "1", _Liar(5)], ids=repr)
def test_device_ordinals_that_name_no_gpu_are_typed_errors(two: SimDriver, bad: object) -> None:
    """Tried and held (two GPUs): ``tile.Device(bad)`` is tile.bindings' InvalidDeviceError and ``tile.zeros(...,
    device=bad)`` an ArgumentError or BackendError, before any allocation; an int subclass is taken as the int it is
    (``_Liar(5)`` is GPU 5, absent), never as what its methods say; no Device is made for them."""
    import tile.bindings as tb

    with pytest.raises(tb.InvalidDeviceError, match=r"does not exist: this machine has"):
        tile.Device(bad)  # type: ignore[arg-type]  # (what the check is for)
    with pytest.raises((tile.ArgumentError, tile.BackendError), match=r"is not a device|is not available here"):
        tile.zeros(f32, [4], device=bad)
    assert set(tc.Device._instances) <= {0, 1}
    assert two.kinds("alloc") == []
    assert tile.Device(_Liar(1)) is tile.Device(1)  # an int subclass of a real ordinal is that GPU
