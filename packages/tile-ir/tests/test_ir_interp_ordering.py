"""Release/acquire ordering between tile blocks: correctly synchronised kernels (a lock, a publication) run
clean under the race detector, and every way the synchronisation can fail to cover an access is still a race:
relaxed atomics, an acquire of another element, a tl_blk scope, a store that ends the release sequence, a failed
compare-and-swap, an access outside the token chain of the release or acquire."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_sync import DATA_LOAD, DATA_STORE, DEVICE, TL_BLK, Arr, K, Ordering, launch
from tile.ir import AtomicRMWMode, Module, TokenType, Value, interp
from tile.ir.interp import _control
from tile.ir.interp._races import _SEGMENT_PAIRS, SR, SW, R, W, candidate_pairs

# -- a lock ----------------------------------------------------------------------------------------------------


def _locked_increment(take: Any, drop: Any, scope: Any = DEVICE, *, unlock_by_store: bool = False) -> Module:
    """Every block takes a CAS spin lock, increments data[0] with plain accesses, and drops the lock."""
    k = K(2)
    with k.b.loop([k.b.make_token()], [TokenType()]) as spin:
        old, got = k.cas(0, 0, 1, spin.args[0], take, scope=scope)
        k._exit_if(k.eq(old, 0), got)
    value, loaded = k.load(1, spin.results[0], loc=DATA_LOAD)
    stored = k.store(1, k.b.addi(value, k.c(1)), loaded, loc=DATA_STORE)
    if unlock_by_store:
        k.store(0, 0, stored, drop, scope=scope)
    else:
        k.rmw(0, AtomicRMWMode.XCHG, 0, stored, drop, scope=scope)
    return k.module()


@pytest.mark.parametrize(
    ("take", "drop", "by_store"),
    [(Ordering.ACQUIRE, Ordering.RELEASE, False), (Ordering.ACQ_REL, Ordering.ACQ_REL, False),
     (Ordering.ACQUIRE, Ordering.RELEASE, True)],
)  # fmt: skip
def test_a_lock_protected_counter_is_race_free(take: Any, drop: Any, by_store: bool) -> None:
    lock, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    launch(_locked_increment(take, drop, unlock_by_store=by_store), 6, lock, data)
    assert (lock[0], data[0]) == (0, 6)


def test_a_lock_of_relaxed_atomics_protects_nothing() -> None:
    lock, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    with pytest.raises(interp.DataRaceError) as info:
        launch(_locked_increment(Ordering.RELAXED, Ordering.RELAXED), 3, lock, data)
    err = info.value
    assert err.element == "arg1[0]"
    assert err.blocks == ((0, 0, 0), (1, 0, 0))
    assert err.first[1:] == ("sync.py:10:5", "write")
    assert err.second[1] in ("sync.py:10:5", "sync.py:20:9")
    assert "neither access happens before the other" in str(err)


def test_a_lock_of_tl_blk_atomics_races_between_blocks() -> None:
    lock, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    with pytest.raises(interp.DataRaceError) as info:
        launch(_locked_increment(Ordering.ACQUIRE, Ordering.RELEASE, TL_BLK), 3, lock, data)
    err = info.value
    assert err.element == "arg0[0]", "the lock itself: tl_blk atomics of two blocks are not atomic to each other"
    assert (err.first[2], err.second[2]) == ("atomic", "atomic")
    assert "memory_scope device" in str(err)
    assert err.hint is not None
    assert "tl_blk" in err.hint
    assert pickle.loads(pickle.dumps(err)).hint == err.hint


def test_one_tl_blk_atomic_against_a_device_atomic_races_with_the_hint() -> None:
    """A tl_blk atomic is atomic only within its block, even when the other block's atomic has device scope; the
    hint names the fix. Mutant killed (scripts/mutation.py): the hint given only when both accesses are tl_blk."""
    k = K(1)
    k.when(0, lambda: k.rmw(0, AtomicRMWMode.ADD, 1, None, Ordering.RELAXED, scope=TL_BLK))
    k.when(1, lambda: k.rmw(0, AtomicRMWMode.ADD, 1, None, Ordering.RELAXED, scope=DEVICE))
    with pytest.raises(interp.DataRaceError) as info:
        launch(k.module(), 2, np.zeros(1, np.int32))
    assert (info.value.first[2], info.value.second[2]) == ("atomic", "atomic")
    assert info.value.hint is not None
    assert "memory_scope device" in info.value.hint


def test_one_block_may_use_a_tl_blk_lock() -> None:
    lock, data = np.zeros(1, np.int32), np.zeros(1, np.int32)
    launch(_locked_increment(Ordering.ACQUIRE, Ordering.RELEASE, TL_BLK), 1, lock, data)
    assert data[0] == 1


# -- publication: block 0 writes data and raises a flag, the other blocks wait for it and read the data ---------


def _publish(
    *,
    release: Any = Ordering.RELEASE,
    acquire: Any = Ordering.ACQUIRE,
    flag_rmw: bool = False,
    wait_rmw: bool = False,
    wait_on: int = 0,
    chained: bool = True,
) -> Module:
    """Pointers: data (4), flags (2), out (one per block). Block 0 publishes; the others copy data[bx % 4]."""
    k = K(3)

    def producer() -> None:
        tok = k.b.make_token()
        for i in range(4):
            tok = k.store(0, 10 + i, tok, loc=DATA_STORE, index=i)
        raised_after = tok if chained else k.b.make_token()
        if flag_rmw:
            k.rmw(1, AtomicRMWMode.XCHG, 1, raised_after, release)
        else:
            k.store(1, 1, raised_after, release)

    k.when(0, producer)
    with k.b.if_(k.b.cmpi(k.bx, k.c(0), comparison_predicate="not_equal", signedness="signed")) as br, br.then_():
        ready = k.spin_until(1, 1, acquire, rmw=wait_rmw) if wait_on == 0 else _wait_other_flag(k, acquire)
        value, got = k.load(0, ready, loc=DATA_LOAD, index=0)
        out = k.b.offset(k.ptrs[2], k.bx)
        k.b.call("store_ptr_tko", out, value, None, got)
        k.b.yield_()
    return k.module()


def _wait_other_flag(k: K, acquire: Any) -> Value:
    _, got = k.load(1, None, acquire, index=1)
    return got


def _run_publication(kernel: Module, grid: int = 4, other_flag: int = 0) -> Arr:
    data, flags, out = np.zeros(4, np.int32), np.array([0, other_flag], np.int32), np.zeros(grid, np.int32)
    launch(kernel, grid, data, flags, out)
    return out


@pytest.mark.parametrize("flag_rmw", [False, True])
@pytest.mark.parametrize("wait_rmw", [False, True])
def test_release_acquire_publication_is_race_free(flag_rmw: bool, wait_rmw: bool) -> None:
    out = _run_publication(_publish(flag_rmw=flag_rmw, wait_rmw=wait_rmw), 5)
    assert out.tolist() == [0, 10, 10, 10, 10]


@pytest.mark.parametrize(
    ("release", "acquire"), [(Ordering.RELAXED, Ordering.ACQUIRE), (Ordering.RELEASE, Ordering.RELAXED)]
)
def test_publication_through_a_relaxed_side_is_a_race(release: Any, acquire: Any) -> None:
    with pytest.raises(interp.DataRaceError) as info:
        _run_publication(_publish(release=release, acquire=acquire))
    err = info.value
    assert err.element == "arg0[0]"
    assert err.blocks == ((0, 0, 0), (1, 0, 0))
    assert (err.first[1:], err.second[1:]) == (("sync.py:10:5", "write"), ("sync.py:20:9", "read"))


def test_an_acquire_of_another_flag_orders_nothing() -> None:
    """The consumers' flag is already set, so they run on; they never read the producer's release."""
    with pytest.raises(interp.DataRaceError) as info:
        _run_publication(_publish(wait_on=1), other_flag=1)
    assert info.value.blocks == ((0, 0, 0), (1, 0, 0))
    assert info.value.element == "arg0[0]"


def test_a_release_does_not_cover_stores_outside_its_token_chain() -> None:
    """Tile IR orders a block's memory ops by tokens only: the release must come after the data stores' tokens."""
    with pytest.raises(interp.DataRaceError) as info:
        _run_publication(_publish(chained=False))
    assert info.value.first[1:] == ("sync.py:10:5", "write")


# -- release sequences, failed CAS, transitivity -------------------------------------------------------------------


def _relay(middle: Callable[[K], object], last_acquires: bool = True) -> Module:
    """Block 0 writes data[0] and release-stores flag 1; block 1 runs `middle`; block 2 reads data[0]."""
    k = K(3)
    k.when(0, lambda: k.store(1, 1, k.store(0, 7, k.b.make_token(), loc=DATA_STORE), Ordering.RELEASE))
    k.when(1, lambda: middle(k))
    k.when(2, lambda: _read_data(k, flag=1, acquires=last_acquires))
    return k.module()


def _read_data(k: K, flag: int = 0, acquires: bool = True) -> None:
    """The last block's part: acquire flag ``flag`` (unless not ``acquires``), then copy data[0] into out[0]."""
    ready = k.load(1, None, Ordering.ACQUIRE, index=flag)[1] if acquires else k.b.make_token()
    value, got = k.load(0, ready, loc=DATA_LOAD)
    k.store(2, value, got)


