"""Review 37: tile.kernels attacked as a user, from safe code only, on the CPU interpreter: ``out=`` aliasing or
overlapping an input, strided / transposed outputs and inputs (numpy views borrowed through DLPack, so the memory
around a view can be read back), zero-size shapes, index values at the ends of i32/i64, NaN-holding rows, lying
int/float subclasses, and the selection kernels' edges. Each hole's test names it and failed before its fix; numerics
are compared with numpy float64.

Holes found and fixed:

- ``tk.top_k`` of a row holding NaN handed back indices outside the row: NaN is no candidate of the ranking
  (every comparison with it is false), so once a row's numbers were used up the K passes went on into the ``-inf``
  padding past its end (``[nan, 1, nan]`` with ``k=3`` gave indices ``1, 3, 2**31 - 1``; a row of 300 NaNs gave
  ``300..304``). An index past the row is a wrong answer a caller indexes with. NaNs now rank after every number,
  by index (as a sort that puts NaN last): the indices are always a permutation's prefix of ``range(N)``.
- Host index lists were cast to i32 before anything read them: ``tk.rope(x, [2**32 + 1])`` rotated the row by
  position 1 (no error, a wrong result), and a u64 id past i64 became a small one before the check. Host indices
  are now i32, or i64 when one is outside i32 (as an i64 tensor would be taken), and refused past i64.
- The selection kernels (``top_k``, ``sample``, and ``argmax_rows`` of tile.kernels.qwen3.tp, which reads every row
  as one vector) index in i32, chunk padding included, with ``2**31 - 1`` as their no-candidate mark: a row (or, for
  ``argmax_rows``, all rows) of more elements wrapped the index, a wrong (negative) id on a GPU with the memory for
  it. Refused with `ArgumentError` above ``MAX_INDEX`` (pinned with stride-0 numpy arrays, no memory needed).
  ``argmax`` itself stops earlier, at its grid's 65535 chunks a row (`GridError`).
- Zero-size results of the elementwise family (``tk.embedding`` with no ids, ``tk.swiglu``/``swiglu_fused``/
  ``rope`` of no rows or columns) failed with "cannot partition the empty tensor" (the known poor message of the
  last session): their plain forms return the empty result now, as `tk.matmul` and the row kernels do, and the
  ``*_op`` forms refuse with "nothing to launch", as `tk.matmul_op` does.
- tile.bindings kept the first `DriverNotFoundError` (no CUDA driver: the interpreter's machines) for the process
  with its traceback, and a traceback's frames hold every caller's frame above them (``f_back``) with its locals. So
  whatever the first Tile call to look for the driver had in hand lived for good: a ``tk.append_kv`` of numpy caches
  refused as that first call (a position past the cache) kept its borrow of each cache, and every later
  ``append_kv`` of those arrays was refused with `BorrowError` (memory that can never be written again). The kept
  failure and the exceptions it chains are stored without tracebacks now.
- ``bench.compare`` took any ``flops``/``nbytes``: a NaN, infinite or negative work was timed and written by
  ``to_json`` into a file its own ``from_json`` refused, and a string failed in ``to_dict`` (TypeError). Refused
  before anything runs now, by ``from_dict``'s rule. ``bench.plot`` of an infinite rate (a median time of 0, which a
  results file may hold) failed in ``nice_ticks`` with an untyped OverflowError (NaN: a bare ValueError, a count of 0:
  ZeroDivisionError): ``line_chart`` and ``nice_ticks`` refuse non-finite values with their documented ValueError,
  which ``plot`` reports as `ArgumentError`.
- ``tk.attention(config=Config.of(BM=16))`` raised a bare ``KeyError: 'BN'``: now `ArgumentError` (give BM and BN).
  ``tk.append_kv`` of more new rows than the cache has positions said "positions holds 0, outside [0, -1]"; it
  says the rows do not fit now.

Tried and held (run here or below):

- ``out=`` the same tensor as an input, a view overlapping an input, ``residual=out``, ``sum_out``/``out`` of
  `add_rmsnorm` aliasing ``x``/``residual``/each other, numpy arrays passed as both (two DLPack borrows of one
  buffer are seen as overlapping): `BorrowError`, the inputs intact. Disjoint views of one numpy buffer as input and
  out work.
- ``tk.matmul`` (plain GEMM and the M <= 16 GEMV forms, odd M/N/K), `rmsnorm`, `softmax`, `log_softmax`,
  `layernorm` (whole-row and chunked rows), `add_rmsnorm`: ``out=`` a column-strided, row-strided or transposed view
  gets the right values and nothing outside the view changes; strided and transposed inputs give the right values.
  A negative-stride numpy view is refused by DLPack's import.
- Zero-size ``matmul`` (M, N or K of 0: a zero result for K = 0), ``bmm``, the row kernels: empty results.
- ``tk.embedding``: negative ids, ids at ``V``, i64 and u64 ids past i32 (checked before any cast), floats, bools,
  2-D ids, an empty table; a table of more than 2**31 elements (a lazily allocated numpy buffer) reads its last row.
- ``top_k`` with ``k`` of 0, negative, above the row, a float or a bool; ``sample`` with a NaN, negative or infinite
  temperature, ``top_k`` negative or above `MAX_TOP_K`, a seed of ``2**100`` or negative, rows of only ``-inf`` or
  only NaN (index 0); lying ``int``/``float`` subclasses (``__index__``, ``__int__``, ``__float__``, ``__eq__`` and
  ``__gt__`` overridden): the value checked is the one used (``_args.integer``/``real`` convert once).
- ``append_kv``: positions past the cache, negative, i64 past i32, a position tensor past the cache (read and
  checked), the same array as both caches, new rows viewing a cache (`BorrowError`), zero new rows (a no-op); numpy
  caches that are column- or row-strided views get the rows and nothing outside the view changes.
- ``decode_attention``: lengths past the cache or negative (host and tensor), ``splits`` of 0 or 10**6 (clamped),
  a NaN scale, a strided 3-D q (refused: pass rows), a column-strided cache, an empty cache (S = 0).
- ``attention``: offsets outside ``[0, Sk - Sq]`` or without causal, a bool offset, head dims outside the list, a
  GQA ratio that does not divide, strided 4-D inputs (refused), token-major rows, contiguous or column-strided (right
  values), BM/BN not powers of two. A `Config` subclass whose ``__getitem__`` changes its answer after the check gets
  the partition's typed error ("tile extents must be powers of two").
- ``bench``: counts below their least, floats, bools, lying int subclasses (used as the int they are), an empty
  contenders mapping.

Noted, not changed: ``attention`` with a very large (finite) scale gives NaN where float64 gives a one-hot softmax
(the f32 scores overflow; no access outside anything); ``bench.round_orders``/``compare`` with ``rounds=10**12``
builds the whole schedule first (memory, as asked); ``decode_attention`` of an empty batch is refused with the
"must be contiguous" message (a zero-size view reads as strided).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from typing import Any

import numpy as np
import pytest

import tile.bindings as tb
import tile.frontend as tile
import tile.kernels as tk
from tile.kernels import bench
from tile.kernels._elementwise import MAX_INDEX
from tile.kernels.qwen3.tp import argmax_rows

# -- hole: top_k of a row holding NaN handed back indices past the row --------------------------------------------


@pytest.mark.parametrize(
    ("row", "k"),
    [
        ([np.nan, 1.0, np.nan], 3),
        ([np.inf, np.nan, np.inf], 3),
        ([np.nan] * 3, 2),
        ([np.nan] * 300, 5),  # several chunks on the interpreter (BN = 256)
        ([2.0, np.nan, -np.inf, 5.0, np.nan, -1.0], 6),
    ],
)
def test_top_k_of_a_row_with_nan_gives_indices_inside_the_row(row: list[float], k: int) -> None:
    """Hole: the ranking skipped NaN and, out of numbers, took the -inf padding past the row's end (indices >= N, or
    2**31 - 1). The numbers come first, descending, then the NaNs by index: numpy's stable sort with NaN last."""
    x = np.array([row], np.float32)
    values, indices = tk.top_k(x, k)
    got = indices.to_numpy()[0]
    assert ((got >= 0) & (got < len(row))).all()
    assert len(set(got.tolist())) == k
    order = np.argsort(-x[0].astype(np.float64), kind="stable")[:k]  # -nan is nan: last, by index
    np.testing.assert_array_equal(got, order)
    np.testing.assert_array_equal(values.to_numpy()[0], x[0][order])


