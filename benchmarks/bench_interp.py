"""Interpreter speed: tile.ir.interp on a vector add (2**20 f32), a 512^3 f16 GEMM and a 1024x1024 softmax.

Target: each under 2 s on a 2-core CPU box, with the race and token-order checks on (the defaults). Kernels are
built with tile.ir's builder in cuTile Python's calling convention; each is checked against numpy before timing.
Writes benchmarks/results/interp.json. Run: python benchmarks/bench_interp.py
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from tile.ir import (
    Builder,
    FloatAttr,
    Function,
    FunctionType,
    Module,
    Padding,
    PartitionViewType,
    ScalarType,
    TensorViewType,
    Value,
    f16,
    f32,
    i32,
    interp,
    ptr,
    scalar,
    tile,
)

I32 = scalar(i32)
TARGET_S = 2.0


def _entry(name: str, arrays: Sequence[tuple[ScalarType, int]]) -> tuple[Function, Builder, list[Value]]:
    types: list[Any] = []
    for elem, rank in arrays:
        types += [scalar(ptr(elem))] + [I32] * (2 * rank)
    fn = Function(name, FunctionType(tuple(types)))
    b = Builder(fn.body)
    views, k = [], 0
    for elem, rank in arrays:
        p = fn.params[k : k + 1 + 2 * rank]
        k += 1 + 2 * rank
        tv = TensorViewType(elem, (None,) * rank, (None,) * rank)
        views.append(b.call("make_tensor_view", p[0], p[1 : 1 + rank], p[1 + rank :], result_type=tv).results[0])
    return fn, b, views


def _part(b: Builder, tv: Value, shape: tuple[int, ...], padding: Padding | None = None) -> Value:
    t = tv.type
    assert isinstance(t, TensorViewType)
    return b.make_partition_view(tv, result_type=PartitionViewType(shape, t, tuple(range(len(shape))), padding))


def _args(*arrays: Any) -> list[Any]:
    return [v for a in arrays for v in (a, *a.shape, *(s // a.itemsize for s in a.strides))]


def vadd(t: int) -> Module:
    fn, b, (x, y, z) = _entry("vadd", [(f32, 1)] * 3)
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    tx, _ = b.load_view_tko(_part(b, x, (t,)), [bx], tok)
    ty, _ = b.load_view_tko(_part(b, y, (t,)), [bx], tok)
    b.call("store_view_tko", b.addf(tx, ty), _part(b, z, (t,)), [bx], tok)
    b.return_()
    return Module([fn])


def gemm(tm: int, tn: int, tk: int) -> Module:
    fn, b, (av, bv, cv) = _entry("gemm", [(f16, 2), (f16, 2), (f32, 2)])
    tok = b.make_token()
    bx, by, _ = b.get_tile_block_id()
    pa, pb = _part(b, av, (tm, tk), Padding.ZERO), _part(b, bv, (tk, tn), Padding.ZERO)
    _, nk = b.get_index_space_shape(pa, [I32, I32])
    with b.for_(b.constant(0, I32), nk, b.constant(1, I32), [b.constant(0.0, tile((tm, tn), f32))]) as loop:
        ta, _ = b.load_view_tko(pa, [bx, loop.iv], tok)
        tb, _ = b.load_view_tko(pb, [loop.iv, by], tok)
        b.continue_([b.mmaf(ta, tb, loop.args[0])])
    b.call("store_view_tko", loop.results[0], _part(b, cv, (tm, tn)), [bx, by], tok)
    b.return_()
    return Module([fn])


def softmax(tn: int) -> Module:
    fn, b, (xv, yv) = _entry("softmax", [(f32, 2), (f32, 2)])
    tok = b.make_token()
    row, _, _ = b.get_tile_block_id()
    zero = b.constant(0, I32)
    t, _ = b.load_view_tko(_part(b, xv, (1, tn), Padding.NEG_INF), [row, zero], tok)

    def reduce(x: Value, combine: str, identity: float) -> Value:
        with b.reduce([x], 1, [FloatAttr.of(f32, identity)]) as red:
            b.yield_([getattr(b, combine)(*red.args)])
        return b.broadcast(b.reshape(red.results[0], result_type=tile((1, 1), f32)), result_type=x.type)

    e = b.exp(b.subf(t, reduce(t, "maxf", float("-inf"))))
    b.call("store_view_tko", b.divf(e, reduce(e, "addf", 0.0)), _part(b, yv, (1, tn)), [row, zero], tok)
    b.return_()
    return Module([fn])


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
    k_add = vadd(1024)
    results["add_2^20"] = _time(lambda: interp.launch(k_add, n // 1024, _args(x, y, z)))
    assert np.array_equal(z, x + y)

    a = rng.standard_normal((512, 512)).astype(np.float16)
    bm = rng.standard_normal((512, 512)).astype(np.float16)
    c = np.zeros((512, 512), np.float32)
    k_gemm = gemm(64, 64, 32)
    results["gemm_512^3"] = _time(lambda: interp.launch(k_gemm, (8, 8), _args(a, bm, c)))
    np.testing.assert_allclose(c, a.astype(np.float64) @ bm.astype(np.float64), rtol=1e-4, atol=1e-3)

    sx = rng.standard_normal((1024, 1024)).astype(np.float32)
    sy = np.zeros_like(sx)
    k_soft = softmax(1024)
    results["softmax_1024x1024"] = _time(lambda: interp.launch(k_soft, 1024, _args(sx, sy)))
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
