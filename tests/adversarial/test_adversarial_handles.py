"""Host-side attacks on the safety contract (an outside review of safe code), each now stopped by a typed error.

1. sizes that overflow 64 bits; 2. copying, deep-copying and pickling handles; 4. outputs whose layout maps two
elements to one address; 7. re-importing Tile memory and freeing it; 10. a deferred free hiding a pending reader
from the overlap checks; 13. writable DLPack exports; 14. a producer writing its borrowed output mid-launch
(``take=True``); and the weak messages found on the way (``t[::0]``, strides beyond 64 bits). Every test runs on the
CPU interpreter; each error names the handle and says what to do, and a failed call changes nothing.
"""

from __future__ import annotations

import copy
import gc
import pickle
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile

sys.path.insert(0, str(Path(__file__).parent))
from helpers_adversarial import KERNELS, load_path  # a sibling helper module

from tile.frontend import f32

THIS = Path(__file__).name


def _load() -> ModuleType:
    return load_path("adversarial_handle_kernels", KERNELS / "handle_kernels.py")


@pytest.fixture(autouse=True)
def _cpu() -> None:
    tile.set_backend("cpu")


@pytest.fixture
def k() -> ModuleType:
    return _load()


class Interface:
    """Any library's array that exposes ``__array_interface__`` over an address it does not own (no DLPack)."""

    def __init__(self, address: int, n: int, readonly: bool = False) -> None:
        self.__array_interface__ = {"data": (address, readonly), "shape": (n,), "typestr": "<f4", "version": 3}


# -- 1. sizes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [tile.empty, tile.zeros, tile.ones, tile.rand])
def test_a_size_beyond_64_bits_is_refused_before_allocating(make: Any) -> None:
    """``2**61 + 1`` rows of 8 f32 is 2**66 bytes: numpy's int64 product wrapped to a 32-byte allocation."""
    with pytest.raises(tile.ArgumentError, match=r"beyond the \d+-byte limit of 64-bit indexing; use a smaller shape"):
        make(f32, [2**61 + 1, 8])


@pytest.mark.parametrize("make", [tile.empty, tile.zeros, tile.rand])
def test_a_size_the_host_cannot_hold_is_a_typed_error(make: Any) -> None:
    """Within 64 bits but beyond the host's memory: numpy's MemoryError becomes a TileError that says what to do."""
    with pytest.raises(tile.HostMemoryError, match="the host cannot allocate this tensor") as info:
        make(f32, [2**45])
    assert isinstance(info.value, MemoryError)
    assert "smaller shape" in str(info.value)


def test_full_refuses_a_size_beyond_64_bits() -> None:
    with pytest.raises(tile.ArgumentError, match="64-bit"):
        tile.full(f32, [2**62, 2**3], 1.0)


def test_a_view_never_reaches_outside_its_memory() -> None:
    t = tile.arange(f32, 8)
    with pytest.raises(tile.ArgumentError, match="beyond the 64-bit index range") as info:
        t[:: 2**70]  # one element, but a stride no kernel index can hold
    assert "smaller extents or steps" in str(info.value)
    np.testing.assert_array_equal(t.to_numpy(), np.arange(8))  # nothing changed


def test_a_tile_beyond_what_tile_ir_encodes_is_an_argument_error() -> None:
    """A 2**40-element tile passed every check and crashed the bytecode writer with a builtin OverflowError."""
    t = tile.zeros(f32, [8])
    with pytest.raises(tile.ArgumentError, match=r"at most 2\*\*30"):
        t.partition([2**40])
    assert not t.moved


def test_zero_dimensional_tensors_keep_their_shape() -> None:
    """np.ascontiguousarray turned a 0-d array into shape (1,): tile.zeros(f32, []) was a 1-element vector."""
    assert tile.zeros(f32, []).shape == ()
    assert tile.full(f32, [], 3.0).to_numpy() == np.float32(3.0)
    assert tile.from_numpy(np.float32(2.0)).shape == ()


