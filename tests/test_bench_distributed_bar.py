"""``benchmarks/bench_distributed.py``'s verdict on issue 19's bar: at 1 GiB the all-reduce through Tile tensors
reaches at least 0.95 of torch's bus bandwidth in the same run; other sizes get no verdict."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_distributed as bench  # noqa: E402 - benchmarks/, put on the path above


def _row(nbytes: int, ratio: float) -> dict[str, object]:
    return {"dtype": "bf16", "bytes": nbytes, "tile_vs_torch": ratio}


def test_the_1_gib_rows_pass_at_095_of_torch_and_fail_below() -> None:
    assert bench.bar(_row(1 << 30, 0.96)) == {
        "bar": "tile busbw >= 0.95 x torch at 1 GiB",
        "dtype": "bf16",
        "ratio": 0.96,
        "pass": True,
    }
    verdict = bench.bar(_row(1 << 30, 0.9499))
    assert verdict is not None
    assert verdict["pass"] is False
    assert bench.bar(_row(1 << 30, 0.95)) == {**verdict, "ratio": 0.95, "pass": True}


def test_other_sizes_get_no_verdict() -> None:
    assert bench.bar(_row(512 << 20, 0.5)) is None
    assert bench.bar(_row((1 << 30) + 1, 0.99)) is None