def _forward(k: K, chained: bool) -> None:
    """Acquire flag 0 (written by block 0) and release flag 1, the release after the acquire only when chained."""
    _, got = k.load(1, None, Ordering.ACQUIRE)
    k.store(1, 1, got if chained else k.b.make_token(), Ordering.RELEASE, index=1)


def _relay_run(kernel: Module) -> Arr:
    data, flags, out = np.zeros(1, np.int32), np.zeros(2, np.int32), np.zeros(1, np.int32)
    launch(kernel, 3, data, flags, out)
    return out


def _expect_relay(kernel: Module, race: tuple[tuple[int, int, int], ...] | None) -> None:
    """The last block reads the 7 block 0 wrote, or (``race``) the run raises DataRaceError between these blocks."""
    if race is None:
        assert _relay_run(kernel).tolist() == [7]
        return
    with pytest.raises(interp.DataRaceError) as info:
        _relay_run(kernel)
    assert info.value.blocks == race


def test_synchronisation_is_transitive_through_a_third_block() -> None:
    _expect_relay(_relay(lambda k: _forward(k, chained=True)), None)


def test_a_relay_whose_release_skips_the_acquire_token_orders_nothing() -> None:
    with pytest.raises(interp.DataRaceError) as info:
        _relay_run(_relay(lambda k: _forward(k, chained=False)))
    assert info.value.blocks == ((0, 0, 0), (2, 0, 0))
    assert info.value.count == 1


