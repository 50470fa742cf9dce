"""Interpreter speed: tile.ir.interp on a vector add (2**20 f32), a 512^3 f16 GEMM and a 1024x1024 softmax.

Target: each under 2 s on a 2-core CPU box, with the race and token-order checks on (the defaults). Kernels are
built with tile.ir's builder in cuTile Python's calling convention; each is checked against numpy before timing.
Writes benchmarks/results/interp.json. Run: python benchmarks/bench_interp.py
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from tile.ir import interp

# The kernels are the interpreter tests' own builders (packages/tile-ir/tests), so the benchmark times exactly
# what the tests check.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "tile-ir" / "tests"))
from helpers_ir_interp_kernels import (  # type: ignore[import-not-found]  # found through sys.path above
    args_for,
    gemm_kernel,
    softmax_kernel,
    vadd_kernel,
)

TARGET_S = 2.0


def _time(run: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {}

    n = 1 << 20
    x, y, z = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.zeros(n, np.float32)
    k_add = vadd_kernel(1024)
    results["add_2^20"] = _time(lambda: interp.launch(k_add, n // 1024, args_for(x, y, z)))
    assert np.array_equal(z, x + y)

    a = rng.standard_normal((512, 512)).astype(np.float16)
    bm = rng.standard_normal((512, 512)).astype(np.float16)
    c = np.zeros((512, 512), np.float32)
    k_gemm = gemm_kernel(64, 64, 32)
    results["gemm_512^3"] = _time(lambda: interp.launch(k_gemm, (8, 8), args_for(a, bm, c)))
    np.testing.assert_allclose(c, a.astype(np.float64) @ bm.astype(np.float64), rtol=1e-4, atol=1e-3)

    sx = rng.standard_normal((1024, 1024)).astype(np.float32)
    sy = np.zeros_like(sx)
    k_soft = softmax_kernel(1024)
    results["softmax_1024x1024"] = _time(lambda: interp.launch(k_soft, 1024, args_for(sx, sy)))
    ref = np.exp(sx - sx.max(axis=1, keepdims=True))
    np.testing.assert_allclose(sy, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)

    for name, seconds in results.items():
        verdict = "ok" if seconds < TARGET_S else "OVER TARGET"
        print(f"{name:20s} {seconds:7.3f} s  ({seconds / TARGET_S:5.2f} x the {TARGET_S:.0f} s target) {verdict}")
    report = {
        "benchmark": "interp",
        "seconds": results,
        "target_seconds": TARGET_S,
        "checks": {"races": True, "token_order": True},
        "kernels": {
            "add_2^20": "f32 vector add, 1024-element tiles, grid 1024",
            "gemm_512^3": "f16 x f16 -> f32, 64x64x32 tiles, grid 8x8, for loop over K",
            "softmax_1024x1024": "f32, one 1x1024 row tile per block, grid 1024",
        },
        "device": f"CPU: {platform.processor() or platform.machine()} ({os.cpu_count()} cores)",
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__},
    }
    out = Path(__file__).parent / "results" / "interp.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
