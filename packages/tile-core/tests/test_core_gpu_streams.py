"""GPU: streams (owned, borrowed, closed), events, timing, capture status."""

from __future__ import annotations

import numpy as np
import pytest

import tile.core as tc

pytestmark = pytest.mark.gpu


def test_stream_lifecycle(device: tc.Device) -> None:
    stream = tc.Stream(device, priority=0)
    assert stream.owned
    assert stream.device is device
    assert stream.priority == 0
    assert stream.query()
    assert not stream.is_capturing()
    assert stream.__cuda_stream__() == (0, stream.handle)
    stream.synchronize()
    stream.close()
    stream.close()
    assert stream.closed
    with pytest.raises(tc.StreamClosedError, match="was closed"):
        stream.synchronize()
    with pytest.raises(tc.StreamClosedError, match="was closed: create a new Stream"):
        tc.DeviceBuffer.allocate(16, device=device, stream=stream)


def test_priorities_within_the_device_range(device: tc.Device) -> None:
    lowest, highest = device.stream_priorities
    assert highest <= lowest
    urgent = device.create_stream(priority=highest)
    assert urgent.priority == highest
    urgent.close()


def test_default_stream_is_protected(device: tc.Device) -> None:
    assert device.default_stream is device.default_stream
    with pytest.raises(tc.StateError, match="is the device's default stream and lives as long as the process"):
        device.default_stream.close()


def test_events_order_and_time_work(device: tc.Device) -> None:
    a, b = device.create_stream(), device.create_stream()
    start, end = tc.Event(device, timing=True), tc.Event(device, timing=True)
    buffer = tc.DeviceBuffer.allocate(256 << 20, device=device, stream=a)
    a.record(start)
    buffer.fill(3)
    a.record(end)
    b.wait(end)
    out = np.empty(16, np.uint8)
    buffer.copy_to(out, stream=b, sync=True)
    assert (out == 3).all()
    end.synchronize()
    assert end.elapsed_ms(start) > 0
    with pytest.raises(tc.StateError, match="without timing"):
        tc.Event(device).elapsed_ms(start)
    buffer.free()
    a.close()
    b.close()


def test_borrowed_streams_are_never_destroyed(device: tc.Device) -> None:
    owner = device.create_stream()
    borrowed = tc.Stream.borrow(owner.handle, unchecked=True)
    assert not borrowed.owned
    assert borrowed.device is device
    borrowed.close()
    assert owner.query()  # still alive
    via_protocol = tc.Stream.borrow(owner)
    assert via_protocol is owner
    with pytest.raises(tc.NullHandleError, match="legacy NULL stream"):
        tc.Stream.borrow(0, unchecked=True)
    owner.close()


def test_cuda_core_accepts_tile_streams(device: tc.Device) -> None:
    from cuda.core import Stream as CoreStream

    stream = device.create_stream()
    core = CoreStream.from_handle(stream.__cuda_stream__()[1])
    assert int(core.handle) == stream.handle
    stream.close()


def test_foreign_streams_are_borrowed_with_their_owner(device: tc.Device) -> None:
    torch = pytest.importorskip("torch")
    torch_stream = torch.cuda.Stream(device=device.ordinal)
    borrowed = tc.Stream.borrow(torch_stream)
    assert borrowed.handle == torch_stream.cuda_stream
    assert borrowed.owner is torch_stream
    buffer = tc.DeviceBuffer.allocate(1 << 20, device=device, stream=borrowed)
    buffer.fill(7, sync=True)
    assert (buffer.to_numpy()[:4] == 7).all()
    buffer.free()
    borrowed.synchronize()
