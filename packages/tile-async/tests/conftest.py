"""Fixtures for tile-async tests: the host as default device, worker host streams, and a gate for holding
host work (``aio.host_call(gate.wait)`` blocks its stream until the test calls ``gate.set()``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tile import aio


@pytest.fixture(autouse=True)
def host_default() -> Iterator[None]:
    """Every test runs with the host as its default device unless it chooses another."""
    with aio.use_device(aio.HOST):
        yield


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave a worker blocked behind a failed test


@pytest.fixture
def worker(gate: threading.Event) -> Iterator[aio.HostStream]:
    stream = aio.HostStream(worker=True, name="test-worker")
    yield stream
    gate.set()
    stream.close()
