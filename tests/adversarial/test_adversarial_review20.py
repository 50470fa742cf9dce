"""Review 20: an adversarial look, from safe code only, at the launch/composition path the last session moved into C
(``then``/``run_links``/``release_links``, the compiled claim and run of a ``.then()`` step, ``sync``) and its Python
twins, tile.aio's combinators, and tile.core's checked relaunch. Each hole's test names it, failed before its fix (both
launch paths) and asserts the behaviour or the typed error.

Holes found and fixed (bad input left state changed, no memory-safety hole):

- ``op.unzip(n)`` with ``n < 1`` returned no op at all and raised nothing: the op was moved into nothing, its work
  could never run and its outputs never came back (``unzip(0)`` / ``unzip(-1)``); a non-int ``n`` (``2.0``) raised a
  bare TypeError from ``range`` after the op was already moved. Now `OpTypeError` before the claim.
- ``zip(a, b)`` / ``collect([a, b])`` claimed the ops one by one: a refused later argument (not an op, an op consumed
  before, the same op twice) raised after the earlier ops were moved into a zip that was never made, so the caller's
  good launch was lost (``OpConsumedError`` naming a zip that does not exist). Now every argument is checked first and
  a refused claim gives back the claims made.

Tried and found solid (tests below where cheap, else reasoned):

- ``.then()`` functions that re-enter: returning the chain's own source or the chain itself (claimed:
  OpConsumedError), a ``.shared()`` op used as both source and result (released once), a plain value (OpTypeError on
  both paths, same message), dropping the last reference to the chain and collecting garbage mid-run (``run_links``
  holds every link and INCREFs the function and site it calls), raising after moving the in-flight output into a launch
  kept elsewhere (that launch runs later, ordered after the producer; the chain's pending counts go back once), calling
  ``.sync()``/``await``/``.graph()``/``capture`` (ExecutionLockError), running one chain from two threads (one claim
  wins under ``_CLAIMING``, the other OpConsumedError). ``release_links`` empties a link's slots before the references
  die, so a function's ``__del__`` running mid-release sees a consistent tree; the C ``then``'s cached fate holds its
  code object (no address reuse). ``execute``'s lent-fate reuse compares the context by identity, and a capture's
  recorder is a new context each time, so a plan's lent fate never stands in for a "captured" one.
- the C relaunch of a tile.core PreparedLaunch: frontend launches prepare with no tracked buffers (their own pending
  counts keep the memory), the epoch and host-function guard as in ``PreparedLaunch.__call__``.

Left: ``unzip(n)`` with a huge ``n`` builds ``n`` element ops up front (memory, not safety).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile import aio
from tile.frontend import f32


def _launch(kernels: ModuleType, c: float = 2.0) -> Any:
    return kernels.scale_by_const(tile.zeros(f32, [64]).partition([32]), tile.ones(f32, [64]), c)


def _result(out: tuple[Any, ...]) -> Any:
    return out[0].unpartition().to_numpy()


@pytest.mark.parametrize("n", [0, -1, 2.0, "2", None])
def test_unzip_of_no_length_is_refused_before_the_op_is_moved(kernels: ModuleType, path: str, n: Any) -> None:
    op = _launch(kernels)
    with pytest.raises(aio.OpTypeError, match=r"\.unzip\(n\) gave .*expected an int n >= 1"):
        op.unzip(n)
    assert not op.consumed, "the refused unzip moved the op into nothing"
    assert (_result(op.sync()) == 2.0).all()


def test_unzip_takes_an_index_once(path: str) -> None:
    class Lying:
        calls = 0

        def __index__(self) -> int:
            Lying.calls += 1
            return 2 if Lying.calls == 1 else 0

    first, second = aio.value((1, 2)).unzip(Lying())  # type: ignore[call-overload]
    assert (first.sync(), second.sync()) == (1, 2)
    assert Lying.calls == 1


def _not_an_op(op: Any) -> Any:
    return aio.zip(op, 5)  # type: ignore[call-overload]


def _twice(op: Any) -> Any:
    return aio.zip(op, op)


def _collect_consumed(op: Any) -> Any:
    used = aio.value(1)
    used.sync()
    return aio.collect([op, used])


def _collect_not_an_op(op: Any) -> Any:
    return aio.collect([op, "x"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("combine", "error", "match"),
    [
        (_not_an_op, aio.OpTypeError, "argument 1 of zip"),
        (_twice, aio.OpConsumedError, "moved into zip"),
        (_collect_consumed, aio.OpConsumedError, "executed by .sync"),
        (_collect_not_an_op, aio.OpTypeError, "item 1 given to collect"),
    ],
    ids=["zip-not-an-op", "zip-twice", "collect-consumed", "collect-not-an-op"],
)
def test_a_refused_zip_or_collect_leaves_the_good_ops_usable(
    kernels: ModuleType, path: str, combine: Any, error: type[Exception], match: str
) -> None:
    op = _launch(kernels, 3.0)
    with pytest.raises(error, match=match):
        combine(op)
    assert not op.consumed, "the good op was moved into a zip/collect that was never made"
    assert (_result(op.sync()) == 3.0).all()


def test_a_zip_whose_second_op_was_consumed_keeps_a_shared_op_shared(path: str) -> None:
    s = aio.value(4).shared()
    used = aio.value(1)
    used.sync()
    with pytest.raises(aio.OpConsumedError, match=r"executed by \.sync"):
        aio.zip(s, used)
    assert aio.zip(s, s).sync() == (4, 4)


def test_then_function_that_re_enters_its_chain(kernels: ModuleType, path: str) -> None:
    """A .then() function returning the chain itself, or the source it was built on: OpConsumedError on both paths,
    and the source's output is handed back once (its pending counts back to zero)."""
    x = tile.ones(f32, [64])
    storage = x._storage
    src = kernels.scale_by_const(tile.zeros(f32, [64]).partition([32]), x, 2.0)
    del x
    box: list[Any] = []
    chain = src.then(lambda out: box[0])
    box.append(chain)
    with pytest.raises(aio.OpConsumedError, match=r"executed by \.sync"):
        chain.sync()
    box.clear()
    assert storage.pending == 0
    src2 = _launch(kernels)
    chain2 = src2.then(lambda out: src2)
    with pytest.raises(aio.OpConsumedError, match=r"moved into \.then\(\)"):
        chain2.sync()