def test_malformed_call_inputs_are_typed_errors(k: ModuleType) -> None:
    with pytest.raises(tile.ArgumentError, match="const generic B='x' must be an int"):
        k.add(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8]), tile.ones(f32, [8]), B="x")
    with pytest.raises(tile.ArgumentError, match="cannot borrow ndarray: DLPack only supports"):
        tile.from_dlpack(np.array([object()]))


def test_a_zero_step_is_an_argument_error() -> None:
    t = tile.arange(f32, 8)
    with pytest.raises(tile.ArgumentError, match="step cannot be zero"):
        t[::0]
    with pytest.raises(tile.ArgumentError, match="bad slice"):
        t["a":]  # type: ignore[misc]  # the attack: a slice of non-ints


# -- 2. copies -------------------------------------------------------------------------------------------------


def _handles() -> list[Any]:
    return [
        tile.zeros(f32, [8]),
        tile.zeros(f32, [8]).partition([4]),
        tile.zeros(f32, [8]).share(),
        tile.zeros(f32, [8]).lend(),
    ]


@pytest.mark.parametrize("attempt", [copy.copy, pickle.dumps], ids=["copy", "pickle"])
def test_handles_cannot_be_cloned(attempt: Any) -> None:
    """A shallow copy is a second live handle the registry does not know: two launches could write one output."""
    for handle in _handles():
        with pytest.raises(tile.HandleCopyError, match="second owner") as info:
            attempt(handle)
        assert type(handle).__name__ in str(info.value)
        assert not handle.moved if hasattr(handle, "moved") else True


def test_a_cloned_output_cannot_race_its_original(k: ModuleType) -> None:
    z = tile.zeros(f32, [8]).partition([4])
    with pytest.raises(tile.HandleCopyError, match=r"copy\.copy of Partition"):
        copy.copy(z)
    z, _, _ = k.add(z, tile.ones(f32, [8]), tile.ones(f32, [8])).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(8, 2.0))


def test_deepcopy_is_a_copy_of_the_values_in_new_memory(k: ModuleType) -> None:
    t = tile.arange(f32, 8)
    twin = copy.deepcopy(t)
    np.testing.assert_array_equal(twin.to_numpy(), np.arange(8))
    z = t.partition([4])  # the twin shares nothing with t, so t's memory is still exclusive
    z, _, _ = k.add(z, tile.ones(f32, [8]), tile.ones(f32, [8])).sync()
    np.testing.assert_array_equal(twin.to_numpy(), np.arange(8))
    part = copy.deepcopy(z)
    assert part.tile_shape == (4,)
    np.testing.assert_array_equal(part.unpartition().to_numpy(), np.full(8, 2.0))
    shared = copy.deepcopy(tile.arange(f32, 4).share())
    np.testing.assert_array_equal(shared.to_numpy(), np.arange(4))


# -- 4. self-overlapping outputs ----------------------------------------------------------------------------------


def _overlapping_layouts() -> list[np.ndarray]:
    base = np.zeros(16, np.float32)
    stride0 = np.lib.stride_tricks.as_strided(base, (8,), (0,), writeable=True)
    window = np.lib.stride_tricks.sliding_window_view(base, 4, writeable=True)  # rows overlap by 3 elements
    rows = np.lib.stride_tricks.as_strided(base, (4, 4), (8, 4), writeable=True)  # row i starts at 2*i
    return [stride0, window, rows]


@pytest.mark.parametrize("layout", range(3), ids=["stride0", "sliding-window", "overlapping-rows"])
def test_an_output_that_overlaps_itself_is_refused(layout: int) -> None:
    array = _overlapping_layouts()[layout]
    t = tile.from_dlpack(array)
    tiles = [4] * array.ndim
    with pytest.raises(tile.AliasError, match="maps different elements to the same memory") as info:
        t.partition(tiles)
    assert THIS in str(info.value)  # the user's line
    assert ".copy()" in str(info.value)
    assert not t.moved
    t.copy().partition(tiles)  # a contiguous copy is fine


