"""``bench_qwen3.py --contexts`` (``benchmarks/qwen3_context.py``) on the CPU interpreter and
``benchmarks/plot_qwen3.py`` on a checked-in results fixture: the chunked cache fill, the roofline per length, the
smoke run's row, the results-file merge, the peers' skips over a series, and the SVG's lines, labels and order."""

from __future__ import annotations

import importlib
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
from tile.kernels.qwen3 import CONFIGS, TINY, Qwen3Config

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCH))  # the benchmark imports its helpers as top-level modules, as when run as a script
bench_qwen3, qwen3_context, qwen3_hf, qwen3_weights, plot_qwen3 = (
    importlib.import_module(m) for m in ("bench_qwen3", "qwen3_context", "qwen3_hf", "qwen3_weights", "plot_qwen3")
)
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "qwen3_context.json"
SVG = "{http://www.w3.org/2000/svg}"


def test_fill_runs_the_prompt_in_chunks_and_returns_the_last_argmax() -> None:
    seen: list[list[int]] = []

    def forward(ids: list[int]) -> np.ndarray[Any, Any]:
        seen.append(ids)
        logits = np.zeros(10, dtype=np.float32)
        logits[ids[-1] % 10] = 1.0
        return logits

    assert qwen3_context.fill(forward, list(range(11)), 4) == 10 % 10
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    seen.clear()
    assert qwen3_context.fill(forward, [3, 7], 512) == 7
    assert seen == [[3, 7]]
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        qwen3_context.fill(forward, [1], 0)
    with pytest.raises(ValueError, match="empty prompt"):
        qwen3_context.fill(forward, [], 4)


def test_kv_bytes_count_k_and_v_of_every_layer_at_the_middle_step() -> None:
    c = TINY
    per_position = c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * 2  # layers x (K, V) x bf16
    assert qwen3_context.kv_bytes_per_token(c, 100, 32) == per_position * 116
    assert qwen3_context.roofline_s(1000, 24, 2048.0) == 0.5
    assert qwen3_context.roofline_s(1000, 24, 0.0) == 0.0


def test_parse_contexts_sorts_and_refuses_bad_lengths() -> None:
    assert qwen3_context.parse_contexts("512,128, 512,") == [128, 512]
    for bad in ("", "0,128", "-4", "1k"):
        with pytest.raises(SystemExit, match="--contexts"):
            qwen3_context.parse_contexts(bad)


def test_a_point_fills_the_cache_to_its_length_and_scores_against_the_roofline() -> None:
    w = qwen3_weights.SeededWeights(TINY, seed=0)
    point = qwen3_context.tile_point(TINY, w, 11, tokens=2, chunk=4, bandwidth=1e9, decode_attention="auto")
    assert point["context"] == 11
    assert point["max_seq"] == 32  # 11 + 2 + 4 rounded up to a power of two
    kv = qwen3_context.kv_bytes_per_token(TINY, 11, 2)
    assert point["kv_bytes_per_token"] == kv
    assert point["roofline_tokens_per_s"] == pytest.approx(1e9 / (2 * TINY.num_parameters() + kv))
    rate = point["tile_graph"]["tokens_per_s"]
    assert rate > 0
    assert point["tile_graph"]["roofline_fraction"] == pytest.approx(rate / point["roofline_tokens_per_s"])


def test_the_smoke_sweep_prints_a_context_row_per_length(capsys: pytest.CaptureFixture[str]) -> None:
    backend = tile.backend()
    try:
        bench_qwen3.main(["--smoke", "--contexts", "20,8", "--prefill-chunk", "8", "--commit", "abc1234"])
    finally:
        tile.set_backend(backend)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    row, info = rows[0], rows[-1]
    assert (row["model"], row["mode"], row["tokens"], row["prefill_chunk"]) == ("tiny", "context", 2, 8)
    assert [p["context"] for p in row["points"]] == [8, 20]
    assert [p["max_seq"] for p in row["points"]] == [16, 32]
    assert all(p["tile_graph"]["tokens_per_s"] > 0 and p["roofline_tokens_per_s"] is None for p in row["points"])
    assert not any("torch_eager" in p for p in row["points"])  # no peers on the interpreter
    assert info["device"] == "cpu interpreter"
    assert row["commit"] == "abc1234"


def test_contexts_and_prefill_are_refused_together() -> None:
    with pytest.raises(SystemExit, match="--contexts times decode"):
        bench_qwen3.main(["--smoke", "--prefill", "--contexts", "8"])
    with pytest.raises(SystemExit, match="--prefill-chunk 0"):
        bench_qwen3.main(["--smoke", "--contexts", "8", "--prefill-chunk", "0"])


def test_save_rows_keeps_other_top_level_keys_and_rows(tmp_path: Path) -> None:
    path = tmp_path / "qwen3.json"
    decode = {"model": "4B", "mode": "decode", "tile_graph": {"tokens_per_s": 1.0}}
    path.write_text(json.dumps({"info": {"device": "A"}, "rows": [decode], "notes": ["kept"]}))
    sweep = {"model": "4B", "mode": "context", "points": []}
    bench_qwen3.save_rows([sweep], {"bandwidth_Bps": 1.0}, path)
    saved = json.loads(path.read_text())
    assert saved == {"info": {"device": "A", "bandwidth_Bps": 1.0}, "rows": [decode, sweep], "notes": ["kept"]}


