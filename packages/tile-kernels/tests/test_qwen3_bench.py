"""The Qwen3 benchmark's own pieces on the CPU interpreter (``benchmarks/bench_qwen3.py`` and its ``qwen3_*``
helpers): the FLOP count against a count made matrix by matrix and query by query, the lazily made seeded weights,
the prefill graph against the eager pass, the results file merge, the transformers contender's skips, and the
``--smoke`` runs of both modes."""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.kernels.qwen3 import CONFIGS, TINY, Qwen3, Qwen3Config

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCH))  # the benchmark imports its helpers as top-level modules, as when run as a script
bench_qwen3, qwen3_hf, qwen3_prefill, qwen3_weights = (
    importlib.import_module(m) for m in ("bench_qwen3", "qwen3_hf", "qwen3_prefill", "qwen3_weights")
)


@pytest.mark.parametrize("name", ["tiny", "4B", "32B"])
def test_prefill_flops_count_every_matrix_and_the_causal_half_of_attention(name: str) -> None:
    c = TINY if name == "tiny" else CONFIGS[name]
    n = 37
    matrices = [s for k, s in c.weight_shapes().items() if k.startswith("model.layers.") and len(s) == 2]
    gemm = sum(2 * n * s[0] * s[1] for s in matrices)  # x (n, K) @ W.T for each checkpoint matrix, unfused
    scored = sum(t + 1 for t in range(n))  # query t sees keys 0..t
    attention = c.num_hidden_layers * c.num_attention_heads * 2 * (2 * c.head_dim * scored)  # QK^T and PV
    got = qwen3_prefill.prefill_flops(c, n)
    assert got == {"gemm": gemm, "attention": attention, "lm_head": 2 * c.hidden_size * c.vocab_size}


def test_seeded_weights_are_the_checkpoint_shapes_the_same_in_any_order() -> None:
    w = qwen3_weights.SeededWeights(TINY, seed=5)
    assert list(w) == list(TINY.weight_shapes())
    assert len(w) == len(TINY.weight_shapes())
    names = list(w)
    first = {n: w[n].view(np.uint16).copy() for n in names}
    for n in reversed(names):
        assert w[n].shape == TINY.weight_shapes()[n]
        assert w[n].dtype == np.dtype("bfloat16")
        np.testing.assert_array_equal(w[n].view(np.uint16), first[n])
    ups = [first[f"model.layers.{i}.mlp.up_proj.weight"] for i in (0, 1)]
    assert not np.array_equal(*ups)  # each tensor its own draw
    other = qwen3_weights.SeededWeights(TINY, seed=6)
    assert not np.array_equal(other[names[1]].view(np.uint16), first[names[1]])
    norm = w["model.norm.weight"].astype(np.float32)
    assert abs(norm.mean() - 1) < 0.05
    assert 0.05 < norm.std() < 0.15
    with pytest.raises(KeyError, match=r"model\.layers\.2\.mlp\.up_proj\.weight"):
        w["model.layers.2.mlp.up_proj.weight"]  # TINY has two layers


def test_membership_makes_no_tensor(monkeypatch: pytest.MonkeyPatch) -> None:
    w = qwen3_weights.SeededWeights(CONFIGS["32B"])
    made: list[str] = []
    monkeypatch.setattr(qwen3_weights.np.random, "default_rng", lambda *a: made.append("x"))
    assert "model.layers.63.mlp.up_proj.weight" in w
    assert "lm_head.weight" in w
    assert "nope" not in w
    assert made == []