def test_dense_sliced_and_permuted_outputs_stay_accepted() -> None:
    outputs = (tile.zeros(f32, [8, 8]), tile.zeros(f32, [8, 16])[:, ::2], tile.zeros(f32, [4, 8]).T)
    assert [t.partition([4, 4]).grid for t in outputs] == [(2, 2), (2, 2), (2, 1)]


# -- 7. re-imports of Tile memory ---------------------------------------------------------------------------------


def test_a_reimport_through_an_array_interface_keeps_the_memory(k: ModuleType) -> None:
    """A borrow of Tile memory made through another interface used to be untracked: free the tensor and the borrow
    read freed, reused memory."""
    x = tile.arange(f32, 64)
    y = tile.from_dlpack(Interface(x.data_ptr(), 64, readonly=True))
    storage = x._storage
    x.free()
    junk = [tile.full(f32, [64], -1.0) for _ in range(32)]  # would reuse the freed bytes
    assert storage.host is not None, "the free is deferred while the borrow lives"
    np.testing.assert_array_equal(y.to_numpy(), np.arange(64))
    z, y, _ = k.add(tile.zeros(f32, [64]).partition([16]), y, junk[0]).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(64) - 1.0)
    del y
    gc.collect()
    assert storage.dropped, "the deferred free happened once the borrow was gone"


def test_a_reimport_of_our_own_export_keeps_the_memory() -> None:
    x = tile.arange(f32, 16)
    y = tile.from_dlpack(np.from_dlpack(x))
    x.free()
    np.testing.assert_array_equal(y.to_numpy(), np.arange(16))


# -- 10. a deferred free and the overlap checks ----------------------------------------------------------------


def test_a_deferred_free_still_counts_its_pending_reader(k: ModuleType) -> None:
    """Freeing a view of ``x`` while a launch reads ``x`` defers the free; the overlap scan skipped freed memory, so
    a foreign alias of ``x`` refused as an output before the free was accepted right after it."""
    x = tile.arange(f32, 8)
    view = x[:]
    op = k.add(tile.zeros(f32, [8]).partition([4]), x, tile.ones(f32, [8]))  # reads x, not run yet
    alias = tile.from_dlpack(Interface(view.data_ptr(), 8))
    with pytest.raises(tile.BorrowError, match="exclusive memory"):
        alias.partition([4])
    view.free()  # deferred: the launch still reads the memory
    with pytest.raises(tile.BorrowError, match="exclusive memory") as info:
        alias.partition([4])
    assert "moved into" not in str(info.value)
    z, _, _ = op.sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(8) + 1.0)
    alias.partition([4])  # the reader is done: nothing live overlaps the alias any more


# -- 13. exports are read-only ------------------------------------------------------------------------------------


def test_dlpack_exports_are_read_only() -> None:
    x = tile.arange(f32, 8)
    view = np.from_dlpack(x)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 5.0
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__()  # a legacy consumer cannot be told "read-only": refused, not handed writable memory
    np.testing.assert_array_equal(x.to_numpy(), np.arange(8))


def test_a_lent_tensor_is_the_one_writable_export(k: ModuleType) -> None:
    x = tile.arange(f32, 8)
    lent = x.lend()
    with pytest.raises(tile.MovedError, match=r"moved into \.lend\(\)") as moved:
        x.to_numpy()
    assert ".reclaim()" in str(moved.value)
    writable = np.from_dlpack(lent)
    writable[:] = 3.0
    with pytest.raises(tile.BorrowError, match="still alive") as info:
        lent.reclaim()
    assert "del arr" in str(info.value)
    del writable
    gc.collect()
    x = lent.reclaim()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 3.0))
    with pytest.raises(tile.MovedError, match="reclaimed at"):
        np.from_dlpack(lent)