def test_the_transformers_series_is_a_skip_per_prompt_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails
    kw: dict[str, Any] = {"c": TINY, "w": {}, "tokens": 2, "limit_s": 5, "compiled": True}
    got = qwen3_hf.hf_series(object(), prompts=[[1], [1, 2]], floors=[0.0, 0.0], **kw)
    assert len(got) == 2
    assert all("transformers is not importable" in r["skipped"] for row in got for r in row.values())
    with pytest.raises(ValueError, match="2 prompts but 1 roofline"):
        qwen3_hf.hf_series(object(), prompts=[[1], [2]], floors=[0.0], **kw)


def _plot(tmp_path: Path, *extra: str) -> ET.Element:
    out = tmp_path / "images" / "qwen3_context.svg"
    assert plot_qwen3.main(["--results", str(FIXTURE), "--out", str(out), *extra]) == out
    return ET.fromstring(out.read_text())


def test_the_plot_draws_each_contender_with_device_and_commit(tmp_path: Path) -> None:
    root = _plot(tmp_path)
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert any("Qwen3-4B" in t for t in texts)
    assert any("test fixture (not a measurement)" in t and "commit fixture0" in t and "4.00 TB/s" in t for t in texts)
    assert {"128", "1024", "8192"} <= set(texts)  # the context ticks
    labels = [label for _, label, *_ in plot_qwen3.SERIES]
    assert [t for t in texts if t in labels] == labels  # every contender has a legend entry, in order
    lines = {(p.get("stroke"), p.get("points", "")) for p in root.iter(f"{SVG}polyline")}
    colours = {key: colour for key, _, colour, _ in plot_qwen3.SERIES}
    # the compiled contender skipped 1024: two runs of one point each, no line across the gap
    assert sum(1 for c, _ in lines if c == colours["transformers_compiled"]) == 2

    def coords(key: str) -> list[tuple[float, float]]:
        (pts,) = [p for c, p in lines if c == colours[key]]
        return [(float(a), float(b)) for a, b in (xy.split(",") for xy in pts.split())]

    tile_xy, roof_xy = coords("tile_graph"), coords("roofline_tokens_per_s")
    xs = [x for x, _ in tile_xy]
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1])  # log scale: 128 -> 1024 -> 8192 are 3 doublings each
    assert xs == sorted(xs)
    assert [x for x, _ in roof_xy] == xs
    assert all(ry < ty for (_, ry), (_, ty) in zip(roof_xy, tile_xy, strict=True))  # the roofline above Tile
    assert tile_xy[0][1] < tile_xy[2][1]  # 260 tokens/s at 128 above 200 at 8192


def test_the_plot_says_what_to_run_without_a_sweep(tmp_path: Path) -> None:
    data = json.loads(FIXTURE.read_text())
    data["rows"] = [r for r in data["rows"] if r["mode"] != "context"]
    path = tmp_path / "qwen3.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="--contexts 128,512,1024,2048,4096,8192"):
        plot_qwen3.main(["--results", str(path), "--out", str(tmp_path / "x.svg")])
    with pytest.raises(SystemExit, match="no context-sweep row for model 32B"):
        _plot(tmp_path, "--model", "32B")
    assert not (tmp_path / "x.svg").exists()


def test_nice_ticks_cover_the_top_in_round_steps() -> None:
    assert plot_qwen3.nice_ticks(273.0) == [0, 100, 200, 300]
    assert plot_qwen3.nice_ticks(4.2) == [0, 1, 2, 3, 4, 5]
    assert plot_qwen3.nice_ticks(0.0) == [0.0, 1.0]


def test_the_table_lists_each_length_with_a_dash_for_a_skip() -> None:
    row = plot_qwen3.context_row(json.loads(FIXTURE.read_text()))
    lines = plot_qwen3.table(row).splitlines()
    assert lines[0].split(" | ")[:4] == ["| context", "Tile graph", "roofline", "Tile / roofline"]
    assert lines[2] == "| 128 | 260.0 | 500.0 | 52% | 180.0 | 14.0 | 15.0 |"
    assert lines[3] == "| 1024 | 250.0 | 490.0 | 51% | - | 13.5 | 14.5 |"
    assert len(lines) == 2 + len(row["points"])


@pytest.mark.gpu
@pytest.mark.requires_tileiras
def test_the_peers_series_on_the_gpu_fills_every_point(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    qwen3_torch = importlib.import_module("qwen3_torch")
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    c = Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})
    w = qwen3_weights.SeededWeights(c)
    tile.set_backend("gpu")
    try:
        kw: dict[str, Any] = {"tokens": 4, "chunk": 64, "bandwidth": 1e12, "decode_attention": "auto"}
        points = [qwen3_context.tile_point(c, w, n, **kw) for n in (64, 200)]
        tm = qwen3_torch.TorchQwen3(torch, c, w, 200 + 4 + 4)
        qwen3_context.torch_series(torch, tm, c, points, tokens=4, chunk=64)
        qwen3_context.hf_points(torch, c, w, points, tokens=4, limit_s=60, compiled=False)
    finally:
        tile.set_backend("cpu")
    assert [p["max_seq"] for p in points] == [128, 256]
    assert points[0]["roofline_tokens_per_s"] > points[1]["roofline_tokens_per_s"]  # more KV to read at 200
    for p in points:
        for key in ("tile_graph", "torch_eager"):
            rate = p[key]["tokens_per_s"]
            assert rate > 0
            assert p[key]["roofline_fraction"] == pytest.approx(rate / p["roofline_tokens_per_s"])
        hf = p["transformers_eager"]
        assert hf.get("tokens_per_s", 0) > 0 or "not importable" in hf["skipped"]
        assert "not asked for" in p["transformers_compiled"]["skipped"] or "not importable" in hf["skipped"]