def test_then_function_that_raises_after_moving_the_output_elsewhere(kernels: ModuleType, path: str) -> None:
    """The launch made from the in-flight output and kept runs later, ordered after the producer; the chain's counts
    go back once."""
    x = tile.ones(f32, [64])
    storage = x._storage
    stash: list[Any] = []

    def keep_and_fail(out: Any) -> Any:
        stash.append(kernels.scale_by_const(out[0], out[1], 5.0))
        raise KeyError("the function failed")

    chain = kernels.scale_by_const(tile.zeros(f32, [64]).partition([32]), x, 2.0).then(keep_and_fail)
    del x
    with pytest.raises(KeyError, match="the function failed"):
        chain.sync()
    assert storage.pending == 1, "only the kept launch holds the input"
    out = stash.pop().sync_on(aio.HostStream())
    assert storage.pending == 0
    np.testing.assert_array_equal(_result(out), np.full(64, 5.0, np.float32))


@pytest.mark.parametrize("method", ["then", "map"])
def test_then_and_map_refuse_a_non_callable_before_moving_the_op(method: str) -> None:
    # `.then(5)` used to be accepted and fail with a bare TypeError only when the chain ran, after the op's work.
    op = aio.value(3)
    with pytest.raises(aio.OpTypeError, match=rf"passed to \.{method}\(\) gave int, expected a callable"):
        getattr(op, method)(5)
    assert op.sync_on(aio.HostStream()) == 3  # still the caller's, and it runs


@pytest.mark.parametrize("make", ["host_call", "with_context"])
def test_host_call_and_with_context_refuse_a_non_callable_when_made(make: str) -> None:
    # Both failed only when executed, with an untyped TypeError.
    with pytest.raises(aio.OpTypeError, match=rf"passed to {make}\(\) gave str, expected a callable"):
        getattr(aio, make)("print")
