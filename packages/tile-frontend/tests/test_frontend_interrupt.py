"""A ``KeyboardInterrupt`` while ``.sync()`` waits for the work (`tile.aio._run.park`): the launch keeps its handles
(the work may still run, so nothing goes back early), and hands them back once the work is done, whether the launch
is synced again (which returns them) or dropped. Both launch paths; the interrupt is a patched ``synchronize``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.aio import HostStream, OpConsumedError
from tile.aio.testing import drained as _drained
from tile.aio.testing import interrupted_waits
from tile.frontend import f32

N = 256


@pytest.fixture
def gated() -> Iterator[tuple[HostStream, threading.Event]]:
    """A worker host stream whose queued work waits for the event, and whose next ``synchronize()`` is interrupted."""
    with interrupted_waits() as (stream, gate, _):
        yield stream, gate


def _operands() -> tuple[Any, Any, Any]:
    return tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.full(f32, [N], 2.0)


def test_an_interrupted_sync_keeps_the_handles_and_a_later_sync_returns_them(
    k: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    z, x, y = _operands()
    stores = [z._tensor._storage, x._storage, y._storage]
    launch = k.add(z, x, y)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        launch.sync_on(stream)
    assert [s.pending for s in stores] == [1, 1, 1]  # the work has not run: nothing went back
    with pytest.raises(tile.MovedError, match="moved into the launch of add"):
        x.to_numpy()
    gate.set()
    z, x, y = launch.sync_on(stream)  # waits for the work, then hands the handles back
    assert [s.pending for s in stores] == [0, 0, 0]
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(N, 3.0, np.float32))
    with pytest.raises(OpConsumedError, match=r"executed by \.sync_on\(\) at .*test_frontend_interrupt\.py:\d+"):
        launch.sync_on(stream)


def test_an_interrupted_sync_hands_the_handles_back_once_the_work_is_done(
    k: ModuleType, path: str, gated: tuple[HostStream, threading.Event]
) -> None:
    stream, gate = gated
    z, x, y = _operands()
    stores = [z._tensor._storage, x._storage, y._storage]
    launch = k.add(z, x, y)
    with pytest.raises(KeyboardInterrupt, match="interrupted while waiting"):
        launch.sync_on(stream)
    del launch  # dropped while the work may still run
    assert [s.pending for s in stores] == [1, 1, 1]
    gate.set()
    _drained(stream)
    assert [s.pending for s in stores] == [0, 0, 0]  # handed back once the work was done
