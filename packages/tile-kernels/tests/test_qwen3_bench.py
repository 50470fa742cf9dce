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
from tile.kernels.qwen3._chain import Chain

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


@pytest.mark.parametrize("mode", [[], ["--prefill"], ["--pdl", "both", "--pdl-rounds", "2"]])
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
    if mode == ["--prefill"]:
        assert row["mode"] == "prefill"
        assert row["tokens"] == 16
        assert row["tile_prefill"]["s"] > 0
        assert row["tile_prefill_graph"]["s"] > 0
        assert "cublas_gemm" not in row
    else:
        assert row["mode"] == "decode"
        assert row["tile_graph"]["tokens_per_s"] > 0
        assert ("tile_graph_pdl_on" in row) == bool(mode)  # --pdl both: the A/B rows, two rounds each
        if mode:
            assert row["pdl"] == "both"
            for name in ("tile_graph_pdl_on", "tile_graph_pdl_off"):
                assert len(row[name]["rounds_s"]) == 2
                assert row[name]["tokens_per_s"] > 0
            assert row["pdl_same_tokens"] is True
            assert row["pdl_speedup"] > 0


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_the_prefill_row_on_the_gpu_times_cublas_on_the_same_gemms(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    two_layers = Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})
    tile.set_backend("gpu")
    try:  # medians of 7 (of 2, one run of the GPU tier's 8 processes on one GPU timed the GEMM graph 10x slow)
        row = qwen3_prefill.bench_prefill(two_layers, qwen3_weights.SeededWeights(two_layers), 256, torch, reps=7)
    finally:
        tile.set_backend("cpu")
    assert row["cublas_weights"] == "each layer its own"
    assert row["tile_gemm_graph"]["s"] < row["tile_prefill_graph"]["s"]  # the GEMMs are part of the pass
    assert 0 < row["cublas_gemm"]["tflops"] < 2500  # no dense bf16 peak is higher: the count is not inflated
    assert 0 < row["gemm_only_vs_cublas"] < 10
    assert row["prefill_vs_cublas"] < row["prefill_graph_vs_cublas"]  # eager adds the host's enqueueing