def test_top_k_and_sample_without_nan_are_unchanged() -> None:
    """The NaN run leaves rows of numbers as they were, ties by index included; `sample`'s own top-K is untouched."""
    rng = np.random.default_rng(37)
    x = np.round(rng.standard_normal((3, 300)), 1).astype(np.float32)  # many ties
    values, indices = tk.top_k(x, 7)
    order = np.argsort(-x.astype(np.float64), axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(indices.to_numpy(), order)
    np.testing.assert_array_equal(values.to_numpy(), np.take_along_axis(x, order, axis=1))
    picks = tk.sample(x, 0.5, top_k=3, seed=5).to_numpy()
    assert all(p in order[r, :3] for r, p in enumerate(picks))


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_gpu_top_k_of_rows_with_nan(gpu: None) -> None:
    """The NaN run compiled through tileiras: rows of 151936 logits (4096-wide chunks on the GPU) with NaNs
    scattered in, and a short row with more NaNs than numbers, against numpy's stable sort with NaN last."""
    rng = np.random.default_rng(37)
    x = rng.standard_normal((4, 151936)).astype(np.float32)
    x[rng.random(x.shape) < 0.001] = np.nan
    x[3, : 151936 - 20] = np.nan  # 20 numbers, then NaNs for the rest of k
    values, indices = tk.top_k(tile.from_numpy(x), 50)
    want = np.argsort(-x.astype(np.float64), axis=1, kind="stable")[:, :50]
    np.testing.assert_array_equal(indices.to_numpy(), want)
    np.testing.assert_array_equal(values.to_numpy(), np.take_along_axis(x, want, axis=1))


def _huge(rows: int, n: int) -> Any:
    """A ``(rows, n)`` f32 array of zeros without the memory: every element is one (strides 0)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=(rows, n), strides=(0, 0))


@pytest.mark.parametrize(
    "call",
    [
        # Rows the launcher takes (a dim up to 2**31 - 1), whose padded chunks reach past i32 or its mark.
        lambda: tk.sample_op(_huge(1, MAX_INDEX + 1), 1.0, top_k=3),
        lambda: tk.sample_op(_huge(3, 2**31 - 1), 1.0),
        # Each row fits (2048 chunks of the interpreter's 256), the flat index into all of them does not.
        lambda: argmax_rows(tile.from_dlpack(_huge(2**12, 2**19))),
    ],
)
def test_selection_over_more_elements_than_i32_indexes_is_refused(call: Any) -> None:
    """Hole: the selection kernels index a row (argmax_rows: all rows read as one vector) in i32, chunk padding
    included, with 2**31 - 1 as their no-candidate mark: past that the index wrapped and a wrong (negative) id came
    back, on a GPU with the memory for such a row. Refused when the op is made (the ``*_op`` forms: before any
    launch; the plain forms check the same through ``_rows_in``)."""
    with pytest.raises(tile.ArgumentError, match=r"elements to choose from; the i32 indices reach 2147479551"):
        call()


def test_selection_at_the_i32_index_limit_is_taken() -> None:
    """The limit itself is a row `sample`'s kernel (one block a row) can index: its op is made (not run here: the
    interpreter would read two billion elements). `argmax` stops far below, at its grid's 65535 chunks a row
    (`GridError`)."""
    made = tk.sample_op(_huge(1, MAX_INDEX), 1.0, top_k=3)
    assert isinstance(made, tile.Launch)
    with pytest.raises(tile.GridError, match=r"argmax_parts\(\): grid \[1, \d+, 1\] is out of range"):
        tk.argmax_op(_huge(1, MAX_INDEX))


# -- hole: host index lists were cast to i32 before they were read ------------------------------------------------


def _rope_ref(x: np.ndarray[Any, Any], pos: list[int], theta: float, hd: int) -> np.ndarray[Any, Any]:
    half = hd // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2 / hd)
    ang = np.asarray(pos, np.float64)[:, None] * inv[None, :]
    a, b = x[:, :half].astype(np.float64), x[:, half:].astype(np.float64)
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)], axis=1)


def test_rope_positions_past_i32_are_not_wrapped() -> None:
    """Hole: ``[2**32 + 1]`` was cast to i32 (1) and the row rotated by position 1. Now it is an i64 position, as an
    i64 tensor's: the row is rotated by 2**32 (its f32 value; the kernel's angles are f32), not by 1."""
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    got = tk.rope(x, [2**32 + 1], theta=1e4, head_dim=8).to_numpy()
    assert not np.allclose(got, _rope_ref(x, [1], 1e4, 8), atol=1e-3)
    from_tensor = tk.rope(x, tile.from_numpy(np.array([2**32 + 1], np.int64)), theta=1e4, head_dim=8).to_numpy()
    np.testing.assert_array_equal(got, from_tensor)


@pytest.mark.parametrize("fn", ["rope", "embedding"])
def test_host_indices_past_i64_are_refused(fn: str) -> None:
    """A u64 index past i64 cannot be an index tensor of the kernels' (i32 or i64): refused, naming it."""
    big = np.array([2**63 + 1], np.uint64)

    def call() -> tile.Tensor:
        if fn == "rope":
            return tk.rope(np.ones((1, 8), np.float32), big, theta=1e4, head_dim=8)
        return tk.embedding(np.ones((4, 8), np.float32), big)

    with pytest.raises(tile.ArgumentError, match=r"holds 9223372036854775809, outside the i64 range"):
        call()