def test_lending_needs_exclusive_memory() -> None:
    x = tile.arange(f32, 8)
    view = x[2:4]
    with pytest.raises(tile.BorrowError, match=r"cannot lend .* exclusive memory") as info:
        x.lend()
    assert "del view" in str(info.value)
    del view
    x.lend()


# -- the same attacks on the GPU ----------------------------------------------------------------------------------


@pytest.fixture
def on_gpu() -> Any:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.parametrize("make", [tile.empty, tile.zeros])
@pytest.mark.gpu
def test_gpu_size_beyond_64_bits_is_refused(on_gpu: None, make: Any) -> None:
    with pytest.raises(tile.ArgumentError, match="64-bit"):
        make(f32, [2**61 + 1, 8])


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_expanded_torch_output_is_refused(on_gpu: None, k: ModuleType) -> None:
    torch = pytest.importorskip("torch")
    out = torch.zeros(1, device="cuda").expand(1024)  # stride 0: every index is one element
    torch.cuda.synchronize()
    t = tile.from_dlpack(out)
    with pytest.raises(tile.AliasError, match="same memory"):
        t.partition([128])
    z, _, _ = k.add(t.copy().partition([128]), tile.ones(f32, [1024]), tile.ones(f32, [1024])).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(1024, 2.0, np.float32))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_reimport_through_another_library_keeps_the_memory(on_gpu: None, k: ModuleType) -> None:
    """The review's crash: re-import a tensor through another library's view of it, free it, and launch a kernel
    reading the borrow. The free is now deferred until the borrow is gone (compute-sanitizer runs this). The view
    is a DLPack one: ``__cuda_array_interface__``, whose consumer Tile cannot track, is refused (review 14)."""
    torch = pytest.importorskip("torch")
    n = 1 << 16
    x = tile.arange(f32, n)
    with pytest.raises(tile.UntrackedExportError, match="from_dlpack"):
        x.__cuda_array_interface__  # noqa: B018  # reading the property is the export
    y = tile.from_dlpack(torch.from_dlpack(x))
    x.free()
    junk = [tile.full(f32, [n], -1.0) for _ in range(8)]  # the pool would hand the freed block out again
    z, y, _ = k.add(tile.zeros(f32, [n]).partition([1024]), y, junk[0]).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(n, dtype=np.float32) - 1.0)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(n, dtype=np.float32))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_copies_and_exports(on_gpu: None, k: ModuleType) -> None:
    z = tile.zeros(f32, [1024]).partition([128])
    with pytest.raises(tile.HandleCopyError, match=r"copy\.copy of Partition.*handles cannot be copied"):
        copy.copy(z)
    twin = copy.deepcopy(z)
    z, _, _ = k.add(z, tile.ones(f32, [1024]), tile.ones(f32, [1024])).sync()
    np.testing.assert_array_equal(twin.unpartition().to_numpy(), np.zeros(1024, np.float32))
    x = z.unpartition()
    assert not hasattr(x, "__cuda_array_interface__")  # untracked: exports go through DLPack, read-only
    with pytest.raises(BufferError, match="legacy capsule"):
        x.__dlpack__()


# -- what a launch checked cannot change under it ----------------------------------------------------------------