def test_a_block_that_never_acquires_races_with_the_publisher() -> None:
    """Block 1 synchronises with block 0, block 2 does not: only the pair (0, 2) races."""
    with pytest.raises(interp.DataRaceError) as info:
        _relay_run(_relay(lambda k: _forward(k, chained=True), last_acquires=False))
    assert info.value.blocks == ((0, 0, 0), (2, 0, 0))
    assert info.value.first[1:] == ("sync.py:10:5", "write")
    assert info.value.second[1:] == ("sync.py:20:9", "read")


def _flag_to_flag1(k: K, via: str) -> None:
    """Block 1 touches flag 0 after block 0's release, then copies it into flag 1 for block 2 with a release."""
    if via == "rmw":  # a relaxed read-modify-write continues block 0's release sequence
        k.rmw(1, AtomicRMWMode.ADD, 0, None, Ordering.RELAXED)
    else:  # a store starts a new value with no release behind it
        k.store(1, 1, None, Ordering.RELAXED)


@pytest.mark.parametrize(("via", "races"), [("rmw", False), ("store", True)])
def test_an_acquire_syncs_through_a_release_sequence_but_not_past_a_store(via: str, races: bool) -> None:
    """Block 2 acquires flag 0 after block 1 touched it: through a RMW it still reads block 0's release."""
    k = K(3)
    k.when(0, lambda: k.store(1, 1, k.store(0, 7, k.b.make_token(), loc=DATA_STORE), Ordering.RELEASE))
    k.when(1, lambda: _flag_to_flag1(k, via))
    k.when(2, lambda: _read_data(k))
    _expect_relay(k.module(), ((0, 0, 0), (2, 0, 0)) if races else None)


@pytest.mark.parametrize("flag_taken_first", [False, True])
def test_a_failed_compare_and_swap_releases_nothing(flag_taken_first: bool) -> None:
    """Block 1 writes data, then tries to take a flag with an acq_rel CAS; block 2 acquires the flag and reads."""
    k = K(3)
    k.when(0, lambda: k.cas(1, 0, 1, None, Ordering.ACQ_REL) if flag_taken_first else None)
    k.when(1, lambda: k.cas(1, 0, 1, k.store(0, 7, k.b.make_token(), loc=DATA_STORE), Ordering.ACQ_REL))
    k.when(2, lambda: _read_data(k))
    _expect_relay(k.module(), ((1, 0, 0), (2, 0, 0)) if flag_taken_first else None)


