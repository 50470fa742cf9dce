"""Adversarial review 29 of tile.core: addresses that outlive the memory they name.

Every way safe code gets an address of Tile memory (``buffer.view``, views of views, ``DeviceView`` with each
owner/buffer combination, ``borrow`` of DLPack and ``__cuda_array_interface__`` producers, exports, pinned memory,
copies and fills with offsets, prepared launches, events and streams) is held past the free, close or collection of
what it names, then used; every use must be a typed error, or the free refused or ordered after the use. The strict
simulator (``sim``) reports any driver-level use of freed memory at teardown.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tile.core as tc
from tile.core.testing import VEC_ADD_SIGNATURE, SimDriver

N = 32


def _args(x: object, y: object, z: object) -> list[Any]:
    return [x, N, 1, y, N, 1, z, N, 1]


class _Forwarder:
    """A DLPack producer of another library that re-exports memory it got from tile.core (as torch.from_dlpack(buffer)
    does, then offers itself to tile.core.borrow)."""

    def __init__(self, exporter: Any) -> None:
        self._exporter = exporter

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._exporter.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self._exporter.__dlpack_device__()
        return device


PRODUCERS: dict[str, Callable[[tc.DeviceBuffer], object]] = {
    "buffer": lambda b: b,
    "another library's re-export": _Forwarder,
    "a re-export of a view at an offset": lambda b: _Forwarder(b.view(np.float32, N, 64)),
}


# -- hole: Tile memory borrowed back through DLPack was not the buffer's: its uses on other streams went unrecorded ----


@pytest.mark.parametrize("producer", list(PRODUCERS))
def test_tile_memory_borrowed_back_is_tied_to_its_buffer(sim: SimDriver, vec_add: tc.Function, producer: str) -> None:
    """``tc.borrow`` of Tile memory (the buffer, a view, another library's re-export) gave an untied view: a launch
    through it on a stream the export never saw was no use of the buffer, so once the view was dropped the buffer's
    free was not ordered after the kernel, which then read freed memory (the simulator saw the free overtake it). The
    borrowed view is now the buffer's: its uses are recorded and the free waits for them."""
    home, other = tc.Stream(), tc.Stream()
    x = tc.DeviceBuffer.from_host(np.full(2 * N + 16, 1.0, np.float32), stream=home)
    z = tc.DeviceBuffer.allocate(4 * N, stream=other)
    view = tc.borrow(PRODUCERS[producer](x), stream=home)
    assert view.buffer is x
    tc.launch(vec_add, 1, N, _args(view, view, z), signature=VEC_ADD_SIGNATURE, stream=other)
    with pytest.raises(tc.StateError, match="still viewed through DLPack"):
        x.free()  # the borrow holds the export: refused while the view lives
    del view
    gc.collect()
    x.free()  # now ordered after the launch on `other`
    home.synchronize()
    other.synchronize()
    assert sim.bugs == []
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.full(N, 2.0, np.float32))
    z.free()


def test_an_asynchronous_copy_through_a_borrowed_view_holds_the_free(sim: SimDriver) -> None:
    """The same hole through a copy: ``copy_to(..., sync=False)`` on another stream read the buffer after its free."""
    home, other = tc.Stream(), tc.Stream()
    x = tc.DeviceBuffer.from_host(np.arange(N, dtype=np.float32), stream=home)
    z = tc.DeviceBuffer.allocate(4 * N, stream=other)
    view = tc.borrow(_Forwarder(x.view(np.float32, N)), stream=home)
    view.copy_to(z.view(np.float32, N), stream=other, sync=False)
    del view
    gc.collect()
    x.free()
    home.synchronize()
    other.synchronize()
    assert sim.bugs == []
    np.testing.assert_array_equal(z.to_numpy(np.float32), np.arange(N, dtype=np.float32))
    z.free()


def test_a_borrowed_view_of_tile_memory_dies_with_its_buffer(sim: SimDriver, vec_add: tc.Function) -> None:
    """Tied to the buffer, the borrowed view is refused once the buffer is gone (a prepared launch holding it too)."""
    x, z = tc.DeviceBuffer.allocate(4 * N), tc.DeviceBuffer.allocate(4 * N)
    view = tc.borrow(x)
    prepared = tc.prepare(vec_add, 1, N, _args(view, view, z), signature=VEC_ADD_SIGNATURE)
    assert prepared.buffers == (x, z)
    del view
    gc.collect()  # the export went with the view: the buffer frees
    x.free()
    with pytest.raises(tc.UseAfterFreeError, match=r"was freed; prepare with live buffers"):
        prepared()
    z.free()


# -- hole: a Tile stream borrowed back through another object outlived the stream's close ----------------------------


class _StreamForwarder:
    """Another library's stream object over a Tile stream (``__cuda_stream__``, as cuda.core offers)."""

    def __init__(self, stream: tc.Stream) -> None:
        self._stream = stream

    def __cuda_stream__(self) -> tuple[int, int]:
        return self._stream.__cuda_stream__()


def _enqueued_after_destroy(sim: SimDriver, handle: int) -> list[Any]:
    """Driver calls naming ``handle`` logged after its ``cuStreamDestroy``."""
    log = list(sim.log)
    destroyed = log.index(("stream_destroy", handle))
    return [entry for entry in log[destroyed + 1 :] if handle in entry[1:]]