def test_checked_attributes_of_handles_are_read_only(k: ModuleType) -> None:
    """``t.dtype = f64`` on an f32 tensor would double the bytes a kernel reads; ``z.tile_shape = (3,)`` would skip
    the partition checks; ``s.users = 0`` would let ``unshare`` give a pending reader's input to a writer."""
    t = tile.zeros(f32, [8])
    with pytest.raises(tile.FrozenError, match=r"\.dtype is read-only") as info:
        t.dtype = tile.f64
    assert "from_numpy" in str(info.value)
    z = tile.zeros(f32, [8]).partition([4])
    with pytest.raises(tile.FrozenError, match=r"\.tile_shape is read-only"):
        z.tile_shape = (3,)
    s = tile.ones(f32, [8]).share()
    op = k.add(z, s, s)
    with pytest.raises(tile.FrozenError, match=r"\.users is read-only"):
        s.users = 0
    with pytest.raises(tile.BorrowError, match="not done"):
        s.unshare()
    z, _, _ = op.sync()
    assert (t.dtype, z.tile_shape, s.users) == (f32, (4,), 0)
    np.testing.assert_array_equal(s.unshare().to_numpy(), np.ones(8))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_lend_to_torch_and_reclaim(on_gpu: None, k: ModuleType) -> None:
    """The checked way to let another library write Tile memory: lend, let torch write, reclaim, launch."""
    torch = pytest.importorskip("torch")
    t = tile.zeros(f32, [1024])
    lent = t.lend()
    view = torch.from_dlpack(lent)
    torch.cuda._sleep(100_000_000)  # keep torch's stream busy, so the fill below is still queued at reclaim()
    view.fill_(2.0)  # queued on torch's stream: reclaim() must wait for it (no torch.cuda.synchronize() here)
    with pytest.raises(tile.BorrowError, match="still alive"):
        lent.reclaim()
    del view
    gc.collect()
    z, _, _ = k.add(tile.zeros(f32, [1024]).partition([128]), lent.reclaim(), tile.ones(f32, [1024])).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(1024, 3.0, np.float32))


def test_user_code_run_by_a_kernel_call_cannot_use_handles_in_flight(k: ModuleType) -> None:
    """A kernel call may take handles in flight; user code it runs meanwhile (a const generic's ``__int__`` and
    ``__hash__``; a scalar's methods no longer run, see test_adversarial_review6) may not: the admission is the call's
    own checks, not a switch that is on for the whole thread while the call runs."""
    seen: list[str] = []
    escaped: list[Any] = []

    def probe() -> None:
        try:
            escaped[0].to_numpy()
            seen.append("read")
        except tile.InFlightError:
            seen.append("refused")

    class Sneaky(int):
        def __int__(self) -> int:
            probe()
            return 4

        def __hash__(self) -> int:
            probe()
            return 4

    def chain(out: tuple[Any, ...]) -> Any:
        escaped.append(out[1])  # an input of the first launch, which may still be reading it
        return k.scale(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8]), 3, B=Sneaky(4))

    z, _, _ = k.add(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8]), tile.ones(f32, [8])).then(chain).sync()
    assert seen
    assert set(seen) == {"refused"}
    np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(8, 3.0))
    np.testing.assert_array_equal(escaped[0].to_numpy(), np.ones(8))  # live again once the chain is done


@pytest.mark.parametrize("theft", ["partition", "free"])
def test_user_code_run_by_the_checks_cannot_change_what_is_moved(k: ModuleType, theft: str) -> None:
    """A const generic's ``__eq__`` (comparing with the latest plan's) and ``__hash__`` (the layout key, after the
    handles were checked) run user code in a kernel call: if it partitions an input (a second writer) or frees it (a
    use after free), the launch must not go ahead with stale checks. (A scalar's methods no longer run at all: see
    test_adversarial_review6.)"""
    target: list[Any] = []
    stolen: list[Any] = []

    def steal() -> None:
        if target:
            victim = target.pop()
            stolen.append(victim.partition([4]) if theft == "partition" else victim.free())

    class Sneaky(int):
        def __hash__(self) -> int:
            steal()
            return 4

        def __eq__(self, other: object) -> bool:
            steal()
            return int(self) == other

    z, x, _ = k.scale(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8]), 3, B=Sneaky(4)).sync()  # a plan
    z, x, _ = k.scale(z, x, 3, B=Sneaky(4)).sync()  # and its fast path is warm
    target.append(x)
    error = tile.MovedError if theft == "partition" else tile.FreedError
    with pytest.raises(error, match=rf"(moved into \.partition\(\)|freed) at .*{THIS}:\d+"):
        k.scale(z, x, 3, B=Sneaky(4))
    assert stolen
    assert not z.moved  # the failed call moved nothing


