"""Decode GEMM (M = 1, 16) at Qwen3's projection shapes: Tile against torch (cuBLAS ``x @ w.T``), in GB/s of weight
read and as a fraction of the device-to-device copy bandwidth measured in the same run (used by bench_kernels.py,
``--only=gemv``, or ``--only=gemv-4b`` / ``--only=gemv-32b`` for one model: each shape tunes on its first call).

How it is timed: a model's decode step reads every weight once, from HBM, with no host wait between launches. So
each contender runs CHAIN launches back to back captured in one graph (Tile: a ``.then()`` chain of `tk.matmul_op`
captured with ``.graph()``; torch: ``torch.cuda.CUDAGraph``), rotating over weight copies that together outgrow the L2
cache, and a sample is one replay and its wait (wall clock, the same for both; the wait is amortised over CHAIN
launches). The copy peer is ``dst.copy_(src)`` of 1 GiB, counted as read + write bytes, as the roofline counts it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk

L2_SPAN = 192 << 20  # bytes of weight copies a chain rotates over: several times any GPU's L2

# (hidden, q heads, kv heads, intermediate) of the models; head dim 128, vocab 151936.
MODELS = {"4b": (2560, 32, 8, 9728), "32b": (5120, 64, 8, 25600)}
VOCAB = 151936


def projections(model: str, smoke: bool) -> dict[str, tuple[int, int]]:
    """(N, K) of the model's decode projections: fused q/k/v, o, fused gate/up, down, lm_head (f32 logits)."""
    if smoke:
        return {"qkv": (96, 64), "lm_head": (200, 64)}
    hidden, heads, kv, inter = MODELS[model]
    q = 128 * heads
    return {
        "qkv": (q + 2 * 128 * kv, hidden),
        "o": (hidden, q),
        "gate_up": (2 * inter, hidden),
        "down": (hidden, inter),
        "lm_head": (VOCAB, hidden),
    }


def median_seconds(run: Callable[[], None], rounds: int) -> float:
    run()  # warm-up (the first replay uploads the graph)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def copy_bandwidth(torch: Any, rounds: int) -> float:
    """Bytes per second of a device-to-device copy of 1 GiB, counting the read and the write."""
    src = torch.empty(1 << 29, device="cuda", dtype=torch.float16)
    dst = torch.empty_like(src)

    def run() -> None:
        for _ in range(10):
            dst.copy_(src)
        torch.cuda.synchronize()

    return float(10 * 2 * src.numel() * 2 / median_seconds(run, rounds))


def bench(torch: Any, m: int, n: int, k: int, *, f32_out: bool, chain: int, rounds: int, copy: float) -> dict[str, Any]:
    """One shape: Tile (tuned) and torch, CHAIN launches a sample; ms per launch, GB/s, fraction of the copy."""
    weight_bytes = 2 * n * k
    copies = max(1, min(chain, -(-L2_SPAN // weight_bytes)))
    out_dtype = tile.f32 if f32_out else tile.bf16
    if torch is None:  # the interpreter (--smoke): Tile alone, tiny shapes
        rng = np.random.default_rng(0)
        ws = [tile.from_numpy(rng.standard_normal((n, k)).astype(np.float32)) for _ in range(copies)]
        x = tile.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
        tws: list[Any] = []
    else:
        tws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5 for _ in range(copies)]
        tx = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ws, x = [tile.from_dlpack(w) for w in tws], tile.from_dlpack(tx)
    got = tk.matmul(x, ws[0].T, out_dtype=out_dtype)  # tunes the shape (first call) and is checked below
    times = {"tile": median_seconds(tile_graph(x, ws, chain, out_dtype=out_dtype), rounds) / chain}
    if torch is not None:
        want = (tx @ tws[0].T).float()
        err = float((torch.from_dlpack(got).float() - want).abs().max()) / max(float(want.abs().max()), 1e-30)
        if err > 2e-2:
            raise AssertionError(f"Tile and cuBLAS differ by {err:.2e} of the output's range")
        times["torch"] = median_seconds(torch_graph(torch, tx, tws, f32_out, chain), rounds) / chain
    gbs = {name: weight_bytes / t / 1e9 for name, t in times.items()}
    entry: dict[str, Any] = {"shape": [m, n, k], "weight_copies": copies, "chain": chain}
    entry |= {"ms": {name: t * 1e3 for name, t in times.items()}, "GB_per_s_weight": gbs}
    entry["tile_vs"] = {name: times["tile"] / t for name, t in times.items() if name != "tile"}
    if copy:
        entry["copy_GB_per_s"] = copy / 1e9
        entry["fraction_of_copy_bandwidth"] = {name: g * 1e9 / copy for name, g in gbs.items()}
    entry["config"] = _chosen(m, n, k, out_dtype)
    return entry


def tile_graph(x: tile.Tensor, ws: list[tile.Tensor], chain: int, **matmul: Any) -> Callable[[], None]:
    """One replay (and its wait) of ``chain`` `tk.matmul_op` launches rotating over the weight copies ``ws``
    (``matmul``: the op's keywords, e.g. ``out_dtype=`` or ``config=``)."""

    def step(i: int) -> Callable[[object], Any]:
        return lambda _: tk.matmul_op(x, ws[i % len(ws)].T, **matmul)

    op = tk.matmul_op(x, ws[0].T, **matmul)
    for i in range(1, chain):
        op = op.then(step(i))
    graph = op.graph()

    def run() -> None:
        graph.launch().sync()

    return run


def torch_graph(torch: Any, x: Any, ws: list[Any], f32_out: bool, chain: int) -> Callable[[], None]:
    outs = [torch.empty(x.shape[0], w.shape[0], device="cuda", dtype=torch.bfloat16) for w in ws]
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):  # cuBLAS picks its kernel (and workspace) outside the capture
        for w, o in zip(ws, outs, strict=True):
            torch.matmul(x, w.T, out=o)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(chain):
            if f32_out:  # the f32 logits: cuBLAS writes bf16, torch casts (as a torch model's lm_head in f32 would)
                torch.matmul(x, ws[i % len(ws)].T, out=outs[i % len(ws)]).float()
            else:
                torch.matmul(x, ws[i % len(ws)].T, out=outs[i % len(ws)])

    def run() -> None:
        graph.replay()
        torch.cuda.synchronize()

    return run


def _chosen(m: int, n: int, k: int, out_dtype: Any) -> str:
    """The config the autotuner remembers for this shape (the default when it did not tune)."""
    remembered = tk.autotune.tuner("matmul", "").remembered()
    wanted = (
        f'"k": {tk.autotune.fine_bucket(k)}, "m": {m}, "n": {tk.autotune.fine_bucket(n)}, "out": "{out_dtype.name}"'
    )
    found = [str(c) for key, c in remembered.items() if wanted in key]
    from tile.kernels import _gemm_configs

    return found[0] if found else f"default: {_gemm_configs.default(m, n, k)}"
