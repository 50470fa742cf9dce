"""``tile.distributed`` on the CPU (gloo): the ownership rules of collectives in one process, and every collective's
numerics across two processes. Skipped where torch is not installed (nothing else in Tile needs it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tile.frontend as tile
import tile.frontend.distributed as d
from tile import aio
from tile.frontend import f32, i32

sys.path.insert(0, str(Path(__file__).parent))
from helpers_distributed import run_ranks

torch = pytest.importorskip("torch")
WORKER = Path(__file__).resolve().parent / "helpers_distributed.py"


@pytest.fixture(scope="module", autouse=True)
def _group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A one-process gloo group: a collective's result is its input, so these tests are about handles."""
    store = tmp_path_factory.mktemp("dist") / "store"
    d.init("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    d.destroy()


def test_in_place_tensor_is_moved_and_given_back() -> None:
    t = tile.arange(f32, 16)
    op = d.all_reduce(t)
    with pytest.raises(tile.MovedError, match="moved into the all_reduce"):
        t.to_numpy()
    back = op.sync()
    np.testing.assert_array_equal(back.to_numpy(), np.arange(16, dtype=np.float32))
    back.partition([16])  # live and exclusive again


def test_memory_a_collective_writes_cannot_be_borrowed_again_until_it_is_done() -> None:
    """A collective writing a borrowed tensor in place did not hold its memory: a second tile.from_dlpack of the same
    array made while it was pending gave a handle that could read the bytes mid-collective (the hole a partition's
    hold closes for launches)."""
    a = np.arange(16, dtype=np.float32)
    op = d.all_reduce(tile.from_dlpack(a))
    with pytest.raises(tile.BorrowError, match="a writer holds it, the all_reduce"):
        tile.from_dlpack(a)
    back = op.sync()
    del back
    np.testing.assert_array_equal(tile.from_dlpack(a).to_numpy(), np.arange(16, dtype=np.float32))  # done: free again


def test_a_collective_refuses_a_context_tile_aio_did_not_make() -> None:
    """A home-made context could say the collective is done while it still writes: tile.aio's own contexts only."""

    class SubclassLiar(aio.HostStream):
        def synchronize(self) -> None:
            pass  # the lie: nothing waits for the work

    with pytest.raises(tile.BackendError, match=r"a context tile.aio did not make"):
        d.all_reduce(tile.arange(f32, 8)).sync_on(SubclassLiar())


def test_every_reduction_the_docs_name_runs() -> None:
    """``op="prod"`` raised torch's AttributeError (ReduceOp has PRODUCT, not PROD): found in review."""
    for op in ("sum", "prod", "min", "max"):
        back = d.all_reduce(tile.full(f32, [4], 2.0), op).sync()
        np.testing.assert_array_equal(back.to_numpy(), np.full(4, 2.0, np.float32))  # one rank: its own values


def test_shared_input_cannot_be_written() -> None:
    s = tile.ones(f32, [8]).share()
    with pytest.raises(tile.BorrowError, match="a share is read-only"):
        d.all_reduce(s)
    out = tile.zeros(f32, [8])
    with pytest.raises(tile.BorrowError, match="a share is read-only"):
        d.all_gather(s, tile.ones(f32, [8]))
    assert not out.moved


def test_shared_input_is_a_borrow_until_done() -> None:
    s = tile.arange(f32, 8).share()
    op = d.all_gather(tile.zeros(f32, [8]), s)
    assert s.users == 1
    with pytest.raises(tile.BorrowError, match="not done"):
        s.unshare()
    out, same = op.sync()
    assert same is s
    assert s.users == 0
    np.testing.assert_array_equal(out.to_numpy(), s.unshare().to_numpy())


def test_in_place_needs_exclusive_memory() -> None:
    t = tile.ones(f32, [8])
    view = t[2:4]
    with pytest.raises(tile.BorrowError, match="needs exclusive memory"):
        d.all_reduce(t)
    assert not t.moved
    del view
    d.all_reduce(t).sync()


def test_output_overlapping_input_is_an_alias_error() -> None:
    t = tile.ones(f32, [8])
    with pytest.raises(tile.AliasError, match="overlaps"):
        d.reduce_scatter(t, t)
    assert not t.moved


def test_misuse_is_typed() -> None:
    with pytest.raises(tile.ArgumentError, match="unknown reduction 'avg'"):
        d.all_reduce(tile.ones(f32, [4]), op="avg")  # NCCL only
    with pytest.raises(tile.ArgumentError, match="must have shape"):
        d.all_gather(tile.zeros(f32, [3]), tile.ones(f32, [4]))
    with pytest.raises(tile.ArgumentError, match="is i32 but the input f32"):
        d.all_gather(tile.zeros(i32, [4]), tile.ones(f32, [4]))
    with pytest.raises(tile.ArgumentError, match="strided"):
        d.all_reduce(tile.ones(f32, [4, 4]).T)
    with pytest.raises(tile.ArgumentError, match="src=3 is not a rank"):
        d.broadcast(tile.ones(f32, [4]), src=3)
    with pytest.raises(tile.ArgumentError, match="takes Tile tensors"):
        d.all_reduce(np.ones(4))


def test_in_flight_output_is_refused_except_to_ops() -> None:
    seen: list[BaseException] = []

    def peek(t: tile.Tensor) -> d.Collective:
        try:
            t.to_numpy()
        except tile.InFlightError as exc:
            seen.append(exc)
        return d.all_reduce(t)  # another collective may take it: it runs after this one

    out: tile.Tensor = d.all_reduce(tile.full(f32, [4], 3.0)).then(peek).sync()
    assert len(seen) == 1
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 3, np.float32))


def test_free_waits_for_a_pending_collective() -> None:
    t = tile.ones(f32, [1024])
    view_before = t[:4]
    del view_before
    op = d.all_reduce(t)
    storage = next(iter(op._values or ()))._storage
    assert storage.pending == 1
    op.sync().free()
    assert storage.dropped


def test_two_processes_gloo() -> None:
    outputs = run_ranks(WORKER, ["gloo"])
    assert [o.strip().splitlines()[-1] for o in outputs] == ["rank 0 ok", "rank 1 ok"]
