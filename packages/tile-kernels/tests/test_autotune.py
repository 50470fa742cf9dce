"""The autotuner's choice (with an injected timer, on the CPU), its on-disk records and what makes it ignore them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.kernels as tk
from tile import aio
from tile.compiler import CompileError
from tile.frontend import ArgumentError
from tile.kernels import _gemm, _gemm_configs, autotune
from tile.kernels.autotune import FORMAT, Autotuner, Config

CONFIGS = [Config.of(BM=bm, BN=64) for bm in (16, 32, 64, 128)]
KEY = {"m": 64, "dtype": "f16", "arch": "sm_90"}


class FakeGPU:
    """``run`` remembers the config it was asked to run; the timer answers that config's made-up time."""

    def __init__(self, seconds: dict[int, float]) -> None:
        self.seconds, self.timed = seconds, 0
        self.ran: list[Config] = []

    def run(self, config: Config) -> None:
        self.ran.append(config)

    def timer(self, fn: Callable[[], object]) -> float:
        fn()
        self.timed += 1
        return self.seconds[self.ran[-1]["BM"]]


def _tuner(path: Path | None, gpu: FakeGPU | None, source: str = "src1") -> Autotuner:
    return Autotuner("fam", source=source, timer=None if gpu is None else gpu.timer, cache_dir=path)


def test_the_fastest_config_wins_and_ties_go_to_the_first_listed(tmp_path: Path) -> None:
    gpu = FakeGPU({16: 3.0, 32: 1.0, 64: 1.0, 128: 2.0})
    assert _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[0], gpu.run) == CONFIGS[1]
    assert gpu.ran == CONFIGS  # every candidate timed once, in order
    gpu2 = FakeGPU({16: 3.0, 32: 2.0, 64: 1.0, 128: 2.0})
    assert _tuner(None, gpu2).choose(KEY, CONFIGS, CONFIGS[0], gpu2.run) == CONFIGS[2]


def test_inside_a_chain_function_the_default_is_used_and_nothing_is_remembered(tmp_path: Path) -> None:
    """A ``.then()`` function that makes a launch with an untuned key must not tune: timing blocks on the device the
    chain is running on (ExecutionLockError; on 2 GPUs a tensor-parallel rank whose row-parallel projections have no
    residual hit it). The default is used there and the key is tuned by the next call outside a chain."""
    gpu = FakeGPU({16: 3.0, 32: 1.0, 64: 2.0, 128: 2.0})
    tuner = _tuner(tmp_path, gpu)
    seen: list[Config] = []

    def step(out: Any) -> Any:
        seen.append(tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run))
        return aio.value(out)

    aio.value(0).then(step).sync()
    assert seen == [CONFIGS[3]]
    assert (gpu.timed, tuner.remembered()) == (0, {})
    assert tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run) == CONFIGS[1]  # outside the chain: tuned now
    assert gpu.timed == 4


def test_a_record_is_reused_in_memory_and_by_a_new_process(tmp_path: Path) -> None:
    gpu = FakeGPU({16: 3.0, 32: 2.0, 64: 0.5, 128: 2.0})
    first = _tuner(tmp_path, gpu)
    assert first.choose(KEY, CONFIGS, CONFIGS[0], gpu.run) == CONFIGS[2]
    assert first.choose(KEY, CONFIGS, CONFIGS[0], gpu.run) == CONFIGS[2]
    assert (first.tuned, gpu.timed) == (1, 4)
    assert list(first.remembered().values()) == [CONFIGS[2]]
    record = json.loads((tmp_path / f"v{FORMAT}" / "fam.json").read_text())
    assert record["format"] == FORMAT
    assert record["version"] == autotune.VERSION
    (entry,) = record["records"].values()
    assert entry["config"] == {"BM": 64, "BN": 64}
    assert entry["source"] == "src1"
    never = FakeGPU({})  # a timer that would fail: the second tuner must not time anything
    second = _tuner(tmp_path, never)
    assert second.choose(KEY, CONFIGS, CONFIGS[0], never.run) == CONFIGS[2]
    assert (second.tuned, never.timed) == (0, 0)
    other, gpu3 = {**KEY, "m": 128}, FakeGPU({16: 2.0, 32: 2.0, 64: 2.0, 128: 1.0})  # another key: tuned on its own
    assert _tuner(tmp_path, gpu3).choose(other, CONFIGS, CONFIGS[0], gpu3.run) == CONFIGS[3]
    records = json.loads((tmp_path / f"v{FORMAT}" / "fam.json").read_text())["records"]
    assert sorted(r["config"]["BM"] for r in records.values()) == [64, 128]  # both records kept