def test_only_the_elements_read_outside_the_acquire_are_counted() -> None:
    """Block 0 writes data[0..3] and releases; block 1 reads data[2], data[3] before its acquire, the rest after."""
    k = K(2)

    def producer() -> None:
        tok = k.b.make_token()
        for i in range(4):
            tok = k.store(0, i, tok, index=i)
        k.store(1, 1, tok, Ordering.RELEASE)

    def consumer() -> None:
        early = [k.load(0, None, loc=DATA_LOAD, index=i)[1] for i in (2, 3)]
        _, ready = k.load(1, k.b.call("join_tokens", early).results[0], Ordering.ACQUIRE)
        for i in (0, 1):
            k.load(0, ready, index=i)

    k.when(0, producer)
    k.when(1, consumer)
    with pytest.raises(interp.DataRaceError) as info:
        launch(k.module(), 2, np.zeros(4, np.int32), np.zeros(1, np.int32))
    assert (info.value.element, info.value.count) == ("arg0[2]", 2)
    assert info.value.second[1:] == ("sync.py:20:9", "read")


def test_strong_reads_do_not_race_with_plain_reads_and_strong_pairs_never_race() -> None:
    """Block 0 reads x plainly, block 1 with a relaxed load; both store relaxed into y, block 2 adds to it."""
    k = K(2)
    k.when(0, lambda: k.store(1, k.load(0, None)[0], None, Ordering.RELAXED))
    k.when(1, lambda: k.store(1, k.load(0, None, Ordering.RELAXED)[0], None, Ordering.RELAXED))
    k.when(2, lambda: k.rmw(1, AtomicRMWMode.ADD, 1, None, Ordering.RELAXED))
    x, y = np.full(1, 5, np.int32), np.zeros(1, np.int32)
    launch(k.module(), 3, x, y)
    assert y[0] == 6


def test_a_spin_on_a_later_block_stops_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks run in order, so block 0 waiting for block 1's flag cannot finish here (it would on a device)."""
    monkeypatch.setattr(_control, "MAX_LOOP_ITERATIONS", 40)
    k = K(1)
    k.when(0, lambda: k.spin_until(0, 1, Ordering.ACQUIRE))
    k.when(1, lambda: k.store(0, 1, None, Ordering.RELEASE))
    with pytest.raises(interp.InterpError, match="spin lock") as info:
        launch(k.module(), 2, np.zeros(1, np.int32))
    assert info.value.block == (0, 0, 0)
    assert "waits for a later block" in str(info.value)


# -- the pair selection against brute force -------------------------------------------------------------------

_CONFLICT = {(a, b) for a in (R, SR, W, SW) for b in (R, SR, W, SW)
             if (a in (W, SW) or b in (W, SW)) and not (a in (SR, SW) and b in (SR, SW))}  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.sampled_from([R, SR, W, SW]), st.booleans()), min_size=1, max_size=14),
    st.lists(st.tuples(st.integers(0, 13), st.integers(0, 13)), max_size=6),
)
# a read of block 0, then block 1 writes the element three times, ordered after that read from its second write on
@example([(2, R, False), (2, W, True), (0, SR, False), (2, W, False), (2, W, False), (2, R, False)], [(0, 2)])
def test_candidate_pairs_find_every_racing_element(events: list[tuple[int, int, bool]],
                                                   edges: list[tuple[int, int]]) -> None:  # fmt: skip
    """Whatever transitive happens-before the blocks have, an element races iff some selected pair is unordered.

    The example kills ``_races.py:266: Add -> Sub`` (segment keys ``... - weak_writes - is_w``, which fall along an
    element where the binary search over them assumes they rise: the pair of block 0's read and block 1's first
    write, the only unordered one, is never tested)."""
    n = len(events)
    block = np.cumsum([int(new) for _, _, new in events])  # blocks run one after another
    hb = np.zeros((n, n), bool)
    for i in range(n):
        hb[i, i + 1 :] = block[i + 1 :] == block[i]  # a block's accesses are ordered (token order, assumed)
    for a, c in edges:
        if a < c < n:
            hb[a, c] = True
    for m in range(n):  # transitive closure
        hb |= hb[:, m : m + 1] & hb[m : m + 1, :]
    addr = np.asarray([e[0] for e in events])
    cls = np.asarray([e[1] for e in events])
    truth = {int(addr[a]) for a in range(n) for c in range(a + 1, n)
             if addr[a] == addr[c] and (cls[a], cls[c]) in _CONFLICT and not hb[a, c]}  # fmt: skip
    order = np.lexsort((np.arange(n), addr))
    j, k = candidate_pairs(addr[order], cls[order])
    found = {int(addr[order][x]) for x, y in zip(j.tolist(), k.tolist(), strict=True)
             if (cls[order][x], cls[order][y]) in _CONFLICT and not hb[order[x], order[y]]}  # fmt: skip
    assert found == truth
    assert all((a, b) in _CONFLICT for a, b in _SEGMENT_PAIRS)