# -- 15. a second borrow of memory a writer holds --------------------------------------------------------------------


def test_a_second_borrow_of_a_pending_output_is_refused(k: ModuleType) -> None:
    """Borrowing foreign memory twice made a second handle the first borrow's partition never saw: while a launch
    wrote the partition, the second handle read (or passed as an input) the bytes mid-kernel."""
    a = np.zeros(8, np.float32)
    p = tile.from_dlpack(a).partition([4])
    op = k.fill(p, 3.0)  # holds the partition: may run at any moment from now on
    with pytest.raises(tile.BorrowError, match=r"a writer holds .*Partition\(f32, \[8\] in tiles of \[4\]\)") as info:
        tile.from_dlpack(a)
    assert THIS in str(info.value)
    assert "unpartition()" in str(info.value)
    with pytest.raises(tile.BorrowError, match="a writer holds"):
        tile.from_dlpack(Interface(a.ctypes.data + 4, 2))  # any overlapping range, through any interface
    z, _ = op.sync()
    with pytest.raises(tile.BorrowError, match="a writer holds"):
        tile.from_dlpack(a)  # done, but still partitioned: the next launch may write it
    t = z.unpartition()
    np.testing.assert_array_equal(tile.from_dlpack(a).to_numpy(), np.full(8, 3.0))
    del t


def test_a_borrow_of_tile_memory_under_a_partition_is_refused(k: ModuleType) -> None:
    x = tile.zeros(f32, [8])
    address = x.data_ptr()
    p = x.partition([4])
    op = k.fill(p, 1.0)
    with pytest.raises(tile.BorrowError, match="a writer holds"):
        tile.from_dlpack(Interface(address, 8, readonly=True))
    # Memory no Tile handle holds is borrowed meanwhile (numpy's own: the address just past the tensor was used
    # here, and a handle of another test not yet collected could sit there, which made the test flaky).
    free = np.zeros(8, np.float32)
    tile.from_dlpack(Interface(free.ctypes.data, 8, readonly=True)).to_numpy()
    op.sync()


def test_a_borrow_of_lent_memory_is_refused() -> None:
    """While lent, no Tile handle may read the memory the other library writes (the loan's promise)."""
    lent = tile.zeros(f32, [8]).lend()
    arr = np.from_dlpack(lent)
    with pytest.raises(tile.BorrowError, match=r"a writer holds .*Lent\(f32, \[8\]\)"):
        tile.from_dlpack(arr)
    arr[:] = 2.0
    del arr
    t = lent.reclaim()
    np.testing.assert_array_equal(tile.from_dlpack(Interface(t.data_ptr(), 8)).to_numpy(), np.full(8, 2.0))


# -- 16. a collector run inside a step ------------------------------------------------------------------------------


class _Thief:
    """Garbage in a cycle whose ``__del__`` waits for a collection inside a step (OWNERSHIP held by this thread), then
    takes the partition back; each run that waits leaves a new thief for the next collection."""

    def __init__(self, p: Any, log: list[Any]) -> None:
        self.p, self.log, self.me = p, log, self

    def __del__(self) -> None:
        from tile.frontend._storage import OWNERSHIP

        # Inside a step: OWNERSHIP held by this thread (a C RLock's _is_owned), past the lock's own acquisition.
        locking = sys._getframe(1).f_code.co_name in ("locked", "__enter__")
        inside = OWNERSHIP._is_owned() and not locking  # type: ignore[attr-defined]
        self.log.append(inside)
        if inside:
            self.log.append(self.p.unpartition())
        elif len(self.log) < 10_000 and self.p is not None:
            _Thief(self.p, self.log)