@pytest.mark.parametrize("flag", ["", "--unfused", "--glu"])
def test_profile_prefill_times_every_op_of_the_prefill(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    profile_prefill = importlib.import_module("profile_prefill")
    backend = tile.backend()
    out = tmp_path / "profile.json"
    try:
        profile_prefill.main(["--smoke", "--out", str(out), *([flag] if flag else [])])
    finally:
        tile.set_backend(backend)
    result = json.loads(out.read_text())
    unfused = flag != "--glu"  # the model's prefill keeps gate/up and SwiGLU apart (Qwen3.PREFILL_GLU is off)
    names = profile_prefill.OPS_UNFUSED if unfused else profile_prefill.OPS
    ops = [r["op"] for r in result["ops"]]
    assert ops == ["embedding", *names]
    assert result["fused"] is not unfused
    layers = TINY.num_hidden_layers
    launches = {r["op"]: r["launches"] for r in result["ops"]}
    # split-K GEMMs are two launches a layer
    gemms = {"qkv_proj", "o_proj_residual", "gate_up_proj", "gate_up_swiglu", "down_proj_residual"}
    assert all(launches[op] in (layers, 2 * layers) for op in gemms if op in launches)
    assert [launches[op] for op in ops if op not in gemms] == [1] + [layers] * len([n for n in names if n not in gemms])
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


def test_profile_prefill_refuses_decode_lengths(capsys: pytest.CaptureFixture[str]) -> None:
    profile_prefill = importlib.import_module("profile_prefill")
    with pytest.raises(SystemExit, match="2"):  # argparse's usage error
        profile_prefill.main(["--model", "tiny", "--tokens", "16"])
    assert "--tokens 16: give more than 16" in capsys.readouterr().err
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


def test_counting_launches_counts_eager_runs_and_captures_and_restores_the_launch_path() -> None:
    profile_prefill, profile_decode = (importlib.import_module(m) for m in ("profile_prefill", "profile_decode"))
    from tile.frontend import _accel
    from tile.frontend._launch import Launch

    before, path = (Launch._execute, Launch._run_in), _accel.active()

    def step(ch: Chain) -> Any:
        return profile_decode.empty.grid((1,))(ch.take("x")), {"x": 0}

    chain = Chain(x=tile.zeros(tile.f32, [4]))
    with profile_prefill.counting_launches() as eager:
        chain.finish(chain.build([step] * 3).sync())
    with profile_prefill.counting_launches() as captured:  # the capture executes each launch once, replays none
        assert profile_prefill.timed_ms([step] * 5, chain, reps=2, inner=3) > 0
    assert (eager, captured) == ([3], [5])
    assert (Launch._execute, Launch._run_in) == before
    assert _accel.active() == path


def _decode_smoke(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    profile_decode = importlib.import_module("profile_decode")
    backend = tile.backend()
    out = tmp_path / "decode.json"
    try:
        profile_decode.main(["--smoke", "--out", str(out), *args])
    finally:
        tile.set_backend(backend)
    results: list[dict[str, Any]] = json.loads(out.read_text())
    return results


def test_profile_decode_times_every_op_of_the_fused_decode_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile_decode = importlib.import_module("profile_decode")
    [result] = _decode_smoke(tmp_path)
    ops = [r["op"] for r in result["ops"]]
    assert ops == ["embedding", *profile_decode.FUSED_OPS, *profile_decode.HEAD_OPS]
    layers, launches = TINY.num_hidden_layers, {r["op"]: r["launches"] for r in result["ops"]}
    assert launches["prep_qkv"] == launches["attention"] == layers  # max_seq 16: one attention kernel
    assert launches["embedding"] == launches["final_norm"] == launches["lm_head"] == 1
    assert launches["argmax"] == 2  # its chunks in parallel, then the pick
    assert result["launches"] == sum(launches.values())  # the whole step launches what its ops do
    assert all(r["us"] > 0 and r["floor_us"] > 0 for r in result["ops"])
    assert abs(sum(r["share"] for r in result["ops"]) - 1) < 1e-9
    assert result["sum_us"] == pytest.approx(sum(r["us"] for r in result["ops"]))
    assert result["gap_us"] == pytest.approx(result["whole_us"] - result["sum_us"])
    assert sum(r["floor_us"] for r in result["ops"]) == pytest.approx(result["empty_us"])
    assert result["empty_us"] > 0
    assert result["greedy_tokens_per_s"] > 0
    assert (result["context"], result["fuse"], result["max_seq"]) == (8, True, 16)
    assert "roofline_us" not in result  # no bandwidth on the CPU interpreter
    work = profile_decode.op_bytes(TINY, 8, True)
    assert result["ops"][3]["bytes"] == work["attention"] * layers
    text = capsys.readouterr().out
    assert "whole step (graph)" in text
    assert "empty-kernel chain" in text


def test_profile_decode_both_forms_with_split_attention_and_the_roofline(tmp_path: Path) -> None:
    profile_decode = importlib.import_module("profile_decode")
    args = ["--fuse", "both", "--decode-attention", "split", "--context", "24", "--bandwidth", "1e9"]
    fused, unfused = _decode_smoke(tmp_path, *args)
    assert [r["op"] for r in fused["ops"]] == ["embedding", *profile_decode.FUSED_OPS, *profile_decode.HEAD_OPS]
    assert [r["op"] for r in unfused["ops"]] == ["embedding", *profile_decode.UNFUSED_OPS, *profile_decode.HEAD_OPS]
    assert (fused["fuse"], unfused["fuse"]) == (True, False)
    layers = TINY.num_hidden_layers
    for result in (fused, unfused):
        launches = {r["op"]: r["launches"] for r in result["ops"]}
        assert launches["attention"] == 2 * layers  # max_seq 32: two key tiles, split + combine
        assert result["attention_launches_per_layer"] == 2
        assert result["max_seq"] == 32
        assert result["decode_attention"] == "split"
        for r in result["ops"]:
            assert r["roofline_fraction"] == pytest.approx(r["bytes"] / 1e9 / (r["us"] * 1e-6))
        assert result["roofline_us"] == pytest.approx(sum(r["bytes"] for r in result["ops"]) / 1e3)
        assert result["greedy_roofline_fraction"] == pytest.approx(result["roofline_us"] / result["greedy_us"])
    assert unfused["launches"] == fused["launches"] + 3 * layers  # the norms and SwiGLU of each layer, unfused
    assert unfused["bytes"] > fused["bytes"]


@pytest.mark.parametrize("name", ["4B", "8B"])
def test_profile_decode_bytes_are_the_weights_the_cache_and_the_activations(name: str) -> None:
    profile_decode = importlib.import_module("profile_decode")
    c, context = CONFIGS[name], 512
    layer_ops = set(profile_decode.FUSED_OPS) | set(profile_decode.UNFUSED_OPS)

    def total(fused: bool, at: int = context) -> float:
        work: dict[str, float] = profile_decode.op_bytes(c, at, fused)
        return sum(b * (c.num_hidden_layers if op in layer_ops else 1) for op, b in work.items())

    untied = 0 if c.tie_word_embeddings else 2 * c.vocab_size * c.hidden_size  # the table: one row read
    weights = 2 * c.num_parameters() - untied
    kv = 2 * c.num_hidden_layers * c.kv_size * 2 * (context + 1)
    for fused in (True, False):
        assert weights + kv < total(fused) < (weights + kv) * 1.005  # activations are the small rest (~0.1%)
    h, i = c.hidden_size, c.intermediate_size
    assert total(False) - total(True) == c.num_hidden_layers * 2 * (4 * h + 4 * i)  # normed rows, gate/up out
    assert total(True, context + 10) - total(True) == 2 * c.num_hidden_layers * c.kv_size * 2 * 10
    first = profile_decode.op_bytes(c, 0, True)["attention"]  # at position 0 the token attends to itself alone
    assert first == 2 * (2 * c.q_size + 2 * c.kv_size)
