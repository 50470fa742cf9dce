"""Qwen3 batch-1 decode tokens/s against context length: ``bench_qwen3.py --contexts 128,512,...``.

For each context length the KV cache is filled to that length by prefill in chunks of ``--prefill-chunk`` tokens
(`fill`; one chunk size, so the prefill shapes are tuned once, and a few launches per chunk instead of one decode step
per cached token), then ``--tokens`` greedy steps of the captured decode graph are timed (`DecodeGraph.greedy`, as
``tile_graph`` in the one-length rows). Each length gets its own `Qwen3` with ``max_seq`` = context + tokens + 4
(rounded up to a power of two, as the one-length rows size it), so its decode attention is split for that cache.

Beside each point: the weight-streaming roofline at that length, (weight bytes + KV bytes read per token) / the D2D
copy bandwidth (`roofline_s`; the KV term grows with the context), and, where asked for and installed, the peers at
the same lengths: the plain-torch model (``torch_eager``; one model, its cache refilled per length) and transformers
(``transformers_eager``, with ``--peers all`` also ``transformers_compiled``; one model, a fresh cache per length, see
`qwen3_hf.hf_series`).

The result is one row of mode ``"context"`` (``points``: one dict per length), merged into
``benchmarks/results/qwen3.json`` like the other rows; ``benchmarks/plot_qwen3.py`` draws it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from qwen3_hf import decode_rate, hf_series
from qwen3_weights import SeededWeights

from tile.kernels.qwen3 import DecodeGraph, Qwen3, Qwen3Config, config_for

__all__ = ["bench_contexts", "commit", "fill", "kv_bytes_per_token", "parse_contexts", "prompt_for", "roofline_s"]

ROOT = Path(__file__).resolve().parent.parent


def kv_bytes_per_token(c: Qwen3Config, context: int, tokens: int) -> int:
    """Bytes of K and V one decode step reads, averaged over ``tokens`` steps after a ``context``-token prompt (bf16,
    every layer: the cache holds ``context + tokens // 2`` positions at the middle step)."""
    return 2 * c.num_hidden_layers * c.kv_size * 2 * (context + tokens // 2)


def roofline_s(weight_bytes: int, kv_bytes: int, bandwidth: float) -> float:
    """Seconds per token of the weight-streaming roofline (every weight and cached K/V byte read once at
    ``bandwidth`` bytes/s), or 0.0 without a bandwidth (the CPU interpreter)."""
    return (weight_bytes + kv_bytes) / bandwidth if bandwidth > 0 else 0.0


def prompt_for(c: Qwen3Config, context: int) -> list[int]:
    """The seeded ``context``-token prompt (the one-length rows' prompt is its prefix of 512)."""
    return [int(i) for i in np.random.default_rng(0).integers(0, c.vocab_size, context)]


def parse_contexts(text: str) -> list[int]:
    """``"128,512,1024"`` as sorted distinct positive ints; `SystemExit` saying what is wrong otherwise."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--contexts {text!r}: give comma-separated token counts, e.g. 128,512,1024") from None
    if not values or min(values) < 1:
        raise SystemExit(f"--contexts {text!r}: every context length must be a positive token count")
    return sorted(set(values))


def commit() -> str | None:
    """The short hash of the checked-out commit, with ``-dirty`` for uncommitted changes; None outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "-uno"], cwd=ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def fill(forward: Callable[[list[int]], Any], prompt: Sequence[int], chunk: int) -> int:
    """Run ``prompt`` through ``forward`` (a model's multi-token pass, appending to its cache) in chunks of at most
    ``chunk`` tokens; return the greedy id after it."""
    if chunk < 1:
        raise ValueError(f"prefill chunk must be >= 1, got {chunk}")
    if not prompt:
        raise ValueError("an empty prompt fills nothing")
    logits: Any = None
    for start in range(0, len(prompt), chunk):
        logits = forward(list(prompt[start : start + chunk]))
    return int(logits.argmax())  # numpy (Tile) or torch logits of the last token


def tile_point(
    c: Qwen3Config, w: Any, context: int, *, tokens: int, chunk: int, bandwidth: float, decode_attention: str
) -> dict[str, Any]:
    """One length's Tile point: a model sized for it, its cache filled by chunked prefill, the graph decode timed."""
    model = Qwen3(c, w, max_seq=context + tokens + 4, decode_attention=decode_attention)
    first = fill(model.forward, prompt_for(c, context), chunk)
    assert model.length == context
    kv = kv_bytes_per_token(c, context, tokens)
    floor = roofline_s(model.weight_bytes(), kv, bandwidth)
    with DecodeGraph(model) as graph:
        sec = decode_rate(graph.greedy, first, tokens, lambda: None)
    point: dict[str, Any] = {"context": context, "max_seq": model.max_seq, "kv_bytes_per_token": kv}
    point["roofline_tokens_per_s"] = 1 / floor if floor else None
    point["tile_graph"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    share = f" ({floor / sec:.3f} of the roofline)" if floor else ""
    print(f"{c.name} context {context}: tile_graph {1 / sec:.1f} tok/s{share}", flush=True)
    return point


def bench_contexts(
    name: str,
    contexts: Sequence[int],
    *,
    tokens: int,
    chunk: int,
    bandwidth: float,
    decode_attention: str,
    peers: Callable[[Qwen3Config, Any, list[dict[str, Any]]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``"context"`` row of model ``name``: a Tile point per length (`tile_point`), then, when given,
    ``peers(c, w, points)``, which adds the peers' entries to each point and returns keys for the row (a skip's
    reason)."""
    c = config_for(name)
    w = SeededWeights(c, seed=0)
    row: dict[str, Any] = {"model": name, "mode": "context", "tokens": tokens, "prefill_chunk": chunk}
    row |= {"weight_bytes": 2 * c.num_parameters(), "decode_attention": decode_attention, "commit": commit()}
    row["points"] = [
        tile_point(c, w, n, tokens=tokens, chunk=chunk, bandwidth=bandwidth, decode_attention=decode_attention)
        for n in contexts
    ]
    if peers is not None:
        row |= peers(c, w, row["points"])
    return row


def torch_series(
    torch: Any, model: Any, c: Qwen3Config, points: list[dict[str, Any]], *, tokens: int, chunk: int
) -> None:
    """Add ``torch_eager`` to each point: the plain-torch ``model`` (a `qwen3_torch.TorchQwen3` whose cache holds the
    longest length) refilled to the point's length by chunked prefill, then timed like Tile."""
    with torch.no_grad():
        for p in points:
            model.length = 0
            first = fill(model.forward, prompt_for(c, p["context"]), chunk)
            sec = decode_rate(lambda tok: int(model.forward([tok]).argmax()), first, tokens, torch.cuda.synchronize)
            p["torch_eager"] = {"tokens_per_s": 1 / sec, "roofline_fraction": _fraction(p, sec)}


def hf_points(
    torch: Any, c: Qwen3Config, w: Any, points: list[dict[str, Any]], *, tokens: int, limit_s: int, compiled: bool
) -> None:
    """Add ``transformers_eager`` and ``transformers_compiled`` (rows or skips, `qwen3_hf.hf_series`) to each point."""
    floors = [1 / p["roofline_tokens_per_s"] if p["roofline_tokens_per_s"] else 0.0 for p in points]
    prompts = [prompt_for(c, p["context"]) for p in points]
    got = hf_series(torch, c=c, w=w, prompts=prompts, tokens=tokens, limit_s=limit_s, floors=floors, compiled=compiled)
    for point, rows in zip(points, got, strict=True):
        point.update(rows)


def _fraction(point: dict[str, Any], sec: float) -> float:
    rate = point["roofline_tokens_per_s"]
    return 1 / (rate * sec) if rate else 0.0