def test_large_matrices_are_windows_of_one_short_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qwen3_weights, "POOL", 100)  # TINY's matrices take the windowed path
    w = qwen3_weights.SeededWeights(TINY, seed=1)
    up = w["model.layers.1.mlp.up_proj.weight"]  # (128, 64)
    step = qwen3_weights.STEP
    np.testing.assert_array_equal(up[1:, : 64 - step].view(np.uint16), up[:-1, step:].view(np.uint16))
    assert not up.flags.writeable
    assert abs(float(up.astype(np.float32).std()) - 64**-0.5) < 0.02
    # Qwen3 built from the lazy mapping is the model built from its materialized copy
    lazy, full = Qwen3(TINY, w, max_seq=16), Qwen3(TINY, {n: np.array(a) for n, a in w.items()}, max_seq=16)
    np.testing.assert_array_equal(lazy.forward([3, 4, 5]), full.forward([3, 4, 5]))


def test_the_prefill_graph_runs_the_eager_pass_and_hands_the_caches_back() -> None:
    w = qwen3_weights.SeededWeights(TINY, seed=2)
    eager, graphed = Qwen3(TINY, w, max_seq=16), Qwen3(TINY, w, max_seq=16)
    prompt = [7, 1, 200, 33, 9]
    eager.forward(prompt)
    assert qwen3_prefill.tile_prefill_graph(graphed, prompt, reps=2) > 0
    assert not graphed.graphed
    assert graphed.length == 0
    for a, b in zip(eager.k_cache + eager.v_cache, graphed.k_cache + graphed.v_cache, strict=True):
        np.testing.assert_array_equal(a.to_numpy()[:, :5], b.to_numpy()[:, :5])
    graphed.length = len(prompt)
    np.testing.assert_array_equal(graphed.forward([4]), eager.forward([4]))
    assert qwen3_prefill.tile_gemm_graph(graphed, 8, reps=1) > 0


def test_save_rows_replaces_rows_of_the_same_model_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "qwen3.json"
    old = {"model": "4B", "context": 512, "tile": {"tokens_per_s": 1.0}}  # an older row: no mode, a decode row
    keep = {"model": "1.7B", "mode": "decode"}
    path.write_text(json.dumps({"info": {"bandwidth_Bps": 4e12, "device": "A"}, "rows": [old, keep]}))
    new = [{"model": "4B", "mode": "decode", "tile": {"tokens_per_s": 2.0}}, {"model": "4B", "mode": "prefill"}]
    bench_qwen3.save_rows(new, {"device": "B"}, path)
    saved = json.loads(path.read_text())
    assert saved["info"] == {"bandwidth_Bps": 4e12, "device": "B"}
    assert saved["rows"] == [keep, *new]
    bench_qwen3.save_rows([], {}, tmp_path / "fresh.json")
    assert json.loads((tmp_path / "fresh.json").read_text()) == {"info": {}, "rows": []}


def test_transformers_rows_are_skips_with_a_reason_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    row = qwen3_hf.hf_rates(object(), c=TINY, w={}, prompt=[1], tokens=2, limit_s=5, floor=0.0, compiled=True)
    assert set(row) == {"transformers_eager", "transformers_compiled"}
    assert all("transformers is not importable" in r["skipped"] for r in row.values())


def test_the_time_limit_interrupts_and_is_off_after() -> None:
    def spin() -> None:
        with qwen3_hf.time_limit(1):
            while True:
                time.sleep(0.01)

    with pytest.raises(qwen3_hf.TimeLimitError, match="limit of 1 s"):
        spin()
    with qwen3_hf.time_limit(1):
        pass
    time.sleep(1.2)  # no alarm left armed


