"""The exact race check examines one element per distinct *history* (the sequence of ops that touched it, in run
order): elements whose histories differ anywhere, however slightly, must never be grouped, or a race on one of them
hides behind an ordered example. Each test names the mutants of ``scripts/mutation.py`` it was written to kill."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_sync import DATA_LOAD, DATA_STORE, K, Ordering, launch
from tile.ir import interp
from tile.ir.interp._races import _histories


def _grouping(addr: list[int], token: list[int]) -> tuple[list[int], dict[int, int], list[int]]:
    """The brute-force answer for events sorted by address: the distinct addresses, for each address the lowest
    address with the same token sequence, and the event positions of those lowest addresses, in order."""
    sequences: dict[int, tuple[int, ...]] = {}
    for a, t in zip(addr, token, strict=True):
        sequences[a] = (*sequences.get(a, ()), t)
    first = {seq: min(a for a in sequences if sequences[a] == seq) for seq in sequences.values()}
    example_of = {a: first[seq] for a, seq in sequences.items()}
    shown = [i for i, a in enumerate(addr) if example_of[a] == a]
    return sorted(sequences), example_of, shown


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=16))
# two elements whose histories differ only in their last access (a third one sharing the second's)
@example([(0, 5), (0, 7), (1, 5), (1, 7), (2, 5), (2, 8)])
# histories of two lengths: one of length 2, two of length 3 (their ids must not meet)
@example([(0, 1), (0, 2), (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 4)])
def test_histories_group_exactly_the_elements_with_equal_sequences(events: list[tuple[int, int]]) -> None:
    """Kills ``_races.py:287: NotEq -> Eq`` (element starts taken where the address repeats), ``_races.py:293:
    Add -> Sub`` (a history read backwards from its first event, so elements whose histories differ only in their
    last access were grouped) and ``_races.py:295: Add -> Sub`` (history ids of different lengths colliding)."""
    events = sorted(events, key=lambda e: e[0])  # stable: run order within an element
    addr, token = [a for a, _ in events], [t for _, t in events]
    elements, example_of, shown = _grouping(addr, token)
    got_elements, history, positions = _histories(np.asarray(addr, np.int64), np.asarray(token, np.int64))
    assert got_elements.tolist() == elements
    ids = dict(zip(elements, history.tolist(), strict=True))
    for a in elements:
        for b in elements:
            assert (ids[a] == ids[b]) == (example_of[a] == example_of[b]), (a, b)
    assert positions.tolist() == shown


@pytest.mark.parametrize("producer_pad", range(4))
@pytest.mark.parametrize("consumer_pad", range(4))
def test_a_racing_element_next_to_an_ordered_one_is_found_whatever_the_node_ids(
    producer_pad: int, consumer_pad: int
) -> None:
    """Block 0 writes data[0], data[1] and releases a flag; block 1 acquires it, reads data[0] after the acquire and
    data[1] outside it: only data[1] races. The two elements' histories differ only in nearby token nodes (one op
    apart on each side); the pads (plain reads of a buffer no block writes) move those nodes over every alignment.

    Kills ``_races.py:211: Mult -> FloorDiv`` (history tokens ``node // 4 + cls``: nodes one apart would merge the
    two histories, and the ordered data[0], the lower element, would stand for both)."""
    k = K(3)

    def pad(n: int) -> None:
        for _ in range(n):
            k.load(2, None)

    def producer() -> None:
        pad(producer_pad)
        tok = k.store(0, 1, k.b.make_token(), loc=DATA_STORE)
        tok = k.store(0, 2, tok, index=1)
        k.store(1, 1, tok, Ordering.RELEASE)

    def consumer() -> None:
        pad(consumer_pad)
        _, ready = k.load(1, None, Ordering.ACQUIRE)
        k.load(0, ready)
        k.load(0, None, loc=DATA_LOAD, index=1)

    k.when(0, producer)
    k.when(1, consumer)
    with pytest.raises(interp.DataRaceError, match=r"arg0\[1\]") as info:
        launch(k.module(), 2, np.zeros(2, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32))
    assert (info.value.element, info.value.count) == ("arg0[1]", 1)
    assert info.value.blocks == ((0, 0, 0), (1, 0, 0))
    assert info.value.second[1:] == ("sync.py:20:9", "read")
