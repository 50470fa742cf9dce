"""The release of a ``.then()`` chain of launches, on both launch paths: every launch hands its handles back, whatever
the chain's length and the ops between its launches, and nothing the release frees (a link's function, a launch's
handles) dies while the release holds OWNERSHIP: the compiled ``release_links`` hands all the chain's launches back in
one hold of the lock and releases what they dropped after leaving it, a bounded batch at a time.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import MovedError, f32
from tile.frontend._storage import OWNERSHIP

N = 512


class Witness:
    """Records, when it dies, whether this thread held OWNERSHIP then."""

    def __init__(self, seen: list[bool]) -> None:
        self.seen = seen

    def __del__(self) -> None:
        self.seen.append(OWNERSHIP._is_owned())  # type: ignore[attr-defined]  # RLock's own test


def _link(k: ModuleType, seen: list[bool]) -> Callable[[Any], DeviceOp[Any]]:
    """A link's function that alone holds a Witness: it dies when the release drops the link's function."""
    witness = Witness(seen)

    def launch(out: Any) -> DeviceOp[Any]:
        assert witness.seen is seen
        made: DeviceOp[Any] = k.add(*out)
        return made

    return launch


@pytest.mark.parametrize("length", [1, 2, 300])
def test_a_chain_hands_back_every_launch_and_frees_nothing_in_the_lock(k: ModuleType, path: str, length: int) -> None:
    seen: list[bool] = []
    z, x, y = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])
    op = k.add(z, x, y)
    for _ in range(length - 1):  # 300 links: the compiled release's batch fills and is released several times
        op = op.then(_link(k, seen))
    z, x, y = op.sync()
    assert seen == [False] * (length - 1)  # every link's function died, none with OWNERSHIP held
    assert x._storage.pending == y._storage.pending == z._tensor._storage.pending == 0
    assert (z.unpartition().to_numpy() == 2).all()


def test_ops_between_the_launches_release_outside_the_launches_hold(k: ModuleType, path: str) -> None:
    seen: list[bool] = []
    z, x, y = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])
    op: DeviceOp[Any] = k.add(z, x, y)
    for n in range(40):
        op = op.then(_link(k, seen))
        if n % 3 == 0:  # a Map between the launches: its Python `_hand_off` runs between launch hand-backs
            witness = Witness(seen)
            op = op.map(lambda out, w=witness: out if w.seen is seen else None)  # type: ignore[misc]
            del witness
    z, x, y = op.sync()
    assert len(seen) == 40 + 14
    assert not any(seen)
    assert x._storage.pending == y._storage.pending == z._tensor._storage.pending == 0
    assert (z.unpartition().to_numpy() == 2).all()


def test_the_compiled_launch_keeps_its_objects_out_of_the_collector(k: ModuleType, path: str) -> None:
    """The compiled path's Launch, its moved handles and their values tuple are untracked (a chain kept them alive,
    walked and promoted by every collection); refcounting still frees them, and they work as the pure path's do."""
    z, x, y = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])
    op = k.add(z, x, y)
    values = op._values
    compiled = path == "compiled"
    assert [gc.is_tracked(o) for o in (op, values, *values)] == [not compiled] * 5
    dead = weakref.ref(values[1])
    del op, values  # a launch dropped unexecuted: its handles die with it (refcounting, no collection)
    assert dead() is None
    with pytest.raises(MovedError, match=r"was moved into the launch of add"):
        x.to_numpy()  # the caller's handle was moved: the same typed error on both paths
    z, x, y = tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])
    z, x, y = k.add(z, x, y).then(lambda out: k.add(*out)).sync()
    assert [gc.is_tracked(o) for o in (z, x, y)] == [not compiled] * 3
    assert (z.unpartition().to_numpy() == 2).all()