@pytest.mark.parametrize("mode", [[], ["--prefill"]])
def test_smoke_runs_print_their_rows(mode: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    backend = tile.backend()
    try:
        bench_qwen3.main(["--smoke", *mode])
    finally:
        tile.set_backend(backend)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    row: dict[str, Any] = rows[0]
    assert rows[-1]["device"] == "cpu interpreter"
    assert row["model"] == "tiny"
    if mode:
        assert row["mode"] == "prefill"
        assert row["tokens"] == 16
        assert row["tile_prefill"]["s"] > 0
        assert row["tile_prefill_graph"]["s"] > 0
        assert "cublas_gemm" not in row
    else:
        assert row["mode"] == "decode"
        assert row["tile_graph"]["tokens_per_s"] > 0


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_the_prefill_row_on_the_gpu_times_cublas_on_the_same_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    two_layers = Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})
    tile.set_backend("gpu")
    try:
        row = qwen3_prefill.bench_prefill(two_layers, qwen3_weights.SeededWeights(two_layers), 256, torch, reps=2)
    finally:
        tile.set_backend("cpu")
    assert row["cublas_weights"] == "each layer its own"
    assert row["tile_gemm_graph"]["s"] < row["tile_prefill_graph"]["s"]  # the GEMMs are part of the pass
    assert 0 < row["cublas_gemm"]["tflops"] < 2500  # no dense bf16 peak is higher: the count is not inflated
    assert 0 < row["gemm_only_vs_cublas"] < 10
    assert row["prefill_vs_cublas"] < row["prefill_graph_vs_cublas"]  # eager adds the host's enqueueing


@pytest.mark.parametrize("unfused", [False, True])
def test_profile_prefill_times_every_op_of_the_prefill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unfused: bool
) -> None:
    profile_prefill = importlib.import_module("profile_prefill")
    backend = tile.backend()
    out = tmp_path / "profile.json"
    try:
        profile_prefill.main(["--smoke", "--out", str(out), *(["--unfused"] if unfused else [])])
    finally:
        tile.set_backend(backend)
    result = json.loads(out.read_text())
    names = profile_prefill.OPS_UNFUSED if unfused else profile_prefill.OPS
    ops = [r["op"] for r in result["ops"]]
    assert ops == ["embedding", *names]
    assert result["fused"] is not unfused
    layers = TINY.num_hidden_layers
    assert [r["launches"] for r in result["ops"]] == [1] + [layers] * len(names)
    assert all(r["ms"] > 0 for r in result["ops"])
    assert abs(sum(r["share"] for r in result["ops"]) - 1) < 1e-9
    rates = {r["op"]: ("tflops" in r, "gbps" in r) for r in result["ops"]}
    assert rates["attention"] == rates["qkv_proj"] == (True, False)
    assert rates["prep_qkv"] == (False, True)
    if unfused:
        assert rates["swiglu"] == (False, True)
        assert rates["gate_up_proj"] == (True, False)
    else:
        assert rates["gate_up_swiglu"] == (True, False)
    assert result["total_ms"] > 0
    assert result["sum_ms"] == pytest.approx(sum(r["ms"] for r in result["ops"]))
    text = capsys.readouterr().out
    assert "whole prefill" in text
    assert "prep_qkv" in text


def test_profile_prefill_refuses_decode_lengths() -> None:
    profile_prefill = importlib.import_module("profile_prefill")
    with pytest.raises(SystemExit):
        profile_prefill.main(["--model", "tiny", "--tokens", "16"])
    with pytest.raises(ValueError, match="more than 16"):
        profile_prefill.profile(TINY, qwen3_weights.SeededWeights(TINY, seed=0), 16)


def test_profile_prefill_work_counts_add_up_to_the_prefill_flops() -> None:
    profile_prefill = importlib.import_module("profile_prefill")
    c, n = CONFIGS["4B"], 64
    want = qwen3_prefill.prefill_flops(c, n)
    for unfused in (False, True):
        work = profile_prefill.op_work(c, n, unfused=unfused)
        names = profile_prefill.OPS_UNFUSED if unfused else profile_prefill.OPS
        assert set(work) == {"embedding", *names}
        flops = sum(amount for unit, amount in work.values() if unit == "flop") * c.num_hidden_layers
        assert flops == want["gemm"] + want["attention"]
    work = profile_prefill.op_work(c, n)
    assert work["prep_qkv"] == ("byte", 2.0 * 2 * n * (c.q_size + 2 * c.kv_size))