# -- hole: zero-size elementwise results failed to partition ------------------------------------------------------


def _f32(*shape: int) -> tile.Tensor:
    return tile.from_numpy(np.zeros(shape, np.float32))


@pytest.mark.parametrize(
    ("call", "shape"),
    [
        (lambda: tk.embedding(_f32(4, 3), []), (0, 3)),
        (lambda: tk.embedding(_f32(4, 3), np.zeros(0, np.int64)), (0, 3)),
        (lambda: tk.embedding(_f32(4, 3), tile.from_numpy(np.zeros(0, np.int32))), (0, 3)),
        (lambda: tk.embedding(_f32(4, 0), [1, 2]), (2, 0)),
        (lambda: tk.swiglu(_f32(0, 8), _f32(0, 8)), (0, 8)),
        (lambda: tk.swiglu(_f32(3, 0), _f32(3, 0)), (3, 0)),
        (lambda: tk.swiglu_fused(_f32(0, 8)), (0, 4)),
        (lambda: tk.rope(_f32(0, 8), [], theta=1e4, head_dim=8), (0, 8)),
        (lambda: tk.rope(_f32(0, 2, 8), [], theta=1e4, head_dim=8), (0, 2, 8)),
    ],
)
def test_plain_elementwise_forms_return_empty_results(call: Any, shape: tuple[int, ...]) -> None:
    """Hole (the known poor message): "cannot partition the empty tensor". An empty result is returned, as
    `tk.matmul`'s and the row kernels' (there is nothing to compute)."""
    got = call()
    assert isinstance(got, tile.Tensor)
    assert tuple(got.shape) == shape
    assert got.dtype == tile.f32


