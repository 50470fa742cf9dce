"""``bench_qwen3.py --pdl both``: the graph decode of one model with and without programmatic dependent launch, A/B.

The same model (weights, KV cache, tuned configs) decodes the same positions from the same token in interleaved
rounds, the order alternating (off/on, then on/off, ...), each round capturing a fresh `DecodeGraph` with
``model.pdl`` set (the PDL kernels compile on the first capture, outside the timed steps) and timing ``tokens``
greedy steps after two warm-up steps. Each mode's row is the median round: tokens/s and the fraction of the
weight-streaming roofline; ``pdl_speedup`` is off's median time over on's, and ``pdl_same_tokens`` says whether every
round of both modes decoded the same greedy tokens (PDL must not change results).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tile.kernels.qwen3 import DecodeGraph, Qwen3


def timed_greedy(graph: DecodeGraph, first: int, tokens: int) -> tuple[float, list[int]]:
    """Seconds per greedy step of ``graph`` over ``tokens`` steps after two warm-up steps, and the tokens decoded."""
    token = graph.greedy(graph.greedy(first))
    out: list[int] = []
    start = time.perf_counter()
    for _ in range(tokens):
        token = graph.greedy(token)
        out.append(token)
    return (time.perf_counter() - start) / tokens, out


def pdl_ab(model: Qwen3, first: int, *, after_prompt: int, tokens: int, floor: float, rounds: int) -> dict[str, Any]:
    """The A/B rows (see the module docstring); ``model.pdl`` is restored after."""
    if rounds < 1:
        raise SystemExit(f"--pdl-rounds {rounds}: give at least one round")
    secs: dict[bool, list[float]] = {False: [], True: []}
    decoded: list[list[int]] = []
    was = model.pdl
    try:
        for r in range(rounds):
            for pdl in (False, True) if r % 2 == 0 else (True, False):
                model.pdl, model.length = pdl, after_prompt
                with DecodeGraph(model) as graph:
                    sec, seq = timed_greedy(graph, first, tokens)
                secs[pdl].append(sec)
                decoded.append(seq)
    finally:
        model.pdl, model.length = was, after_prompt
    row: dict[str, Any] = {}
    for pdl, name in ((False, "tile_graph_pdl_off"), (True, "tile_graph_pdl_on")):
        sec = float(np.median(secs[pdl]))
        row[name] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec, "rounds_s": secs[pdl]}
    row["pdl_speedup"] = float(np.median(secs[False]) / np.median(secs[True]))
    row["pdl_same_tokens"] = all(seq == decoded[0] for seq in decoded)
    return row
