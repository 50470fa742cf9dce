"""Random programs of views, partitions, unpartitions, drops and launches against a model of who may touch which
bytes: whatever the order, a partition never coexists with another live handle on overlapping memory, every refusal
is a typed ownership error, and a refused operation changes nothing."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tile.frontend as tile
from tile.frontend import f32

SIZE = 512
ACTIONS = st.lists(
    st.tuples(st.sampled_from(["view", "partition", "unpartition", "drop", "launch"]), st.integers(0, 7)),
    max_size=25,
)


def _overlaps(a: Any, b: Any) -> bool:
    lo, hi = a._byte_range()
    lo2, hi2 = b._byte_range()
    return bool(lo < hi2 and lo2 < hi)


def _live_tensors(handles: list[Any]) -> list[Any]:
    return [h._tensor if isinstance(h, tile.Partition) else h for h in handles]


@settings(max_examples=40, deadline=None)
@given(actions=ACTIONS)
def test_partitions_stay_exclusive(k: ModuleType, actions: list[tuple[str, int]]) -> None:
    handles: list[Any] = [tile.zeros(f32, [SIZE])]
    for action, pick in actions:
        target = handles[pick % len(handles)] if handles else None
        try:
            if action == "view" and isinstance(target, tile.Tensor):
                start = pick * 37 % SIZE
                handles.append(target[start : start + 128])
            elif action == "partition" and isinstance(target, tile.Tensor) and target.size >= 128:
                part = target.partition([128])
                handles[handles.index(target)] = part
            elif action == "unpartition" and isinstance(target, tile.Partition):
                handles[handles.index(target)] = target.unpartition()
            elif action == "drop" and target is not None:
                handles.remove(target)
            elif action == "launch" and isinstance(target, tile.Partition) and target.shape[0] % 128 == 0:
                n = target.shape[0]
                out, _, _ = k.add(target, tile.ones(f32, [n]), tile.ones(f32, [n])).sync()
                handles[handles.index(target)] = out
        except tile.OwnershipError:
            pass  # refused: the model below must still hold, and the handle must still be usable
        for i, h in enumerate(handles):
            assert not h.moved
            if isinstance(h, tile.Partition):
                others = _live_tensors(handles[:i] + handles[i + 1 :])
                assert not any(_overlaps(h._tensor, o) for o in others)


@pytest.mark.parametrize("n", [1, 127, 129, 1000])
def test_edge_partitions_write_exactly_their_elements(k: ModuleType, n: int) -> None:
    host = np.full(n + 64, -7.0, np.float32)
    z = tile.from_dlpack(host[:n]).partition([128])
    k.add(z, tile.ones(f32, [n]), tile.ones(f32, [n])).sync()
    np.testing.assert_array_equal(host[:n], np.full(n, 2.0, np.float32))
    np.testing.assert_array_equal(host[n:], np.full(64, -7.0, np.float32))