@pytest.mark.parametrize(
    "call",
    [
        lambda: tk.embedding_op(_f32(4, 3), []),
        lambda: tk.swiglu_op(_f32(0, 8), _f32(0, 8)),
        lambda: tk.swiglu_fused_op(_f32(0, 8)),
        lambda: tk.rope_op(_f32(0, 8), [], theta=1e4, head_dim=8),
    ],
)
def test_op_elementwise_forms_refuse_empty_results(call: Any) -> None:
    """An ``*_op`` form has no launch to return for an empty result: refused as `tk.matmul_op` refuses it."""
    with pytest.raises(tile.ArgumentError, match=r"is empty; there is nothing to launch"):
        call()


def test_empty_results_still_check_their_inputs() -> None:
    """The empty path comes after the checks: a bad dtype or shape of an empty input is still refused."""
    with pytest.raises(tile.ArgumentError, match=r"must have one shape and dtype"):
        tk.swiglu(_f32(0, 8), _f32(0, 4))
    with pytest.raises(tile.ArgumentError, match=r"ids must be integers"):
        tk.embedding(_f32(4, 3), np.zeros(1, np.float32))


# -- hole: the kept driver failure held the first call's frames (and its handles of the caller's memory) -----------


def test_the_kept_driver_failure_holds_no_caller_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hole: tile.bindings kept the first `DriverNotFoundError` for the process with its traceback, whose frames
    chain (``f_back``) up through every caller, locals included: whatever that call had in hand lived for good."""
    from cuda.bindings import driver as cu

    from tile.bindings import _driver

    monkeypatch.setattr(_driver._state, "module", None)
    monkeypatch.setattr(_driver._state, "failure", None)

    def missing(flags: int) -> None:
        raise RuntimeError("no driver library here")

    monkeypatch.setattr(cu, "cuInit", missing)

    class Held:
        pass

    def first_call() -> weakref.ref[Held]:
        held = Held()  # a local of a frame above the driver probe, as a tk call's tensors are
        assert not tb.driver_available()
        return weakref.ref(held)

    ref = first_call()
    gc.collect()
    assert ref() is None
    failure = _driver._state.failure
    assert failure is not None
    assert failure.__traceback__ is None
    assert failure.__cause__ is not None
    assert failure.__cause__.__traceback__ is None
    with pytest.raises(tb.DriverNotFoundError, match=r"no driver library here"):  # still reported on every call
        _driver.driver()


_FIRST_CALL = """
import numpy as np
import tile.kernels as tk
from tile.frontend import ArgumentError
kc, vc = np.zeros((4, 8, 16), np.float16), np.zeros((4, 8, 16), np.float16)
new = np.ones((4, 1, 16), np.float16)
try:
    tk.append_kv(kc, vc, new, new, [8, 2])  # refused, and the first call to look for the driver
