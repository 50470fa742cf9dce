"""Qwen3 on the GPU: the tiny config and a two-layer model of Qwen3-0.6B's real widths (hidden 1024, 16 heads, head
dim 128, MLP 3072, full vocabulary) against the float64 numpy implementation of ``test_qwen3.py``, with the same error
budget; and against ``transformers`` over a prompt and 32 decoded tokens where it is installed.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_qwen3_gpu.py -m gpu``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
from test_qwen3 import U_BF16, _reference, chunked_prefill
from tile.kernels.qwen3 import CONFIGS, TINY, DecodeGraph, Qwen3, Qwen3Config, random_weights

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.parametrize("attention", ["one", "split"])
@pytest.mark.parametrize("config", [TINY, Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})])
def test_prefill_and_decode_match_float64(config: Qwen3Config, attention: str) -> None:
    w = random_weights(config, seed=7)
    ids = [int(i) for i in np.random.default_rng(0).integers(0, config.vocab_size, 40)]
    # The split form needs several 64-position key tiles to split over: a cache of 256 positions has four.
    model = Qwen3(config, w, max_seq=64 if attention == "one" else 256, decode_attention=attention)
    got = np.concatenate([model.forward(ids[:24], all_logits=True)] + [model.forward([i])[None] for i in ids[24:]])
    ref = _reference(w, config, ids)
    budget = (2 * config.num_hidden_layers + 2) * U_BF16 * np.abs(ref).max(axis=-1, keepdims=True)
    assert np.all(np.abs(got - ref) <= budget), float((np.abs(got - ref) / budget).max())


def test_chunked_prefill_over_several_attention_tiles_matches_float64() -> None:
    """Prefill through the library's flash attention at the GPU's tiles (128 queries, 64 keys): a 150-token chunk
    (two query tiles, the second partial), a 67-token chunk at position 150 (off any tile edge), then decoding, in a
    cache of 512 positions (most past the causal limit)."""
    config = Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})
    _, got, ref, budget = chunked_prefill(config, seed=9, rng=3, chunks=(150, 67), decoded=4, max_seq=512)
    assert np.all(np.abs(got - ref) <= budget), float((np.abs(got - ref) / budget).max())


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_matches_transformers_over_32_decoded_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graph: bool
) -> None:
    import test_qwen3_hf as hf_test  # skips without transformers

    monkeypatch.setattr(hf_test, "NEW_TOKENS", 32)
    from tile.kernels.qwen3 import save_checkpoint

    checkpoint = save_checkpoint(random_weights(TINY, seed=1), TINY, tmp_path)
    assert (checkpoint / "config.json").exists()
    hf_test.test_logits_and_greedy_tokens_match_transformers(checkpoint, graph)  # asserts logits and greedy tokens


@pytest.mark.parametrize("config", [TINY, Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})])
def test_the_cuda_graph_decode_replays_the_eager_step(config: Qwen3Config) -> None:
    """The decode step captured as a CUDA graph (allocations of its intermediates happen during the capture, on
    Tile's own non-capturing stream) gives the eager chain's logits for every token, and hands the cache back."""
    w = random_weights(config, seed=4)
    eager, graphed = Qwen3(config, w, max_seq=64), Qwen3(config, w, max_seq=64)
    prompt = [int(i) for i in np.random.default_rng(1).integers(0, config.vocab_size, 20)]
    eager.forward(prompt)
    graphed.forward(prompt)
    tokens = [int(i) for i in np.random.default_rng(2).integers(0, config.vocab_size, 12)]
    with DecodeGraph(graphed) as step:
        assert step.graph.kind == "cuda"
        got = [step.step(t) for t in tokens]
    for t, row in zip(tokens, got, strict=True):
        np.testing.assert_array_equal(row, eager.forward([t]))
    np.testing.assert_array_equal(graphed.forward([5]), eager.forward([5]))