# -- whole launches against a brute-force memory model ----------------------------------------------------------

_ORDERINGS = {
    "load": (Ordering.WEAK, Ordering.RELAXED, Ordering.ACQUIRE),
    "store": (Ordering.WEAK, Ordering.RELAXED, Ordering.RELEASE),
    "rmw": (Ordering.RELAXED, Ordering.ACQUIRE, Ordering.RELEASE, Ordering.ACQ_REL),
    "cas": (Ordering.RELAXED, Ordering.ACQUIRE, Ordering.RELEASE, Ordering.ACQ_REL),
}
Op = tuple[str, int, Any, bool, int, int]  # kind, element, ordering, tl_blk scope, value, cas compare value
_any_op = st.sampled_from(sorted(_ORDERINGS)).flatmap(
    lambda kind: st.tuples(
        st.just(kind),
        st.integers(0, 2),
        st.sampled_from(_ORDERINGS[kind]),
        st.booleans(),
        st.integers(0, 2),
        st.integers(0, 2),
    )
)
# Block programs mostly shaped like real synchronisation: plain accesses to element 0 (data) after an ordered op
# on element 1 (a flag) or before one, with orderings and scopes that may or may not synchronise.
_data = st.lists(st.tuples(st.sampled_from(["load", "store"]), st.just(0), st.just(Ordering.WEAK), st.just(False),
                           st.integers(0, 2), st.just(0)), min_size=1, max_size=2)  # fmt: skip


def _flag_op(kinds: list[str], strong: int) -> st.SearchStrategy[Op]:
    """An op on a flag (mostly element 1); `strong` picks the orderings that release or acquire more often."""
    return st.sampled_from(kinds).flatmap(
        lambda kind: st.tuples(
            st.just(kind),
            st.sampled_from([1, 1, 1, 2]),
            st.sampled_from([*_ORDERINGS[kind][1:], *_ORDERINGS[kind][strong:] * 3]),
            st.sampled_from([False] * 7 + [True]),
            st.integers(0, 1),
            st.integers(0, 1),
        )
    )


_release, _acquire = _flag_op(["store", "rmw", "cas"], 2), _flag_op(["load", "rmw", "cas"], 1)
_publisher = st.tuples(_data, _release).map(lambda t: [*t[0], t[1]])
_followers = st.one_of(
    st.tuples(_acquire, _data).map(lambda t: [t[0], *t[1]]),  # consume
    st.tuples(_acquire, _data, _release).map(lambda t: [t[0], *t[1], t[2]]),  # a critical section
    st.tuples(_acquire, _release).map(list),  # relay
)
_programs = st.one_of(
    st.tuples(_publisher, st.lists(_followers, min_size=1, max_size=3)).map(lambda t: [t[0], *t[1]]),
    st.lists(st.one_of(_publisher, _followers, st.lists(_any_op, max_size=4)), min_size=1, max_size=4),
)


def _build(programs: list[list[Op]]) -> Module:
    """Block b runs programs[b], its ops on one token chain, over a 3-element i32 array."""
    k = K(1)
    for block, program in enumerate(programs):

        def role(program: list[Op] = program) -> None:
            tok = k.b.make_token()
            for kind, elem, sem, local, value, cmp in program:
                scope = TL_BLK if local else DEVICE
                if kind == "load":
                    tok = k.load(0, tok, sem, scope=scope, index=elem)[1]
                elif kind == "store":
                    tok = k.store(0, value, tok, sem, scope=scope, index=elem)
                elif kind == "rmw":
                    tok = k.rmw(0, AtomicRMWMode.ADD, 1, tok, sem, scope=scope, index=elem)[1]
                else:
                    tok = k.cas(0, cmp, value, tok, sem, scope=scope, index=elem)[1]

        k.when(block, role)
    return k.module()