except ArgumentError:
    pass
tk.append_kv(kc, vc, new, new, [1, 2])
print(sorted(map(tuple, np.argwhere(kc.any(-1)).tolist())))
"""


@pytest.mark.skipif(tb.driver_available(), reason="needs a machine without a CUDA driver (the backend found: cpu)")
def test_a_refused_first_append_kv_leaves_numpy_caches_writable() -> None:
    """Hole (end to end, in a fresh process choosing its backend itself, the interpreter here): the refused call was
    the first to look for the driver; its frames, held by the kept driver failure, held the borrow of each cache, so
    the next `append_kv` of the same arrays was refused with `BorrowError` for the rest of the process."""
    env = {k: v for k, v in os.environ.items() if k not in ("TILE_INTERPRET", "TILE_BACKEND")}
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(0, 1), (1, 1), (2, 2), (3, 2)]"


# -- holes: tile.kernels.bench took work it could not write back, and plotted an infinite rate -------------------


@pytest.mark.parametrize("work", [{"nbytes": -1}, {"nbytes": float("nan")}, {"flops": float("inf")}, {"flops": "1e9"}])
def test_compare_refuses_work_its_results_file_could_not_hold(work: dict[str, Any], tmp_path: Any) -> None:
    """Hole: ``compare`` took any ``flops``/``nbytes``: a NaN, infinite or negative one was timed and written by
    ``to_json`` into a file ``from_json`` then refused; a string failed in ``to_dict`` with a TypeError. Refused now
    before anything runs, by the rule ``from_dict`` reads them with."""
    calls: list[int] = []
    with pytest.raises(tile.ArgumentError, match=r"compare's (flops|nbytes) must be"):
        bench.compare({"a": lambda: calls.append(1)}, rounds=1, reps=1, warmup=0, **work)
    assert calls == []
    fine = bench.compare({"a": lambda: None}, rounds=1, reps=1, warmup=0, nbytes=64, flops=2)
    assert bench.Comparison.from_json(fine.to_json(tmp_path / "c.json")).nbytes == 64


def test_plot_of_an_infinite_rate_is_a_typed_error() -> None:
    """Hole: a median time of 0 (a call below the clock's resolution; a file's times of 0, which ``from_dict`` takes)
    is an infinite rate, and ``plot`` failed in ``nice_ticks`` with an untyped OverflowError. ``line_chart`` refuses
    a non-finite point (its documented ValueError), which ``plot`` reports as `ArgumentError`."""
    made = bench.compare({"a": lambda: None}, rounds=1, reps=1, warmup=0, nbytes=64).to_dict()
    made["contenders"]["a"]["times_ms"] = [0.0]
    sweep = bench.Sweep("s")
    sweep.add(8, bench.Comparison.from_dict(made))
    with pytest.raises(tile.ArgumentError, match=r"is not finite; every x and y must be a finite number"):
        bench.plot(sweep, "GB/s")
    assert "<svg" in bench.plot(sweep, "ms")  # the times themselves plot


@pytest.mark.parametrize(("top", "count"), [(float("inf"), 5), (float("nan"), 5), (1.0, 0), (1.0, 2.5)])
def test_nice_ticks_refuses_what_it_cannot_tick(top: float, count: Any) -> None:
    """``nice_ticks(inf)`` raised OverflowError, ``nice_ticks(nan)`` a bare int() ValueError and a count of 0
    ZeroDivisionError; each is now the ValueError the SVG module documents, naming the argument."""
    with pytest.raises(ValueError, match=r"nice_ticks: (the top of the axis|count) must be"):
        bench.nice_ticks(top, count)


# -- smaller holes: an attention config without BM/BN, append_kv of more rows than the cache -----------------------


def test_attention_config_without_a_tile_size_is_a_typed_error() -> None:
    """Hole: ``config=Config.of(BM=16)`` raised a bare ``KeyError: 'BN'`` from inside `tk.attention`."""
    q = np.ones((1, 2, 5, 16), np.float16)
    with pytest.raises(tile.ArgumentError, match=r"give BM and BN, powers of two"):
        tk.attention(q, q, q, causal=False, config=tk.Config.of(BM=16))


def test_append_kv_of_more_rows_than_the_cache_says_so() -> None:
    """Poor message: 9 new rows into a cache of 8 positions refused every position as "outside [0, -1]"."""
    kc, vc = np.zeros((4, 8, 16), np.float16), np.zeros((4, 8, 16), np.float16)
    new = np.ones((4, 9, 16), np.float16)
    with pytest.raises(tile.ArgumentError, match=r"9 new rows per sequence do not fit a cache of 8 positions"):
        tk.append_kv(kc, vc, new, new, [0, 0])
    assert not kc.any()
    assert not vc.any()
