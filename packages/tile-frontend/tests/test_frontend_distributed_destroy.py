"""``tile.distributed.destroy`` with NCCL waits for the rank's GPU before the process group goes (a collective still
running on a destroyed communicator is undefined: a hang, or an abort). A recording stand-in for torch: no GPU."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import tile.aio
import tile.frontend.distributed as d


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    log: list[tuple[Any, ...]] = []

    def synchronize(device: Any = None) -> None:
        log.append(("synchronize", device))

    def destroy_process_group() -> None:
        assert d._State.one_shot is None  # (the buffer is dropped before the group it was mapped on)
        log.append(("destroy_process_group",))

    fake = SimpleNamespace(
        cuda=SimpleNamespace(synchronize=synchronize),
        distributed=SimpleNamespace(destroy_process_group=destroy_process_group),
    )
    monkeypatch.setattr(d._State, "torch", fake)
    monkeypatch.setattr(tile.aio, "set_default_device", lambda *a, **k: log.append(("set_default_device", *a)))
    yield log
    d._State.group = None
    d._State.one_shot = None


def test_nccl_groups_wait_for_their_gpu_before_the_group_goes(calls: list[tuple[Any, ...]]) -> None:
    d._State.group = d.Group(1, 2, SimpleNamespace(ordinal=1), "nccl")
    d._State.one_shot = object()  # type: ignore[assignment]  # (only its dropping is observed)
    d.destroy()
    assert calls == [("synchronize", 1), ("destroy_process_group",), ("set_default_device", "cuda")]
    d.destroy()  # a second call has nothing to leave
    assert len(calls) == 3
    assert d._State.group is None


def test_gloo_groups_have_no_gpu_to_wait_for(calls: list[tuple[Any, ...]]) -> None:
    d._State.group = d.Group(0, 2, object(), "gloo")
    d.destroy()
    assert calls == [("destroy_process_group",)]


def test_a_failing_wait_leaves_the_group_joined(calls: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(device: Any = None) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(d._State.torch.cuda, "synchronize", broken)
    group = d._State.group = d.Group(0, 2, SimpleNamespace(ordinal=0), "nccl")
    with pytest.raises(RuntimeError, match="illegal memory access"):
        d.destroy()
    assert d._State.group is group
    assert calls == []
