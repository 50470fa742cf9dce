"""The caches that keep a collective's per-op host cost low: torch views cached per storage (host memory with gloo;
device memory over tile.core's driver simulator, with a stand-in for torch's DLPack import) and torch's stream
wrappers. What must hold: a cached view is never reached through a handle that may not use the memory, and never
keeps memory alive past a free or blocks the free. The mutant each test was seen to catch is noted in it."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tile.core as tc
import tile.frontend as tile
import tile.frontend.distributed as d
from tile.aio import DeviceOp
from tile.core.testing import SimDriver, simulated
from tile.frontend import f32
from tile.frontend.distributed import _collective

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    store = tmp_path_factory.mktemp("dist") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    d.destroy()


def test_a_chain_reuses_one_view_of_the_storage(group: None) -> None:
    t = tile.arange(f32, 16)
    storage = t._storage
    t = d.all_reduce(t).then(d.all_reduce).then(d.all_reduce).sync()
    views = storage.foreign_views
    assert views is not None
    assert set(views) == {None, (t.data_ptr(), t.data_ptr() + 64, "f32", (16,))}
    np.testing.assert_array_equal(t.to_numpy(), np.arange(16, dtype=np.float32))


def test_views_of_one_storage_cover_each_handles_own_bytes(group: None) -> None:
    """Mutant killed: the typed view sliced from the storage's start instead of the handle's offset (``raw[0:n]``):
    the gathered values landed in the first bytes, not in ``out``'s."""
    whole = tile.zeros(f32, [32])
    out = whole[8:16]
    del whole
    out, _inp = d.all_gather(out, tile.arange(f32, 8)).sync()
    np.testing.assert_array_equal(out.to_numpy(), np.arange(8, dtype=np.float32))
    src = tile.from_numpy(np.arange(8, 16, dtype=np.float32).reshape(2, 4))
    square = out.reshape(2, 4)
    del out
    square, _ = d.all_gather(square, src).sync()  # the same bytes, another shape: another cached view
    np.testing.assert_array_equal(square.to_numpy(), np.arange(8, 16, dtype=np.float32).reshape(2, 4))


def test_a_storage_keeps_a_bounded_number_of_views(group: None) -> None:
    """Mutant killed: no cap: one storage reduced piece by piece kept a view per piece."""
    rest = tile.zeros(f32, [4 * 40])
    storage = rest._storage
    for _ in range(39):
        piece, rest = rest[:4], rest[4:]  # (the old `rest` goes: each piece is exclusive)
        d.all_reduce(piece).sync()
        assert storage.foreign_views is not None
        assert len(storage.foreign_views) <= _collective._VIEWS_CAP + 1
    views = storage.foreign_views
    assert views is not None
    assert None in views  # the storage's bytes stay cached


def test_a_moved_tensor_is_refused_before_any_cached_view_is_used(group: None) -> None:
    t = tile.ones(f32, [8])
    back = d.all_reduce(t).sync()  # caches a view of t's bytes
    with pytest.raises(tile.MovedError, match="moved into the all_reduce"):
        d.all_reduce(t)
    back.free()
    with pytest.raises(tile.FreedError, match="freed"):
        d.all_reduce(back)


def test_a_free_drops_the_cached_views_and_their_host_memory(group: None) -> None:
    """Mutant killed: `Storage._drop` not dropping ``foreign_views``: the cached torch tensor kept the freed host
    array alive."""
    t = d.all_reduce(tile.ones(f32, [1024])).sync()
    storage = t._storage
    assert storage.foreign_views
    assert storage.host is not None
    memory = weakref.ref(storage.host.base if storage.host.base is not None else storage.host)
    t.free()
    gc.collect()
    assert storage.foreign_views is None
    assert storage.dropped
    assert memory() is None


def test_a_deferred_free_drops_the_cached_views_once_the_collective_is_done(group: None) -> None:
    t = d.all_reduce(tile.ones(f32, [64])).sync()
    storage = t._storage
    op = d.all_reduce(t)
    assert storage.foreign_views is not None  # from the first run; the pending op holds the memory
    back = op.sync()
    back.free()
    assert storage.foreign_views is None
    assert storage.dropped


class _FakeTorch:
    """torch's DLPack import, played by an object that keeps the capsule (the export stays live, as a torch tensor
    keeps it); slicing and retyping return views that keep it too."""

    class Tensor:
        def __init__(self, capsule: object) -> None:
            self.capsule = capsule

        def __getitem__(self, index: slice) -> _FakeTorch.Tensor:
            return _FakeTorch.Tensor(self.capsule)

        def view(self, what: object) -> _FakeTorch.Tensor:
            return _FakeTorch.Tensor(self.capsule)

    float32 = "float32"

    @staticmethod
    def from_dlpack(obj: Any) -> _FakeTorch.Tensor:
        return _FakeTorch.Tensor(obj.__dlpack__(max_version=(1, 0)))


@pytest.fixture
def sim() -> Iterator[SimDriver]:
    with simulated(asynchronous=True, seed=1) as driver:
        yield driver
        gc.collect()
    assert driver.bugs == [], driver.bugs


def _exports_of(buffer: object) -> int:
    """Live DLPack exports of ``buffer``'s memory made through views of it (tile.distributed's exports: views owned
    by the buffer, or untied ones holding it, `_device.Held`)."""
    owners = [getattr(entry[3], "owner", None) for entry in list(tc._dlpack._live.values())]
    return sum(1 for owner in owners if owner is buffer or getattr(owner, "obj", None) is buffer)


