"""Qwen3 prefill on Tile against cuBLAS on the same GEMMs (``bench_qwen3.py --prefill``).

FLOPs are counted from the config (`prefill_flops`): the GEMMs of every layer (the fused q/k/v, output, fused
gate/up and down projections, ``2 * M * N * K`` each; the model runs exactly these shapes) and causal attention
(token ``t`` at position ``t`` scores ``t + 1`` keys: ``QK^T`` and ``PV`` are ``2 * head_dim * (t + 1)`` each per
query head, summed over the prompt, so the masked half of the square is not counted). The LM head of the last row
(what `Qwen3.forward` computes for a prompt) is counted apart and left out of the rates; norms, RoPE and SwiGLU are
not counted.

Timed, on one ``--prefill-tokens`` prompt (default 2048):

- ``tile_prefill``: `Qwen3.forward` (eager: the chain enqueued launch by launch, the last row's logits read back),
  median of three after a first call that compiles and tunes;
- ``tile_prefill_graph``: the same pass (`Qwen3.steps`) captured once as a graph and replayed (the device time
  without the host's enqueueing);
- ``tile_gemm_graph``: only the model's GEMMs (`tk.matmul_op` on every layer's fused weights), captured and replayed;
- ``cublas_gemm``: the same GEMMs with ``torch.matmul`` (each layer its own weights when two copies fit the GPU).

Ratios: ``prefill_vs_cublas`` = Tile prefill FLOP rate (GEMM + attention FLOPs over the eager time) / cuBLAS FLOP
rate on the GEMMs (the issue's metric), ``prefill_graph_vs_cublas`` the same with the replay time, and
``gemm_only_vs_cublas`` = cuBLAS time / Tile's GEMM-only replay time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.kernels.qwen3 import Qwen3, Qwen3Config
from tile.kernels.qwen3._chain import Chain

__all__ = ["bench_prefill", "gemm_shapes", "prefill_flops"]


def gemm_shapes(c: Qwen3Config) -> list[tuple[int, int]]:
    """``(N, K)`` of one layer's GEMMs as the model runs them (``x (M, K) @ W.T``, ``W (N, K)``)."""
    h, i = c.hidden_size, c.intermediate_size
    return [(c.q_size + 2 * c.kv_size, h), (h, c.q_size), (2 * i, h), (h, i)]


def prefill_flops(c: Qwen3Config, tokens: int) -> dict[str, int]:
    """FLOPs of a ``tokens``-token prefill from position 0: ``gemm`` (all layers), ``attention`` (causal, all
    layers) and ``lm_head`` (the last row's logits; not in the rates)."""
    gemm = sum(2 * tokens * n * k for n, k in gemm_shapes(c)) * c.num_hidden_layers
    attention = 2 * c.num_attention_heads * c.head_dim * tokens * (tokens + 1) * c.num_hidden_layers
    return {"gemm": gemm, "attention": attention, "lm_head": 2 * c.hidden_size * c.vocab_size}