@pytest.mark.parametrize("use", ["launch", "prepared", "copy", "fill"])
def test_a_borrow_of_a_tile_stream_closes_with_it(sim: SimDriver, vec_add: tc.Function, use: str) -> None:
    """``Stream.borrow(obj)`` of an object handing back a Tile stream's handle made a second wrapper of the handle,
    which stayed open after the Tile stream's ``close()``: launches, copies and fills on it were enqueued on the
    destroyed handle (one the driver may give to another stream). The wrapper now closes with the stream."""
    stream = tc.Stream()
    borrowed = tc.Stream.borrow(_StreamForwarder(stream))
    x = tc.DeviceBuffer.allocate(4 * N, ready=True)
    prepared = tc.prepare(vec_add, 1, N, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=borrowed)
    prepared()
    stream.close()
    assert borrowed.closed
    calls: dict[str, Callable[[], object]] = {
        "launch": lambda: tc.launch(vec_add, 1, N, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=borrowed),
        "prepared": prepared,
        "copy": lambda: x.copy_from(np.zeros(N, np.float32), stream=borrowed),
        "fill": lambda: x.view(np.float32).fill(1.0, stream=borrowed),
    }
    with pytest.raises(tc.StreamClosedError, match="closed"):
        calls[use]()
    assert _enqueued_after_destroy(sim, stream.handle) == []
    x.free()


class _CachedStream:
    """A foreign stream object that kept only the ``__cuda_stream__`` it was made from (not the Tile stream)."""

    def __init__(self, stream: tc.Stream) -> None:
        self._protocol = stream.__cuda_stream__()

    def __cuda_stream__(self) -> tuple[int, int]:
        return self._protocol


def test_a_borrow_of_a_collected_tile_stream_is_closed(sim: SimDriver, vec_add: tc.Function) -> None:
    """The same when the Tile stream is collected (destroyed by its finalizer) while the borrow lives."""
    stream = tc.Stream()
    handle = stream.handle
    borrowed = tc.Stream.borrow(_CachedStream(stream))
    x = tc.DeviceBuffer.allocate(4 * N, ready=True)
    prepared = tc.prepare(vec_add, 1, N, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=borrowed)
    del stream
    gc.collect()
    assert borrowed.closed
    with pytest.raises(tc.StreamClosedError, match="closed"):
        tc.launch(vec_add, 1, N, _args(x, x, x), signature=VEC_ADD_SIGNATURE, stream=borrowed)
    with pytest.raises(tc.StreamClosedError, match="closed"):
        prepared()
    assert _enqueued_after_destroy(sim, handle) == []
    x.free()


# -- what held: every address of a freed buffer, however derived, is refused before the driver ---------------------


def _derived(buffer: tc.DeviceBuffer) -> dict[str, tc.DeviceView]:
    f32 = np.dtype(np.float32)
    view = buffer.view(np.float32, N // 2, 16)
    return {
        "view": view,
        "view of a view": tc.DeviceView(view.ptr + 4, f32, (4,), (4,), device=buffer.device, owner=view),
        "owner=buffer": tc.DeviceView(buffer.ptr, f32, (4,), (4,), device=buffer.device, owner=buffer),
        "buffer=": tc.DeviceView(buffer.ptr, f32, (4,), (4,), device=buffer.device, owner=object(), buffer=buffer),
        "borrowed back": tc.borrow(_Forwarder(buffer.view(np.float32, N))),
    }


USES: dict[str, Callable[[tc.DeviceView, tc.Function], object]] = {
    "ptr": lambda v, _: v.ptr,
    "pack_args": lambda v, _: tc.pack_args(_args(v, v, v), VEC_ADD_SIGNATURE),
    "launch": lambda v, f: tc.launch(f, 1, N, _args(v, v, v), signature=VEC_ADD_SIGNATURE),
    "prepare": lambda v, f: tc.prepare(f, 1, N, _args(v, v, v), signature=VEC_ADD_SIGNATURE),
    "copy_from": lambda v, _: v.copy_from(np.zeros(v.shape, v.dtype)),
    "to_numpy": lambda v, _: v.to_numpy(),
    "fill": lambda v, _: v.fill(0),
    "__dlpack__": lambda v, _: v.__dlpack__(max_version=(1, 0)),
    "borrow": lambda v, _: tc.borrow(v).ptr,  # a view comes back as it is: still dead
    # (the address as it was before the free: a view of the dead view at it)
    "view of it": lambda v, _: tc.DeviceView(v._ptr, v.dtype, (1,), (4,), device=v.device, owner=v),
}


@pytest.mark.parametrize("use", list(USES))
def test_every_address_of_a_freed_buffer_is_refused(sim: SimDriver, vec_add: tc.Function, use: str) -> None:
    buffer = tc.DeviceBuffer.allocate(4 * N)
    views = _derived(buffer)
    borrowed = views.pop("borrowed back")
    with pytest.raises(tc.StateError, match="still viewed through DLPack"):
        buffer.free()  # the borrow holds its export
    del borrowed
    gc.collect()
    buffer.free()
    before = len(sim.log)
    for name, view in views.items():
        assert view.buffer is buffer, name
        with pytest.raises(tc.UseAfterFreeError, match="freed"):
            USES[use](view, vec_add)
    assert [e for e in sim.log[before:] if e[0] not in {"record", "event_create", "query"}] == []
