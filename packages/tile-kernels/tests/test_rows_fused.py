"""add_rmsnorm (fused residual add), rmsnorm_heads (per-head, Qwen3's q/k norm) and the launch-returning row ops
(rmsnorm_op, add_rmsnorm_op) on the CPU interpreter, in both forms; the row tuner's choice with an injected timer."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import NP_DTYPES, U32, array, assert_within, cast_error, f64, tensor
from tile.frontend import ArgumentError
from tile.kernels import _rowforms, autotune

FORMS = [None, tk.Config.of(BM=2, BN=256), tk.Config.of(BM=1, BN=64, LAT=1)]
IDS = ["default", "chunk256x2", "chunk64"]


def F32(*shape: int) -> np.ndarray[Any, Any]:  # noqa: N802  # reads as a dtype in the tables below
    """Ones of ``shape`` in float32."""
    return np.ones(shape, np.float32)


def _norm_ref(s: np.ndarray[Any, Any], w: np.ndarray[Any, Any], out: str) -> tuple[Any, Any]:
    sd, n = f64(s), s.shape[-1]
    ref = sd / np.sqrt((sd * sd).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)
    return ref, 2 * (n + 8) * U32 * np.abs(ref) + cast_error(out, ref)


@pytest.mark.parametrize("config", FORMS, ids=IDS)
@pytest.mark.parametrize("n", [1, 7, 1000, 1537])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_add_rmsnorm(dtype: str, n: int, config: tk.Config | None) -> None:
    rng = np.random.default_rng(n)
    x, r, w = array(rng, dtype, (5, n), 2.0), array(rng, dtype, (5, n), 2.0), array(rng, "bf16", (n,))
    xt, rt = tensor(x), tensor(r)
    normed, summed = tk.add_rmsnorm(xt, rt, tensor(w), config=config)
    s = (f64(x) + f64(r)).astype(np.float32).astype(NP_DTYPES[dtype])  # the sum as the model rounds it
    np.testing.assert_array_equal(summed.to_numpy(), s)
    assert (normed.dtype.name, summed.dtype.name) == (dtype, dtype)
    assert_within(normed.to_numpy(), *_norm_ref(s, w, dtype))
    assert not xt.moved
    assert not rt.moved


def test_add_rmsnorm_dtypes_outputs_and_ranks() -> None:
    rng = np.random.default_rng(1)
    x, r, w = array(rng, "bf16", (2, 3, 40)), array(rng, "f32", (2, 3, 40)), array(rng, "f32", (40,))
    xt, rt, wt = tensor(x), tensor(r), tensor(w)
    normed, summed = tk.add_rmsnorm(xt, rt, wt, out_dtype=tile.f16, config=tk.Config.of(BM=2, BN=16))
    assert (normed.shape, normed.dtype, summed.dtype) == ((2, 3, 40), tile.f16, tile.f32)  # the sum: residual's
    s = (f64(x) + f64(r)).astype(np.float32)
    np.testing.assert_array_equal(summed.to_numpy(), s)
    assert_within(normed.to_numpy(), *_norm_ref(s, w, "f16"))
    out, sum_out = tile.full(tile.f32, [6, 40], np.nan), tile.full(tile.bf16, [6, 40], np.nan)
    normed, summed = tk.add_rmsnorm(xt.reshape(6, 40), rt.reshape(6, 40), wt, out=out, sum_out=sum_out)
    assert out.moved
    assert sum_out.moved
    s = s.reshape(6, 40).astype(NP_DTYPES["bf16"])
    np.testing.assert_array_equal(summed.to_numpy(), s)
    assert_within(normed.to_numpy(), *_norm_ref(s, w, "f32"))


@pytest.mark.parametrize("config", FORMS, ids=IDS)
def test_add_rmsnorm_op_chains_and_matches_the_waiting_call(config: tk.Config | None) -> None:
    rng = np.random.default_rng(2)
    x, r, w = (tensor(array(rng, "bf16", shape)) for shape in ((3, 300), (3, 300), (300,)))
    want_normed, want_sum = tk.add_rmsnorm(x, r, w, config=config)
    seen: list[bool] = []

    def again(out: tuple[Any, ...]) -> Any:  # the next layer: the sum in flight is its residual
        summed = out[1].unpartition()
        seen.append(summed.in_flight)
        return tk.add_rmsnorm_op(out[0].unpartition(), summed, w, config=config)

    handed = tk.add_rmsnorm_op(x, r, w, config=config).then(again).sync()
    assert seen == [True]
    twice_normed, twice_sum = tk.add_rmsnorm(want_normed, want_sum, w, config=config)
    np.testing.assert_array_equal(handed[0].unpartition().to_numpy(), twice_normed.to_numpy())
    np.testing.assert_array_equal(handed[1].unpartition().to_numpy(), twice_sum.to_numpy())


def test_rmsnorm_op_runs_the_chunked_form() -> None:
    rng = np.random.default_rng(3)
    x, w = array(rng, "f16", (3, 5000)), array(rng, "f16", (5000,))
    got = tk.rmsnorm_op(tensor(x), tensor(w)).sync()[0].unpartition()  # 5000 columns: chunked by default here
    assert _rowforms.plan(_rowforms.default(8192), 8192, "t").bn == 1024  # the interpreter's chunk width
    assert_within(got.to_numpy(), *_norm_ref(x, w, "f16"))


def _heads_ref(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], out: str) -> tuple[Any, Any]:
    d = w.shape[0]
    heads = f64(x).reshape(*x.shape[:-1], -1, d)
    ref = (heads / np.sqrt((heads * heads).mean(axis=-1, keepdims=True) + 1e-6) * f64(w)).reshape(x.shape)
    return ref, 2 * (d + 8) * U32 * np.abs(ref) + cast_error(out, ref)


@pytest.mark.parametrize(
    "config", [None, tk.Config.of(BM=1, BN=16), tk.Config.of(BM=4, BN=64), tk.Config.of(BM=2, BN=0)]
)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_rmsnorm_heads_on_a_slice_of_a_fused_projection(dtype: str, config: tk.Config | None) -> None:
    rng = np.random.default_rng(4)
    heads, kv, d = 5, 2, 16  # q: 5 heads of 16 in a (T, (5 + 2 + 2) * 16) q/k/v output: a strided 2-D view
    qkv, w = array(rng, dtype, (7, (heads + 2 * kv) * d), 2.0), array(rng, "f32", (d,))
    q = tensor(qkv)[:, : heads * d]
    got = tk.rmsnorm_heads(q, tensor(w), config=config)
    assert got.shape == (7, heads * d)
    assert_within(got.to_numpy(), *_heads_ref(qkv[:, : heads * d], w, dtype))


def test_rmsnorm_heads_of_any_head_size_and_rank() -> None:
    rng = np.random.default_rng(5)
    x, w = array(rng, "bf16", (2, 3, 4 * 12)), array(rng, "bf16", (12,))  # head_dim 12: rows of rmsnorm
    assert_within(tk.rmsnorm_heads(tensor(x), tensor(w)).to_numpy(), *_heads_ref(x, w, "bf16"))
    x, w = array(rng, "f16", (2, 3, 4 * 8)), array(rng, "f16", (8,))
    assert_within(tk.rmsnorm_heads(x, w, out_dtype=tile.f32).to_numpy(), *_heads_ref(x, w, "f32"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tk.add_rmsnorm(np.ones((2, 3), np.float32), F32(2, 4), F32(3)), "residual has"),
        (lambda: tk.add_rmsnorm(F32(2, 3), np.ones((2, 3), np.int16), F32(3)), "residual has dty"),
        (lambda: tk.add_rmsnorm(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32), F32(2)), "weight has sh"),
        (
            lambda: tk.add_rmsnorm(F32(1, 2, 3), F32(1, 2, 3), F32(3), sum_out=F32(2, 3)),
            "out= and sum_out= need a 2-D x",
        ),
        (lambda: tk.add_rmsnorm_op(F32(1, 2, 3), F32(1, 2, 3), F32(3)), "x must have 2 dimensions"),
        (lambda: tk.add_rmsnorm_op(F32(0, 3), F32(0, 3), F32(3)), "pass at least one row"),
        (lambda: tk.rmsnorm_op(np.ones((2, 0), np.float32), np.ones(0, np.float32)), "pass at least one row"),
        (lambda: tk.rmsnorm_heads(np.ones((2, 30), np.float32), np.ones(8, np.float32)), "multiple of head_dim 8"),
        (lambda: tk.rmsnorm_heads(np.ones((2, 30), np.float32), np.ones((2, 3), np.float32)), "pass the (head_dim,)"),
        (lambda: tk.rmsnorm_heads(F32(2, 40)[:, :30], F32(6)), "needs a power-of-two head_dim"),
        (
            lambda: tk.rmsnorm_heads(F32(2, 32), F32(8), config=tk.Config.of(BM=1, BN=4)),
            "multiple of 8",
        ),
    ],
)
def test_bad_input_gets_a_typed_error(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ArgumentError) as info:
        call()
    assert message in str(info.value)


def test_the_row_tuner_times_every_candidate_and_the_call_runs_the_winner(tmp_path: Path) -> None:
    """With an injected timer the candidates of a 4096-column row are timed; the chunked one made fastest wins."""
    candidates = _rowforms.configs(4096)
    assert {c.as_dict().get("BN", 0) for c in candidates} == {0, 1024, 2048}  # whole rows and chunks narrower
    assert all(c["BM"] * 4096 <= 8192 for c in candidates)
    winner = tk.Config.of(BM=1, BN=2048, WARPS=8)
    ran: list[int] = []
    real = _rowforms.plan

    def spy(config: autotune.Config, np_: int, op: str, *, unit: int = 1) -> _rowforms.Plan:
        ran.append(candidates.index(config) if config in candidates else -1)
        return real(config, np_, op, unit=unit)

    def timer(fn: Callable[[], object]) -> float:
        fn()
        return 0.0 if candidates[ran[-1]] == winner else 1.0

    tuner = autotune.Autotuner("softmax", source="s", timer=timer, cache_dir=tmp_path)
    old = autotune.set_tuner("softmax", tuner)
    mp = pytest.MonkeyPatch()
    mp.setattr(_rowforms, "plan", spy)
    try:
        x = array(np.random.default_rng(6), "f32", (2, 3000))
        got = tk.softmax(tensor(x))
    finally:
        mp.undo()
        autotune.set_tuner("softmax", old)
    assert sorted(set(ran[:-1])) == list(range(len(candidates)))  # every candidate was timed
    assert candidates[ran[-1]] == winner  # and the call ran the winner
    assert tuner.tuned == 1
    xd = f64(x)
    ref = np.exp(xd - xd.max(-1, keepdims=True))
    assert_within(got.to_numpy(), ref / ref.sum(-1, keepdims=True), 1e-6)


def test_the_default_form_follows_the_row_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU defaults (read without a GPU): whole rows with 8 warps up to 8192 columns, 2048-wide chunks above."""
    monkeypatch.setattr(tile, "backend", lambda: "gpu")
    plans = {np_: _rowforms.plan(_rowforms.default(np_), np_, "t") for np_ in (1, 1024, 4096, 8192, 16384, 65536)}
    assert [(p.bm, p.bn, p.whole, p.warps) for p in plans.values()] == [
        (16, 1, True, 8),
        (4, 1024, True, 8),
        (1, 4096, True, 8),
        (1, 8192, True, 8),
        (1, 2048, False, 8),
        (1, 2048, False, 8),
    ]
    assert all(_rowforms.default(np_) in _rowforms.configs(np_) for np_ in plans if np_ > 1)  # the tuner times it
