"""tile.kernels.bench on the CPU backend: real timings of small callables (sleeps), interleaved rounds, failures,
ratios, JSON round trips and the SVG plot; the GPU path (CUDA events, the L2 flush) in the ``gpu``-marked test."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.kernels as tk
from tile.frontend import ArgumentError, TileError
from tile.kernels import bench

SVG = "{http://www.w3.org/2000/svg}"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "packages" / "kernels.md"


def sleeper(ms: float) -> Callable[[], None]:
    return lambda: time.sleep(ms / 1e3)


def fails() -> None:
    raise RuntimeError("contender broke")


def test_measure_times_every_call_and_a_sleep_lasts_at_least_its_length() -> None:
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        time.sleep(0.002)

    sample = bench.measure(fn, warmup=2, reps=4)
    assert len(calls) == 6  # the warm-up calls run, untimed
    assert len(sample.times_ms) == 4
    assert all(t >= 2.0 for t in sample.times_ms)
    assert sample.min_ms <= sample.quartiles_ms[0] <= sample.median_ms <= sample.quartiles_ms[1] <= sample.max_ms
    assert sample.median_ms < 50.0  # a sleep of 2 ms, not seconds: the unit is ms


def test_sample_statistics_and_rates() -> None:
    s = bench.Sample((4.0, 1.0, 3.0, 2.0, 100.0))
    assert (s.median_ms, s.min_ms, s.max_ms) == (3.0, 1.0, 100.0)
    assert s.quartiles_ms == (2.0, 4.0)
    assert s.iqr_ms == 2.0
    assert s.tflops(3e12) == pytest.approx(1000.0)  # 3e12 flops in 3 ms
    assert s.gbps(3e6) == pytest.approx(1.0)
    assert bench.Sample((5.0,)).quartiles_ms == (5.0, 5.0)  # one call: its time is every quantile
    assert bench.Sample((5.0,)).iqr_ms == 0.0
    with pytest.raises(ArgumentError, match="at least one time"):
        bench.Sample(())


def test_compare_orders_contenders_by_their_time_and_divides_by_the_baseline() -> None:
    result = bench.compare({"slow": sleeper(4), "fast": sleeper(1)}, rounds=3, reps=2, warmup=0, baseline="fast")
    assert set(result.samples) == {"slow", "fast"}
    assert all(len(s.times_ms) == 6 for s in result.samples.values())
    ratios = result.ratios
    assert ratios["fast"] == 1.0
    assert ratios["slow"] == pytest.approx(result.samples["slow"].median_ms / result.samples["fast"].median_ms)
    assert ratios["slow"] is not None
    assert ratios["slow"] > 1.5
    assert result.failures == {}
    assert result.info["backend"] == "cpu"
    assert result.info["order"] == "shuffled"
    assert result.info["seed"] == 0


def test_the_baseline_defaults_to_the_first_contender() -> None:
    assert bench.compare({"b": sleeper(0), "a": sleeper(0)}, rounds=1, reps=1).baseline == "b"


def test_rounds_visit_contenders_in_the_seeded_order() -> None:
    visited: list[str] = []
    contenders = {name: (lambda n=name: visited.append(n)) for name in "abcd"}
    result = bench.compare(contenders, rounds=6, reps=1, warmup=0, seed=7)
    assert [n for visit in result.schedule for n in visit] == visited  # the schedule is what ran
    again = bench.compare(contenders, rounds=6, reps=1, warmup=0, seed=7)
    assert again.schedule == result.schedule  # reproducible from the seed
    other = bench.compare(contenders, rounds=6, reps=1, warmup=0, seed=8)
    assert other.schedule != result.schedule
    assert all(sorted(v) == list("abcd") for v in result.schedule)
    assert len({tuple(v) for v in result.schedule}) > 1  # shuffled: not one order repeated


def test_fixed_and_reversed_orders() -> None:
    assert bench.round_orders(3, 2, "fixed") == [[0, 1, 2], [0, 1, 2]]
    assert bench.round_orders(3, 2, "reversed") == [[2, 1, 0], [2, 1, 0]]
    assert bench.round_orders(5, 4, "shuffled", seed=3) == bench.round_orders(5, 4, "shuffled", seed=3)


def test_a_failing_contender_is_recorded_and_the_others_complete() -> None:
    broken_later = iter([None, None])

    def fails_in_round_one() -> None:
        next(broken_later)  # the two warm-up calls pass, the first timed call raises StopIteration

    result = bench.compare(
        {"ok": sleeper(0), "bad": fails, "late": fails_in_round_one}, rounds=3, reps=2, warmup=2, order="fixed"
    )
    assert result.failures == {"bad": "RuntimeError: contender broke", "late": "StopIteration: "}
    assert list(result.samples) == ["ok"]
    assert len(result.samples["ok"].times_ms) == 6
    assert result.ratios == {"ok": 1.0}
    failed_base = bench.compare({"ok": sleeper(0), "bad": fails}, rounds=1, reps=1, baseline="bad")
    assert failed_base.ratios == {"ok": None}
    assert failed_base.value("bad") is None


def test_rates_need_the_work_per_call() -> None:
    result = bench.compare({"x": sleeper(1)}, rounds=1, reps=2, flops=2e9, nbytes=4e6)
    median = result.samples["x"].median_ms
    assert result.value("x", "ms") == median
    assert result.value("x", "TFLOP/s") == pytest.approx(2e9 / (median * 1e-3) / 1e12)
    assert result.value("x", "GB/s") == pytest.approx(4e6 / (median * 1e-3) / 1e9)
    bare = bench.compare({"x": sleeper(0)}, rounds=1, reps=1)
    with pytest.raises(ArgumentError, match="pass flops= to compare"):
        bare.value("x", "TFLOP/s")
    with pytest.raises(ArgumentError, match="metric='GFLOPS' is not one of"):
        bare.value("x", "GFLOPS")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "rounds must be an int >= 1, got 0"),
        ({"reps": 0}, "reps must be an int >= 1, got 0"),
        ({"warmup": -1}, "warmup must be an int >= 0"),
        ({"rounds": True}, "rounds must be an int"),
        ({"order": "random"}, "order='random' is not one of shuffled, fixed, reversed"),
        ({"baseline": "cublas"}, "baseline 'cublas' is not a contender"),
        ({"seed": 1.5}, "seed must be an int"),
    ],
)
def test_compare_refuses_bad_settings_before_running_anything(kwargs: dict[str, Any], message: str) -> None:
    ran: list[int] = []
    with pytest.raises(ArgumentError, match=message):
        bench.compare({"tile": lambda: ran.append(1)}, **kwargs)
    assert ran == []


def test_contenders_must_be_named_callables() -> None:
    with pytest.raises(ArgumentError, match="contender 'torch' is a int; each must be a callable"):
        bench.compare({"tile": sleeper(0), "torch": 3})  # type: ignore[dict-item]  # the error under test
    with pytest.raises(ArgumentError, match="non-empty dict"):
        bench.compare({})
    with pytest.raises(ArgumentError, match="fn is a str, not a callable"):
        bench.measure("f")  # type: ignore[arg-type]  # the error under test
    with pytest.raises(ArgumentError, match="reps must be an int >= 1"):
        bench.measure(sleeper(0), reps=0)
    assert issubclass(ArgumentError, TileError)


def test_comparison_json_round_trip(tmp_path: Path) -> None:
    result = bench.compare({"a": sleeper(0), "b": sleeper(1), "c": fails}, rounds=2, reps=2, nbytes=1e6, seed=5)
    path = result.to_json(tmp_path / "cmp.json")
    data = json.loads(path.read_text())
    assert data["contenders"]["b"]["median_ms"] == result.samples["b"].median_ms
    assert data["contenders"]["b"]["gbps"] == pytest.approx(result.samples["b"].gbps(1e6))
    assert data["failures"] == {"c": "RuntimeError: contender broke"}
    assert data["seed"] == 5
    assert data["order"] == "shuffled"
    assert "tile-kernels" in data["info"]["versions"]
    assert bench.Comparison.from_json(path) == result


def _sweep(metric_bytes: bool = True) -> bench.Sweep:
    sweep = bench.Sweep("copy <test> & co", x_label="elements")
    for n in (1024, 4096, 16384):
        contenders = {"tile": sleeper(n / 16384), "peer": sleeper(n / 8192)}
        if n == 4096:
            contenders["flaky"] = fails
        elif n == 16384:
            contenders["flaky"] = sleeper(0)
        sweep.add(n, bench.compare(contenders, rounds=1, reps=1, warmup=0, nbytes=4.0 * n if metric_bytes else None))
    return sweep


def test_sweep_series_json_and_plot(tmp_path: Path) -> None:
    sweep = _sweep()
    assert sweep.contenders == ["tile", "peer", "flaky"]
    series = sweep.series("GB/s")
    assert [size for size, _ in series["tile"]] == [1024, 4096, 16384]
    assert [v is None for _, v in series["flaky"]] == [True, True, False]  # absent, failed, measured
    back = bench.Sweep.from_json(sweep.to_json(tmp_path / "sweep.json"))
    assert back == sweep
    assert back.info["device"].startswith("CPU interpreter")
    root = ET.fromstring(bench.plot(back, "GB/s"))
    polylines = list(root.iter(f"{SVG}polyline"))
    assert len(polylines) == 3  # one line per contender (flaky: its one measured point)
    assert len(polylines[0].get("points", "").split()) == 3
    assert len({p.get("stroke") for p in polylines}) == 3
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert "copy <test> & co" in texts  # escaped in the file, the same text once parsed
    assert {"tile", "peer", "flaky", "1024", "4096", "16384", "GB/s"} <= set(texts)


def test_plot_refuses_what_it_cannot_draw() -> None:
    with pytest.raises(ArgumentError, match="TFLOP/s needs the work per call; pass flops="):
        bench.plot(_sweep(), "TFLOP/s")
    with pytest.raises(ArgumentError, match="no line has a measured point"):
        bench.plot(bench.Sweep("empty"), "ms")
    with pytest.raises(ArgumentError, match="size must be a positive number, finite"):
        bench.Sweep("s").add(0, bench.compare({"a": sleeper(0)}, rounds=1, reps=1))


def test_line_chart_breaks_lines_at_missing_points() -> None:
    line = bench.Line("x", [(1, 1.0), (2, None), (4, 2.0), (8, 3.0)], "#000000", "6 4")
    root = ET.fromstring(bench.line_chart([line], title="t", subtitle="s", x_label="n", y_label="v"))
    runs = [p.get("points", "").split() for p in root.iter(f"{SVG}polyline")]
    assert [len(r) for r in runs] == [1, 2]
    assert all(p.get("stroke-dasharray") == "6 4" for p in root.iter(f"{SVG}polyline"))
    with pytest.raises(ValueError, match="every x must be positive"):
        bench.line_chart([bench.Line("x", [(0, 1.0)], "#000")], title="t", subtitle="s", x_label="n", y_label="v")


def test_a_tile_kernel_on_the_interpreter() -> None:
    x = tile.from_numpy(np.ones((4, 64), np.float32))
    result = bench.compare({"softmax": lambda: tk.softmax(x), "numpy": lambda: np.exp(np.ones((4, 64)))}, rounds=2)
    assert result.failures == {}
    assert result.samples["softmax"].median_ms > 0


def test_the_docs_example_runs_and_writes_its_json_and_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = DOCS.read_text().split("## Benchmarking your own kernels", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOCS), "exec"), {"__name__": "docs"})
    assert out.getvalue().splitlines() == [f"{n} ['numpy', 'tile'] {{}}" for n in (64, 256, 1024)]
    sweep = bench.Sweep.from_json(tmp_path / "softmax.json")
    assert [size for size, _ in sweep.points] == [64, 256, 1024]
    assert len(list(ET.parse(tmp_path / "softmax.svg").getroot().iter(f"{SVG}polyline"))) == 2


@pytest.mark.gpu
def test_gpu_events_time_a_tile_kernel_and_the_flush_is_outside_the_timing() -> None:
    import tile.core as tc

    x = tile.from_numpy(np.random.default_rng(0).standard_normal((4096, 4096), np.float32))
    flushed = bench.measure(lambda: tk.softmax(x), warmup=3, reps=10, flush_l2=True)
    warm = bench.measure(lambda: tk.softmax(x), warmup=3, reps=10, flush_l2=False)
    assert 0 < flushed.median_ms < 100
    assert 0 < warm.median_ms < 100
    idle = bench.measure(lambda: None, reps=10, flush_l2=True)
    # The flush writes 2 x L2 (100 MB on an H100, ~30 us) before the start event: an empty call times ~nothing.
    assert idle.median_ms < 0.02, idle.summary()
    stream = tc.Device(0).create_stream()
    timer = bench.Timer(stream=stream)
    try:
        assert timer.gpu
        assert timer.time_ms(lambda: None) >= 0
    finally:
        timer.close()
    result = bench.compare({"flushed": lambda: tk.softmax(x), "again": lambda: tk.softmax(x)}, rounds=4, reps=3)
    assert result.failures == {}
    assert result.info["backend"] == "gpu"
    assert result.info["device"] == tc.Device(0).name
