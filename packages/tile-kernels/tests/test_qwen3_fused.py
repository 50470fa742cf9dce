"""Qwen3's fused decode projections on the CPU interpreter: ``fuse=True`` (the default) drops three launches a layer
from passes of up to 16 tokens, one from longer ones (SwiGLU in the big gate/up GEMM), and agrees with
``fuse=False`` within bf16 tolerance. The float64 comparison of the (fused) model is ``test_qwen3.py``'s."""

from __future__ import annotations

import numpy as np
import pytest

import tile.frontend as tile
from tile.kernels.qwen3 import TINY, Qwen3, random_weights

U_BF16 = 2.0**-8


def _launches(model: Qwen3, n: int) -> int:
    inputs = tile.from_numpy(np.zeros(n + 1, dtype=np.int32))
    return len(model.steps(inputs, n, head=True, start=0))


def test_fused_steps_drop_three_launches_a_layer_up_to_16_tokens() -> None:
    w = random_weights(TINY, seed=4)
    fused, plain = Qwen3(TINY, w, max_seq=32), Qwen3(TINY, w, max_seq=32, fuse=False)
    for n in (1, 16):
        assert _launches(plain, n) - _launches(fused, n) == 3 * TINY.num_hidden_layers
    # the big-tile GEMM: the prefill keeps gate/up and SwiGLU apart (PREFILL_GLU is off: it measured slower) ...
    assert _launches(plain, 17) == _launches(fused, 17)
    fused.PREFILL_GLU = True  # ... and with it on, SwiGLU in gate/up's epilogue (one launch a layer fewer)
    assert _launches(plain, 17) - _launches(fused, 17) == TINY.num_hidden_layers


def test_fused_and_unfused_models_agree_within_bf16() -> None:
    # Prefill of 18 tokens (the SwiGLU GEMM against the unfused pair), 6 more (fused: the GEMV sizes), then decoded
    # tokens. The fused forms round the normed activation and the gate/up sums to bf16 differently (not at all, for
    # gate/up): about one bf16 rounding per sublayer apart, the budget of test_qwen3's float64 comparison, twice.
    w = random_weights(TINY, seed=6)
    ids = [int(i) for i in np.random.default_rng(2).integers(0, TINY.vocab_size, 28)]
    got = []
    for fuse in (True, False):
        model = Qwen3(TINY, w, max_seq=32, fuse=fuse)
        model.PREFILL_GLU = fuse  # the fused model's prefill with the SwiGLU GEMM (off by default)
        first = model.forward(ids[:18], all_logits=True)
        second = model.forward(ids[18:24], all_logits=True)
        got.append(np.concatenate([first, second, np.stack([model.forward([i]) for i in ids[24:]])]))
    budget = 2 * (2 * TINY.num_hidden_layers + 2) * U_BF16 * np.abs(got[1]).max(axis=-1, keepdims=True)
    assert np.all(np.abs(got[0] - got[1]) <= budget), float((np.abs(got[0] - got[1]) / budget).max())
    assert not np.array_equal(got[0][18:], got[1][18:])  # the fused kernels did run (their roundings differ)
    assert not np.array_equal(got[0][:18], got[1][:18])  # the prefill's SwiGLU GEMM too


def test_fuse_must_be_a_bool_and_may_be_switched() -> None:
    with pytest.raises(tile.ArgumentError, match="fuse='yes'; pass True"):
        Qwen3(TINY, random_weights(TINY, seed=1), fuse="yes")  # type: ignore[arg-type]
    model = Qwen3(TINY, random_weights(TINY, seed=1), max_seq=16)
    fused = _launches(model, 1)
    model.fuse = False  # an A/B on the same weights (benchmarks/bench_qwen3.py --fuse both)
    assert _launches(model, 1) == fused + 3 * TINY.num_hidden_layers
    with pytest.raises(tile.ArgumentError, match="fuse=1; pass True"):
        model.fuse = 1  # type: ignore[assignment]
    assert model.fuse is False