def _write_first_record(tmp_path: Path) -> Path:
    gpu = FakeGPU({16: 3.0, 32: 2.0, 64: 0.5, 128: 2.0})
    _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[0], gpu.run)
    return tmp_path / f"v{FORMAT}" / "fam.json"


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.update(version="0.0.0"),
        lambda d: d.update(format=0),
        lambda d: next(iter(d["records"].values())).update(source="other"),
        lambda d: next(iter(d["records"].values())).update(config={"BM": 48, "BN": 64}),
        lambda d: next(iter(d["records"].values())).update(config="BM=64"),
    ],
    ids=["version", "format", "kernel-source", "not-a-candidate", "malformed"],
)
def test_records_from_elsewhere_are_ignored_and_retuned(
    tmp_path: Path, spoil: Callable[[dict[str, object]], None]
) -> None:
    path = _write_first_record(tmp_path)
    data = json.loads(path.read_text())
    spoil(data)
    path.write_text(json.dumps(data))
    gpu = FakeGPU({16: 0.1, 32: 2.0, 64: 2.0, 128: 2.0})
    tuner = _tuner(tmp_path, gpu)
    assert tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run) == CONFIGS[0]
    assert tuner.tuned == 1


def test_a_corrupt_file_is_retuned_and_replaced(tmp_path: Path) -> None:
    path = _write_first_record(tmp_path)
    path.write_text("{not json")
    gpu = FakeGPU({16: 0.1, 32: 2.0, 64: 2.0, 128: 2.0})
    assert _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[3], gpu.run) == CONFIGS[0]
    assert json.loads(path.read_text())["format"] == FORMAT


def test_without_a_timer_or_with_tuning_off_the_default_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _tuner(tmp_path, None).choose(KEY, CONFIGS, CONFIGS[3], lambda c: None) == CONFIGS[3]
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    gpu = FakeGPU({16: 0.1, 32: 2.0, 64: 2.0, 128: 2.0})
    assert _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[3], gpu.run) == CONFIGS[3]
    assert gpu.timed == 0
    assert not (tmp_path / f"v{FORMAT}").exists()
    monkeypatch.setenv("TILE_AUTOTUNE", "maybe")
    with pytest.raises(ArgumentError, match="TILE_AUTOTUNE='maybe' is not a boolean"):
        _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[3], gpu.run)


def test_configs_that_do_not_compile_are_skipped(tmp_path: Path) -> None:
    gpu = FakeGPU({16: 0.1, 32: 2.0, 64: 1.0, 128: 2.0})

    def run(config: Config) -> None:
        if config["BM"] == 16:
            raise CompileError("tile too large")
        gpu.run(config)

    assert _tuner(tmp_path, gpu).choose(KEY, CONFIGS, CONFIGS[3], run) == CONFIGS[2]
    with pytest.raises(ArgumentError, match="no candidate configs"):
        _tuner(tmp_path, gpu).choose(KEY, [], CONFIGS[3], run)


def test_buckets_and_config_values() -> None:
    assert [autotune.bucket(n) for n in (1, 7, 16, 17, 100, 4096, 4097)] == [1, 7, 16, 32, 128, 4096, 8192]
    config = Config.of(BN=2, BM=1)
    assert config.as_dict() == {"BM": 1, "BN": 2}
    assert config == Config.of(BM=1, BN=2)
    assert str(config) == "BM=1, BN=2"
    with pytest.raises(KeyError, match="BK"):
        config["BK"]
    assert autotune.device_arch() == "cpu"
    assert autotune.environment() == {"arch": "cpu"}