def _model_races(programs: list[list[Op]]) -> dict[int, set[tuple[int, int]]]:
    """The racing block pairs per element, from the memory model applied to the sequential run, by brute force.

    A CAS is an atomic update, so it conflicts like a write even when it fails, but only a successful one stores
    (and so releases, or ends a release sequence).
    """
    memory = [0, 0, 0]
    order: list[list[tuple[int, bool, bool]]] = [[], [], []]  # per element, its stores: (event, is RMW, releases)
    events: list[tuple[int, int, bool, bool]] = []  # block, element, writes, strong
    sync: list[tuple[int, int]] = []
    for block, program in enumerate(programs):
        for kind, elem, sem, local, value, cmp in program:
            me, strong = len(events), sem != Ordering.WEAK and not local
            if kind != "store" and strong and sem in (Ordering.ACQUIRE, Ordering.ACQ_REL):
                for earlier, rmw, release in reversed(order[elem]):  # the release sequences the value read is in
                    sync += [(earlier, me)] if release else []
                    if not rmw:
                        break
            stores = kind in ("store", "rmw") or (kind == "cas" and memory[elem] == cmp)
            if stores:
                memory[elem] = value if kind != "rmw" else memory[elem] + 1
                release = strong and sem in (Ordering.RELEASE, Ordering.ACQ_REL)
                order[elem].append((me, kind != "store", release))
            events.append((block, elem, kind != "load", strong))
    n = len(events)
    hb = np.zeros((n, n), bool)
    for i in range(n):
        hb[i, i + 1 :] = [events[j][0] == events[i][0] for j in range(i + 1, n)]
    for a, c in sync:
        hb[a, c] = True
    for m in range(n):
        hb |= hb[:, m : m + 1] & hb[m : m + 1, :]
    races: dict[int, set[tuple[int, int]]] = {}
    for i in range(n):
        for j in range(i + 1, n):
            (bi, ei, wi, si), (bj, ej, wj, sj) = events[i], events[j]
            if bi != bj and ei == ej and (wi or wj) and not (si and sj) and not hb[i, j]:
                races.setdefault(ei, set()).add((bi, bj))
    return races


_W, _REL, _ACQ, _RLX = Ordering.WEAK, Ordering.RELEASE, Ordering.ACQUIRE, Ordering.RELAXED


@settings(max_examples=200, deadline=None)
@given(_programs)
@example([[("store", 0, _W, False, 1, 0), ("store", 1, _REL, False, 1, 0)],  # block 1 ends block 0's sequence
          [("load", 1, _ACQ, False, 0, 0), ("store", 1, _RLX, False, 1, 0)],
          [("load", 1, _ACQ, False, 0, 0), ("load", 0, _W, False, 0, 0)]])  # fmt: skip
@example([[("store", 0, _W, False, 1, 0), ("cas", 1, Ordering.ACQ_REL, False, 1, 1)],  # the CAS fails
          [("rmw", 1, _ACQ, False, 0, 0), ("store", 0, _W, False, 0, 0)]])  # fmt: skip
@example([[("cas", 1, _ACQ, False, 1, 0), ("store", 0, _W, False, 1, 0), ("rmw", 1, _REL, False, 0, 0)]] * 3)
@example([[("load", 0, _W, False, 0, 0), ("store", 1, _REL, False, 1, 0)],  # block 1 joins block 0's sequence
          [("load", 0, _W, False, 0, 0), ("rmw", 1, _REL, False, 0, 0)],
          [("load", 1, _ACQ, False, 0, 0), ("store", 0, _W, False, 2, 0)]])  # fmt: skip
def test_launches_race_exactly_when_the_memory_model_says(programs: list[list[Op]]) -> None:
    races = _model_races(programs)
    cells = np.zeros(3, np.int32)
    if not races:
        launch(_build(programs), len(programs), cells)
        return
    with pytest.raises(interp.DataRaceError) as info:
        launch(_build(programs), len(programs), cells)
    err = info.value
    element = int(err.element.removeprefix("arg0[").rstrip("]"))
    assert (err.first[0][0], err.second[0][0]) in races[element]
    assert err.count == len(races)