def test_the_collector_never_runs_a_finalizer_between_a_check_and_its_move(k: ModuleType) -> None:
    """OWNERSHIP is re-entrant: a user's ``__del__`` run by the cyclic collector in the middle of a launch could
    unpartition the partition the launch had checked and was about to move; the launch then wrote memory a live
    tensor viewed (seen: the launch was made, the stolen tensor was live, and the launch failed in .sync()). The
    collector is paused in every step."""
    k.fill(tile.zeros(f32, [8]).partition([4]), 1.0).sync()  # the plan exists: the fast path runs
    log: list[Any] = []
    p = tile.zeros(f32, [8]).partition([4])
    _Thief(p, log)
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # a collection at almost every allocation
    try:
        z, _ = k.fill(p, 3.0).sync()
        z = z.unpartition()
    finally:
        gc.set_threshold(*threshold)
    assert len(log) > 10, "the collector ran the finalizer many times during the launch"
    assert True not in log, "a finalizer ran inside a step"
    np.testing.assert_array_equal(z.to_numpy(), np.full(8, 3.0))
    log.append(False)
    log.extend([False] * 10_000)  # the last thief stops renewing
    gc.collect()


def test_a_moved_handle_names_the_call_that_moved_it() -> None:
    """After .unshare() or .reclaim(), the MovedError's fix named .unpartition() (noticed by the test audit)."""
    shared = tile.zeros(f32, [8]).share()
    shared.unshare()
    with pytest.raises(tile.MovedError, match=r"unshared at .*use the Tensor that \.unshare\(\) returned"):
        shared.unshare()
    lent = tile.zeros(f32, [8]).lend()
    lent.reclaim()
    with pytest.raises(tile.MovedError, match=r"reclaimed at .*use the Tensor that \.reclaim\(\) returned"):
        lent.reclaim()


# -- 17. a scalar that claims to be an int ----------------------------------------------------------------------------


@pytest.mark.parametrize("theft", ["unpartition", "free_input"])
def test_a_scalar_spoofing_its_class_cannot_take_a_checked_handle(k: ModuleType, theft: str) -> None:
    """``__class__ = int`` made a user scalar pass the plan's plain-type test (read through ``.__class__``), so the
    handles were not checked again after its ``__int__`` ran: that ``__int__`` unpartitioned the checked output (two
    writers of one memory) or freed the checked input (a launch over freed memory), and the launch was still made.
    Now a scalar's type is read with type(): the object is no number, refused before any of its code runs."""
    z, x = tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8])
    z, x, _ = k.scale(z, x, 2).sync()  # the plan the next call would take
    stolen: list[Any] = []

    class Spoof:
        __class__ = int  # isinstance(Spoof(), int) is True; type() is not int

        def __int__(self) -> int:
            if not stolen:
                stolen.append(z.unpartition() if theft == "unpartition" else x.free())
            return 3

        __index__ = __int__

    with pytest.raises(tile.ArgumentError, match=r"argument 'n' of scale\(\) is a i32 scalar, got Spoof"):
        k.scale(z, x, Spoof())
    assert not stolen, "none of the object's code ran"
    z, x, _ = k.scale(z, x, 3).sync()  # both handles still usable
    assert z.unpartition().to_numpy().tolist() == [3.0] * 8


# -- 18. a dim longer than 32-bit tile indices -----------------------------------------------------------------------


def test_a_dim_longer_than_32_bit_indices_is_refused_at_the_launch(k: ModuleType) -> None:
    """Tile indices are 32-bit: ``z.subtiles((1,))`` on a 2**32 + 2**24 element output wrapped block 256's base onto
    block 0's tile (a review found it with a DataRaceError on the interpreter; a GPU would overwrite silently)."""
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (2**31,), (0,))  # no memory behind it
    x = tile.from_dlpack(huge)
    with pytest.raises(tile.ArgumentError, match=r"argument 'x' of add\(\) has 2147483648 elements along dim 0"):
        k.add(tile.zeros(f32, [8]).partition([4]), x, tile.ones(f32, [8]))
    assert not x.moved