def test_a_cached_device_view_does_not_outlive_the_free(sim: SimDriver) -> None:
    """Mutant killed: `Storage._drop` not dropping ``foreign_views``: the cached DLPack import (torch's tensor on the
    pointer) stayed live after the buffer's memory was freed."""
    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    storage = t._storage
    buffer = storage.buffer
    fake = _FakeTorch()
    first = _collective._torch_view(fake, t)
    assert _collective._torch_view(fake, t) is first  # cached: one DLPack export per storage
    assert _exports_of(buffer) == 1
    seen = weakref.ref(first)
    del first
    t.free()
    assert storage.dropped
    assert storage.foreign_views is None
    assert buffer.closed
    assert seen() is None
    assert _exports_of(buffer) == 0


def test_stream_wrappers_are_made_once_per_stream_and_bounded() -> None:
    made: list[tuple[int, object]] = []

    class Cuda:
        @staticmethod
        def ExternalStream(handle: int, device: object) -> tuple[int, object]:  # noqa: N802  (torch's name)
            made.append((handle, device))
            return (handle, device)

    class Torch:
        cuda = Cuda

        @staticmethod
        def device(kind: str, ordinal: int) -> tuple[str, int]:
            return (kind, ordinal)

    _collective._STREAMS.clear()
    first = _collective._torch_stream(Torch, 0, 0x1000)
    assert _collective._torch_stream(Torch, 0, 0x1000) is first
    assert len(made) == 1
    assert _collective._torch_stream(Torch, 1, 0x1000) == (0x1000, ("cuda", 1))  # another GPU: another wrapper
    for handle in range(2 * _collective._STREAMS_CAP):
        _collective._torch_stream(Torch, 0, handle)
    assert len(_collective._STREAMS) <= _collective._STREAMS_CAP
    _collective._STREAMS.clear()


class _FakeCudaTorch(_FakeTorch):
    """torch's stream API on top of `_FakeTorch`: records the current stream, and each wrapper and view it makes."""

    def __init__(self, device: int = 0) -> None:
        self.current: object = "torch's stream"
        self.wrappers: list[int] = []
        self.imports = 0
        self.contexts = 0
        outer = self

        class Cuda:
            @staticmethod
            def current_device() -> int:
                return device

            @staticmethod
            @contextlib.contextmanager
            def stream(stream: object) -> Iterator[None]:
                outer.contexts += 1
                before, outer.current = outer.current, stream
                try:
                    yield
                finally:
                    outer.current = before

            @staticmethod
            def ExternalStream(handle: int, device: object) -> int:  # noqa: N802  (torch's name)
                outer.wrappers.append(handle)
                return handle

            @staticmethod
            def current_stream(ordinal: int) -> object:
                return outer.current

            @staticmethod
            def set_stream(stream: object) -> None:
                outer.current = stream

        self.cuda = Cuda

    @staticmethod
    def device(kind: str, ordinal: int) -> tuple[str, int]:
        return (kind, ordinal)

    def from_dlpack(self, obj: Any) -> _FakeTorch.Tensor:  # type: ignore[override]  # counts the imports
        self.imports += 1
        return _FakeTorch.Tensor(obj.__dlpack__(max_version=(1, 0)))


def _device_collective(fake: _FakeCudaTorch, t: tile.Tensor, body: Any) -> d.Collective:
    return _collective.collective("all_reduce", [t], [], body, torch=fake, device=tc.Device(0), site="test:1")


@pytest.mark.parametrize("device", [0, 1], ids=["on-torchs-device", "from-another-device"])
def test_a_device_chain_runs_each_body_on_the_contexts_stream_and_restores_torchs(sim: SimDriver, device: int) -> None:
    """Mutant killed: not restoring torch's stream after the body (torch kept running on Tile's stream). With torch's
    current device another GPU, torch.cuda.stream(...) sets and restores (it puts the device back too)."""
    fake = _FakeCudaTorch(device)
    _collective._STREAMS.clear()
    seen: list[object] = []

    def body(views: list[Any]) -> None:
        seen.append(fake.current)

    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    op: DeviceOp[Any] = _device_collective(fake, t, body)
    for _ in range(3):
        op = op.then(lambda x: _device_collective(fake, x, body))
    t = op.sync()
    assert len(seen) == 4
    assert len(set(seen)) == 1
    assert seen[0] != "torch's stream"
    assert fake.current == "torch's stream"
    assert fake.wrappers == [seen[0]]  # one wrapper for the chain's stream
    assert fake.imports == 1  # one DLPack import for the chain's tensor
    assert fake.contexts == (4 if device else 0)
    t.free()
    _collective._STREAMS.clear()


def test_a_failing_body_restores_torchs_stream(sim: SimDriver) -> None:
    """Mutant killed: the stream restored after the body only when it returned (no ``finally``)."""
    fake = _FakeCudaTorch()

    def body(views: list[Any]) -> None:
        raise RuntimeError("NCCL error")

    t = tile.from_numpy(np.arange(16, dtype=np.float32), device=tc.Device(0))
    with pytest.raises(RuntimeError, match="NCCL error"):
        _device_collective(fake, t, body).sync()
    assert fake.current == "torch's stream"
    _collective._STREAMS.clear()