def test_matmul_uses_the_config_its_tuner_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library path: a tuner with an injected timer times matmul's decode candidates (the GEMV forms and, N being
    tiny, split-K); the call runs the winner."""
    candidates = _gemm_configs.decode_candidates(2, 3)
    picked = next(c for c in candidates if c.as_dict().get("FORM") == 2)
    seen: list[Config] = []

    def timer(fn: Callable[[], object]) -> float:
        before = len(seen)
        fn()
        return 0.0 if len(seen) > before and seen[-1] == picked else 1.0

    tuner = Autotuner("matmul", source="s", timer=timer, cache_dir=tmp_path)
    real_launch = _gemm._launch_matmul

    def spy(config: Config, z: tile.Tensor, **kw: Any) -> Any:
        seen.append(config)
        return real_launch(config, z, **kw)

    monkeypatch.setattr(_gemm, "_launch_matmul", spy)
    old = autotune.set_tuner("matmul", tuner)
    try:
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((2, 40)).astype(np.float32), rng.standard_normal((40, 3)).astype(np.float32)
        z = tk.matmul(a, b)
        np.testing.assert_allclose(z.to_numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    finally:
        autotune.set_tuner("matmul", old)
    assert list(dict.fromkeys(seen)) == list(candidates)  # every decode candidate was timed
    assert seen[:8] == [candidates[0]] * 8  # a decode sample is 8 launches waited for once
    assert set(_gemm_configs.SKINNY) < set(candidates)
    assert seen[-1] == picked  # and the real call ran the winner
    assert tuner.tuned == 1


def test_the_record_version_is_the_package_version() -> None:
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    found = re.search(r'^version = "([^"]+)"$', pyproject, re.MULTILINE)
    assert found is not None
    assert found.group(1) == autotune.VERSION


def test_interleaved_wall_times_interleaves_samples_and_takes_medians() -> None:
    """Every round samples every candidate (each round starting one later), a sample's median ignores one slow
    outlier, and a candidate that does not compile gets None (and is not called again)."""
    now = [0.0]
    calls: list[int] = []
    cost = {0: 1e-3, 2: 3e-3}
    slow_once = {2: 6}  # candidate 2's 6th call (a sample in round 3) is 100x slower

    def fn(i: int) -> Callable[[], object]:
        def run() -> None:
            if i == 1:
                raise CompileError("tile too large")
            calls.append(i)
            n = calls.count(i)
            now[0] += cost[i] * (100 if slow_once.get(i) == n else 1)

        return run

    times = autotune.interleaved_wall_times([fn(0), fn(1), fn(2)], rounds=4, clock=lambda: now[0])
    assert times == [pytest.approx(1e-3), None, pytest.approx(3e-3)]
    # Warm-up, sizing (2 and 1 reps for ~2 ms), then rounds alternating which candidate goes first.
    rounds = [[0, 0, 2], [2, 0, 0], [0, 0, 2], [2, 0, 0]]
    assert calls == [0, 2, 0, 2, *(i for r in rounds for i in r)]


def test_choose_races_the_candidates_when_asked_to_interleave(tmp_path: Path) -> None:
    gpu = FakeGPU({16: 3.0, 32: 2.0, 64: 1.0, 128: 2.0})
    raced: list[int] = []

    def race(fns: Any) -> list[float | None]:
        raced.append(len(fns))
        out: list[float | None] = []
        for f in fns:
            f()
            out.append(gpu.seconds[gpu.ran[-1]["BM"]])
        return out

    tuner = Autotuner("fam", source="s", timer=gpu.timer, cache_dir=tmp_path, race=race)
    assert tuner.choose(KEY, CONFIGS, CONFIGS[0], gpu.run, interleave=True) == CONFIGS[2]
    assert raced == [4]  # one race of all four,
    assert gpu.timed == 0  # not the per-candidate timer
    assert tuner.choose({**KEY, "m": 32}, CONFIGS, CONFIGS[0], gpu.run) == CONFIGS[2]
    assert gpu.timed == 4  # without interleave: the timer, once per candidate
    assert raced == [4]


def test_environment_finds_the_toolchain_once_per_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The families build their tuning key on every call; finding tileiras each time (its package's metadata, a
    ``PATH`` search) cost about 1 ms of host time per call, more than a short FMHA. It is found once per backend and
    compiler settings; new settings (another ``TILE_TILEIRAS``, ``PATH``) look again."""
    import tile.compiler

    probes: list[str] = []

    class Found:
        @property
        def version(self) -> str:
            probes.append("tileiras")
            return f"13.{len(probes)}"

    monkeypatch.setattr(autotune, "device_arch", lambda: "sm_90")
    monkeypatch.setattr(tile.compiler, "toolchain", Found)
    monkeypatch.setattr(autotune, "_ENVIRONMENTS", {})
    first = autotune.environment()
    assert first == {"arch": "sm_90", "tileiras": "13.1"}
    first["arch"] = "changed by a caller"  # a copy: the remembered one stays
    for _ in range(5):
        assert autotune.environment() == {"arch": "sm_90", "tileiras": "13.1"}
    assert probes == ["tileiras"]
    monkeypatch.setenv("PATH", "/elsewhere")
    assert autotune.environment() == {"arch": "sm_90", "tileiras": "13.2"}
    assert len(probes) == 2