def _median(run: Callable[[], None], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _replay_seconds(op: Any, reps: int) -> float:
    """Median seconds of one replay (with its wait) of ``op`` captured as a graph; the graph is closed after."""
    with op.graph() as graph:
        graph.launch().sync()
        return _median(lambda: graph.launch().sync(), reps)


def tile_prefill_graph(model: Qwen3, prompt: list[int], reps: int) -> float:
    """Seconds of one replay of the ``len(prompt)``-token pass (no LM head) captured as a graph; the model keeps its
    caches (handed back when the graph closes)."""
    n = len(prompt)
    inputs = tile.from_numpy(np.array([*prompt, 0], dtype=np.int32))
    chain = Chain()
    op = chain.build(model.steps(inputs, n, head=False, start=0))
    model.graphed = True
    try:
        return _replay_seconds(op, reps)
    finally:
        model.adopt_caches(chain)
        model.graphed = False


def tile_gemm_graph(model: Qwen3, tokens: int, reps: int) -> float:
    """Seconds of one replay of the model's GEMMs alone (every layer's four, on zero activations)."""
    c = model.config
    xs = {k: tile.zeros(tile.bf16, [tokens, k]) for k in {k for _, k in gemm_shapes(c)}}
    ws = [w for layer in model.layers for w in (layer.wqkv, layer.wo, layer.wgu, layer.wd)]
    for w in ws[:4]:  # choose each shape's config now (an op made during a capture must not tune)
        tk.matmul(xs[w.shape[1]], w.T)

    def step(w: tile.Tensor) -> Callable[[object], Any]:
        return lambda _: tk.matmul_op(xs[w.shape[1]], w.T)

    op = tk.matmul_op(xs[ws[0].shape[1]], ws[0].T)
    for w in ws[1:]:
        op = op.then(step(w))
    return _replay_seconds(op, reps)


def cublas_gemm(torch: Any, c: Qwen3Config, tokens: int, distinct: bool, reps: int) -> float:
    """Median seconds of the model's GEMMs with ``torch.matmul`` (CUDA events; after one warm-up pass), each layer
    its own random weights when ``distinct`` (else one layer's, reused)."""
    bf16 = torch.bfloat16
    layers = c.num_hidden_layers if distinct else 1
    ws = [[torch.randn(n, k, dtype=bf16, device="cuda") for n, k in gemm_shapes(c)] for _ in range(layers)]
    xs = {k: torch.randn(tokens, k, dtype=bf16, device="cuda") for _, k in gemm_shapes(c)}
    outs = {n: torch.empty(tokens, n, dtype=bf16, device="cuda") for n, _ in gemm_shapes(c)}

    def one_pass() -> None:
        for i in range(c.num_hidden_layers):
            for w in ws[i % layers]:
                torch.matmul(xs[w.shape[1]], w.T, out=outs[w.shape[0]])

    one_pass()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        one_pass()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return float(np.median(times))


def bench_prefill(c: Qwen3Config, weights: Any, tokens: int, torch: Any, reps: int = 3) -> dict[str, Any]:
    """The prefill row of ``c`` (see the module docstring); without ``torch`` (the CPU interpreter) only Tile's
    eager and graph times (no cuBLAS, no ratios)."""
    flops = prefill_flops(c, tokens)
    row: dict[str, Any] = {"model": c.name, "mode": "prefill", "tokens": tokens, "flops": flops}
    row["flops_counted"] = "gemm + causal attention (QK^T, PV); lm_head of the last row, norms, RoPE, SwiGLU excluded"
    start = time.perf_counter()
    model = Qwen3(c, weights, max_seq=tokens)
    row["build_s"] = time.perf_counter() - start
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, tokens).tolist()
    start = time.perf_counter()
    model.forward(prompt)
    row["tile_first_call_s"] = time.perf_counter() - start  # compiles and tunes

    def eager() -> None:
        model.reset()
        model.forward(prompt)

    work = flops["gemm"] + flops["attention"]
    sec = _median(eager, reps)
    row["tile_prefill"] = {"s": sec, "tflops": work / sec / 1e12}
    sec_graph: float | None = None
    try:
        sec_graph = tile_prefill_graph(model, prompt, reps)
        row["tile_prefill_graph"] = {"s": sec_graph, "tflops": work / sec_graph / 1e12}
    except Exception as exc:  # reported, not fatal: the eager row and the GEMM rows still stand
        row["tile_prefill_graph"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    sec_gemm = tile_gemm_graph(model, tokens, reps)
    row["tile_gemm_graph"] = {"s": sec_gemm, "tflops": flops["gemm"] / sec_gemm / 1e12}
    if torch is not None:
        need = 2 * c.num_hidden_layers * sum(n * k for n, k in gemm_shapes(c))  # bf16 weights of all layers
        distinct = need < 0.8 * torch.cuda.mem_get_info()[0]
        sec_cublas = cublas_gemm(torch, c, tokens, distinct, reps)
        torch.cuda.empty_cache()  # its weights are freed on return
        row["cublas_gemm"] = {"s": sec_cublas, "tflops": flops["gemm"] / sec_cublas / 1e12}
        row["cublas_weights"] = "each layer its own" if distinct else "one layer's, reused (two copies do not fit)"
        cublas_rate = flops["gemm"] / sec_cublas
        row["prefill_vs_cublas"] = work / sec / cublas_rate
        if sec_graph is not None:
            row["prefill_graph_vs_cublas"] = work / sec_graph / cublas_rate
        row["gemm_only_vs_cublas"] = sec_cublas / sec_gemm
    return row
