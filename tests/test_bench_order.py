"""``benchmarks/bench_frontend.py``'s ``interleaved``: the order its rounds visit the contenders in.

A fixed order biased ``bench_lang_fmha.py`` by 4-6% (its docstring, "Order bias"): a contender's GPU time follows
what ran just before it. Shuffled rounds must give every contender varied predecessors and still time each once a
round; fixed and reversed orders stay available to show the bias.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_frontend as bench  # noqa: E402 - benchmarks/, put on the path above


def test_fixed_and_reversed_orders_are_the_same_every_round() -> None:
    assert bench.round_orders(4, 3, "fixed") == [[0, 1, 2, 3]] * 3
    assert bench.round_orders(4, 3, "reversed") == [[3, 2, 1, 0]] * 3


def test_shuffled_rounds_visit_each_contender_once_with_varied_predecessors() -> None:
    count, rounds = 17, 15  # bench_lang_fmha's contenders and rounds
    orders = bench.round_orders(count, rounds, "shuffled", seed=64)
    assert len(orders) == rounds
    assert all(sorted(order) == list(range(count)) for order in orders)
    predecessors: dict[int, set[int]] = {i: set() for i in range(count)}
    for order in orders:
        for before, after in itertools.pairwise(order):
            predecessors[after].add(before)
    assert min(len(found) for found in predecessors.values()) >= 5
    assert bench.round_orders(count, rounds, "shuffled", seed=64) == orders  # reproducible from its seed
    assert bench.round_orders(count, rounds, "shuffled", seed=65) != orders


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(TypeError, match="order='random'"):  # tile.kernels.bench's ArgumentError
        bench.round_orders(3, 1, "random")


def test_interleaved_times_in_the_rounds_order_and_keys_every_path() -> None:
    visits: list[str] = []

    def path(name: str) -> tuple[Callable[[], None], int, int]:
        return (lambda: visits.append(name), 1, 1)

    paths: dict[str, Any] = {name: path(name) for name in "abcd"}
    found = bench.interleaved(paths, warmup=1, rounds=6, order="shuffled", seed=3)
    assert list(found) == list("abcd")
    assert all(seconds >= 0 for seconds in found.values())
    assert visits[:4] == list("abcd")  # the warm-up runs, in the given order
    want = [name for order in bench.round_orders(4, 6, "shuffled", seed=3) for name in ("abcd"[i] for i in order)]
    assert visits[4:] == want
    assert len({tuple(visits[4 + 4 * r : 8 + 4 * r]) for r in range(6)}) > 1  # not one order every round


def test_settle_runs_each_path_untimed_just_before_its_timed_sample() -> None:
    visits: list[str] = []

    def path(name: str) -> tuple[Callable[[], None], int, int]:
        return (lambda: visits.append(name), 1, 1)

    paths: dict[str, Any] = {name: path(name) for name in "ab"}
    found = bench.interleaved(paths, warmup=0, rounds=2, order="reversed", settle=2)
    assert visits == ["b"] * 3 + ["a"] * 3 + ["b"] * 3 + ["a"] * 3  # 2 untimed then 1 timed, per path and round
    assert set(found) == {"a", "b"}