def test_recall_answers_what_choose_chose_and_nothing_when_tuning_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Autotuner.recall` (the families' per-call fast path) finds a choice only under the stand-in key `choose` kept
    it under, and never while `choose` would return the default. Seen to catch: recall ignoring ``TILE_AUTOTUNE=0``
    (it answered the tuned config), and `choose` keeping the stand-in for a chain's untuned default."""
    gpu = FakeGPU({16: 3.0, 32: 1.0, 64: 2.0, 128: 2.0})
    tuner = _tuner(tmp_path, gpu)
    assert tuner.recall(("k", 1)) is None
    seen: list[Config] = []

    def inside(out: Any) -> Any:
        seen.append(tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run, recall=("k", 1)))
        return aio.value(out)

    aio.value(0).then(inside).sync()
    assert seen == [CONFIGS[3]]
    assert tuner.recall(("k", 1)) is None  # the chain's default was not kept
    assert tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run, recall=("k", 1)) == CONFIGS[1]
    assert tuner.recall(("k", 1)) == CONFIGS[1]
    assert tuner.recall(("k", 2)) is None
    timed = gpu.timed
    monkeypatch.setenv("TILE_AUTOTUNE", "0")
    assert tuner.recall(("k", 1)) is None
    assert tuner.choose(KEY, CONFIGS, CONFIGS[3], gpu.run, recall=("k", 1)) == CONFIGS[3]
    monkeypatch.delenv("TILE_AUTOTUNE")
    assert tuner.recall(("k", 1)) == CONFIGS[1]
    assert gpu.timed == timed
    assert _tuner(tmp_path, None).recall(("k", 1)) is None  # no timer: choose returns the default


def test_a_remembered_matmul_choice_skips_the_key_and_the_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first call of a shape, matmul finds its tuned config by the call's raw parameters: no JSON key, no
    candidate list, no default (about 100 µs of host time per eager decode matmul before). A new shape, dtype or
    epilogue is a new stand-in key. Seen to catch: a stand-in key without the epilogue (the residual call took the
    plain call's config without asking its tuner)."""
    tuner = Autotuner("matmul", source="s", timer=lambda fn: 1.0, cache_dir=tmp_path)
    built: list[tuple[int, int]] = []
    real = _gemm_configs.decode_candidates

    def counting(m: int, n: int) -> Any:
        built.append((m, n))
        return real(m, n)

    monkeypatch.setattr(_gemm_configs, "decode_candidates", counting)
    old = autotune.set_tuner("matmul", tuner)
    try:
        rng = np.random.default_rng(1)
        a, b = rng.standard_normal((2, 40)).astype(np.float32), rng.standard_normal((40, 24)).astype(np.float32)
        for _ in range(3):
            z = tk.matmul(a, b)
        assert built == [(2, 24)]
        np.testing.assert_allclose(z.to_numpy(), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        tk.matmul(a, b, residual=np.ones((2, 24), np.float32))
        tk.matmul(a[:1], b)
        assert built == [(2, 24), (2, 24), (1, 24)]
    finally:
        autotune.set_tuner("matmul", old)
    assert tuner.tuned == 3
    assert autotune.environment_items() == tuple(sorted(autotune.environment().items()))
    assert Config.of(BM=2).get("BM", 0) == 2
    assert Config.of(BM=2).get("BN", 7) == 7
