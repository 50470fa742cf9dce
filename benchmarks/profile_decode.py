"""Where a Qwen3 decode step's time goes, op by op: every op kind of the one-token step timed apart, all layers at once.

The op list is the model's own decode step (`Qwen3.steps` of one token with the LM head and the on-device argmax, as
`DecodeGraph` captures it): the embedding, each layer's ops (`FUSED_OPS` with ``--fuse on``, the default, as
``Qwen3(..., fuse=True)`` runs them; `UNFUSED_OPS` with ``--fuse off``; ``--fuse both`` profiles the fused step, then
the unfused one on the same model), then `HEAD_OPS` (final norm, LM head, argmax). The model is built as
``benchmarks/bench_qwen3.py``'s decode rows build it (``max_seq`` = context + tokens + 4, rounded up to a power of two
by `Qwen3`, so the decode attention is the one kernel or split + combine the model picks for that cache,
``--decode-attention`` as there) and tuned for one token (`Qwen3.tune`: the tuner's configs). The KV cache is filled
cheaply with seeded random values (the kernels' time does not depend on them) and the token sits at position
``--context``, so attention reads context + 1 cached positions.

Each op kind is timed as `profile_prefill` times a prefill's: one graph of that op for every layer (each layer's
weights and caches, scratch activations of the step's shapes), replayed ``--inner`` times back to back between two
timing events, the median over ``--reps`` such timings (host time on the CPU interpreter). Its launches are counted
from an eager run (a split-K matmul or a split attention is two). Per op: microseconds per token, share of the sum,
the bytes it must move (weights, the cached K/V it reads, activations in and out; `op_bytes`) and their rate, and
that rate as a fraction of the device-to-device copy bandwidth measured in the same run (`bench_qwen3.copy_bandwidth`;
``--bandwidth`` overrides): the op's fraction of its own roofline.

Then the whole step as one graph (``whole_us``), the sum of the ops (``sum_us``), their difference (``gap_us``), and an
empty kernel chained as many times as the whole step launches, captured and replayed the same way (``empty_us``: the
floor cost of that many launches in a graph on this GPU; each op's ``floor_us`` is its share of it). Last, the greedy
decode through `DecodeGraph.greedy` (``greedy_us``: what ``bench_qwen3.py``'s ``tile_graph`` times, with its
per-token host wait) against the roofline of the whole step's bytes.

Run on the GPU machine from the repository root (about a minute for 4B on an H200)::

    python benchmarks/profile_decode.py --model 4B --context 512 --out decode_profile.json

``--smoke`` runs the tiny config on the CPU interpreter (context 8) to test the script itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_prefill import OPS_UNFUSED as UNFUSED_OPS
from profile_prefill import counting_launches, time_kind, timed_ms
from qwen3_hf import decode_rate
from qwen3_weights import SeededWeights

import tile.frontend as tile
from tile.frontend import Tensor, f32
from tile.kernels.qwen3 import DecodeGraph, Qwen3, Qwen3Config, config_for
from tile.kernels.qwen3._chain import Chain, Step

__all__ = ["FUSED_OPS", "HEAD_OPS", "UNFUSED_OPS", "empty", "main", "op_bytes", "profile"]

FUSED_OPS = (
    "rmsnorm_qkv_proj",
    "prep_qkv",
    "attention",
    "o_proj_residual",
    "rmsnorm_gate_up_swiglu",
    "down_proj_residual",
)
"""One layer's ops in the fused decode step (`Qwen3.steps` order): the RMSNorms in the projections' prologue, SwiGLU
in gate/up's epilogue."""

HEAD_OPS = ("final_norm", "lm_head", "argmax")
"""The ops after the last layer."""


@tile.entry
def empty(x: Tensor[f32, -1]):  # type: ignore[no-untyped-def]
    """No work: a launch's floor cost."""


def op_bytes(c: Qwen3Config, context: int, fused: bool) -> dict[str, float]:
    """``{op: bytes}`` one op must move for one token at position ``context`` (one layer's op; the embedding and the
    head ops once): its weights, the K/V it reads (``context + 1`` positions) and writes, its activations in and out
    (bf16; the logits f32). Scratch it keeps for itself (split partials) is not counted: this is the roofline."""
    h, q, kv, i, hd, v = c.hidden_size, c.q_size, c.kv_size, c.intermediate_size, c.head_dim, c.vocab_size
    qkv, b = q + 2 * kv, 2.0
    out = {
        "embedding": b * 2 * h,  # one row read, written
        "rmsnorm_attn": b * 3 * h,  # x in, h out, the weight
        "qkv_proj": b * (qkv * h + h + qkv),
        "rmsnorm_qkv_proj": b * (qkv * h + 2 * h + qkv),
        "prep_qkv": b * (qkv + q + 2 * kv + 2 * hd) + 4.0 * hd,  # + the q/k norm weights, a cos and a sin row (f32)
        "attention": b * (2 * q + 2 * kv * (context + 1)),
        "o_proj_residual": b * (h * q + q + 2 * h),
        "rmsnorm_mlp": b * 3 * h,
        "gate_up_proj": b * (2 * i * h + h + 2 * i),
        "swiglu": b * 3 * i,
        "rmsnorm_gate_up_swiglu": b * (2 * i * h + 2 * h + i),
        "down_proj_residual": b * (h * i + i + 2 * h),
        "final_norm": b * 3 * h,
        "lm_head": b * (v * h + h) + 4.0 * v,
        "argmax": 4.0 * v + 4,
    }
    names = ("embedding", *(FUSED_OPS if fused else UNFUSED_OPS), *HEAD_OPS)
    return {name: out[name] for name in names}


def fill_caches(model: Qwen3) -> None:
    """Give every layer's K and V cache seeded random bf16 values (one host array uploaded per cache)."""
    shape = model.k_cache[0].shape
    host = np.random.default_rng(1).standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)
    for i in range(len(model.layers)):
        model.k_cache[i], model.v_cache[i] = tile.from_numpy(host), tile.from_numpy(host)


def build(c: Qwen3Config, context: int, tokens: int, decode_attention: str = "auto") -> Qwen3:
    """The model as ``bench_qwen3.py``'s decode rows make it for ``context`` and ``tokens`` (seeded weights, ``max_seq``
    = context + tokens + 4), its caches filled (`fill_caches`)."""
    model = Qwen3(c, SeededWeights(c, seed=0), max_seq=context + tokens + 4, decode_attention=decode_attention)
    fill_caches(model)
    return model


def kinds_of(model: Qwen3, steps: list[Step]) -> dict[str, list[Step]]:
    """The step list of one decode step split by op kind (`op_bytes`' order)."""
    c = model.config
    names = FUSED_OPS if model.fuse else UNFUSED_OPS
    layers = len(names) * c.num_hidden_layers
    if len(steps) != 1 + layers + len(HEAD_OPS):
        raise RuntimeError(
            f"profile_decode: the model made {len(steps)} decode steps, expected 1 + {len(names)} a layer + "
            f"{len(HEAD_OPS)} (fuse={model.fuse}); update the op names to the model's step list"
        )
    kinds: dict[str, list[Step]] = {"embedding": steps[:1]}
    for k, name in enumerate(names):
        kinds[name] = steps[1 + k : 1 + layers : len(names)]
    for k, name in enumerate(HEAD_OPS):
        kinds[name] = [steps[1 + layers + k]]
    return kinds


def empty_chain_ms(launches: int, reps: int, inner: int) -> float:
    """Milliseconds of one replay of a graph of ``launches`` chained launches of `empty` (one block each)."""

    def step(ch: Chain) -> tuple[Any, dict[str, int]]:
        return empty.grid((1,))(ch.take("x")), {"x": 0}

    first = Chain(x=tile.zeros(f32, [1]))
    first.finish(first.build([step]).sync())  # compiles
    ms: float = timed_ms([step] * launches, Chain(x=first.take("x")), reps, inner)
    return ms


def profile(
    model: Qwen3, context: int, *, tokens: int = 32, reps: int = 20, inner: int = 10, bandwidth: float = 0.0
) -> dict[str, Any]:
    """Time every op kind of ``model``'s one-token decode step (fused or not: ``model.fuse``) at position ``context``
    (see the module docstring); the caches must hold ``context + tokens + 2`` positions (`build`)."""
    c, fused = model.config, model.fuse
    model.tune(1)
    inputs = tile.from_numpy(np.array([1, context], dtype=np.int32))  # [token id, its position]
    steps = model.steps(inputs, 1, head=True, argmax=True)
    work = op_bytes(c, context, fused)
    rows = []
    for name, kind in kinds_of(model, steps).items():
        ms, launches = time_kind(model, 1, kind, reps, inner)
        moved = work[name] * len(kind)
        row: dict[str, Any] = {
            "op": name,
            "launches": launches,
            "us": ms * 1e3,
            "bytes": moved,
            "gbps": moved / ms / 1e6,
        }
        rows.append(row)
    whole = Chain()
    with counting_launches() as counted:  # an eager run first: it counts the step's launches
        whole.finish(whole.build(steps).sync())
    model.adopt_caches(whole)
    whole = Chain()
    try:
        whole_us = timed_ms(steps, whole, reps, inner) * 1e3
    finally:
        model.adopt_caches(whole)
    launches = counted[0]
    empty_us = empty_chain_ms(launches, reps, inner) * 1e3
    summed = sum(r["us"] for r in rows)
    total_bytes = sum(r["bytes"] for r in rows)
    for r in rows:
        r["share"] = r["us"] / summed
        r["floor_us"] = empty_us * r["launches"] / launches
        if bandwidth > 0:
            r["roofline_fraction"] = r["bytes"] / bandwidth / (r["us"] * 1e-6)
    model.length = context
    with DecodeGraph(model) as graph:
        greedy_s = decode_rate(graph.greedy, 1, tokens, lambda: None)
    result: dict[str, Any] = {
        "model": c.name,
        "context": context,
        "fuse": fused,
        "attention_launches_per_layer": next(r["launches"] for r in rows if r["op"] == "attention") / len(model.layers),
        "max_seq": model.max_seq,
        "reps": reps,
        "inner": inner,
        "timing": "gpu events around graph replays" if tile.backend() == "gpu" else "host clock (cpu interpreter)",
        "bandwidth_Bps": bandwidth,
        "ops": rows,
        "launches": launches,
        "sum_us": summed,
        "whole_us": whole_us,
        "gap_us": whole_us - summed,
        "empty_us": empty_us,
        "empty_us_per_launch": empty_us / launches,
        "bytes": total_bytes,
        "greedy_us": greedy_s * 1e6,
        "greedy_tokens_per_s": 1 / greedy_s,
    }
    if bandwidth > 0:
        result["roofline_us"] = total_bytes / bandwidth * 1e6
        result["whole_roofline_fraction"] = result["roofline_us"] / whole_us
        result["greedy_roofline_fraction"] = result["roofline_us"] / result["greedy_us"]
    return result


def table(result: dict[str, Any]) -> str:
    """The result as a text table."""
    lines = [
        f"{'op':<24} {'launches':>8} {'us/token':>10} {'share':>7} {'MB':>9} {'GB/s':>9} {'roofline':>8} {'floor':>8}"
    ]
    for r in result["ops"]:
        frac = f"{r['roofline_fraction']:.1%}" if "roofline_fraction" in r else "-"
        lines.append(
            f"{r['op']:<24} {r['launches']:>8} {r['us']:>10.2f} {r['share']:>7.1%} {r['bytes'] / 1e6:>9.3f} "
            f"{r['gbps']:>9.1f} {frac:>8} {r['floor_us']:>8.2f}"
        )
    n = result["launches"]
    lines.append(f"{'sum of ops':<24} {'':>8} {result['sum_us']:>10.2f}")
    lines.append(f"{'whole step (graph)':<24} {n:>8} {result['whole_us']:>10.2f}")
    lines.append(f"{'gap (whole - sum)':<24} {'':>8} {result['gap_us']:>10.2f}")
    per = result["empty_us_per_launch"]
    lines.append(f"{'empty-kernel chain':<24} {n:>8} {result['empty_us']:>10.2f}   ({per:.3f} us a launch)")
    greedy = f"{result['greedy_us']:.2f}   ({result['greedy_tokens_per_s']:.1f} tokens/s"
    if "roofline_us" in result:
        lines.append(f"{'roofline (bytes / D2D)':<24} {'':>8} {result['roofline_us']:>10.2f}")
        greedy += f", {result['greedy_roofline_fraction']:.1%} of the roofline"
    lines.append(f"{'greedy DecodeGraph step':<24} {'':>8} {greedy})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", default="4B", help="Qwen3 size (0.6B ... 32B, or tiny); default 4B")
    p.add_argument("--context", type=int, default=None, help="cached positions before the token (default 512)")
    p.add_argument("--tokens", type=int, default=32, help="greedy steps timed; max_seq = context + tokens + 4")
    p.add_argument(
        "--fuse",
        choices=("on", "off", "both"),
        default="on",
        help="Qwen3(fuse=...): the decode step list; both: the fused, then the unfused on the same model",
    )
    p.add_argument("--decode-attention", choices=("auto", "one", "split"), default="auto")
    p.add_argument("--reps", type=int, default=20, help="timings per op (the median is kept)")
    p.add_argument("--inner", type=int, default=10, help="back-to-back replays per timing")
    p.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s; default: measured D2D copy on the GPU")
    p.add_argument("--out", type=Path, default=None, help="write the results (a JSON list, one per --fuse) here")
    p.add_argument("--smoke", action="store_true", help="tiny config, context 8, 2 reps, on the CPU interpreter")
    args = p.parse_args(argv)
    if args.smoke:
        tile.set_backend("cpu")
        args.model, args.tokens, args.reps, args.inner = "tiny", 2, 2, 2
    if args.context is None:
        args.context = 8 if args.smoke else 512
    if args.context < 0 or args.tokens < 1 or args.reps < 1 or args.inner < 1:
        raise SystemExit("--context must be >= 0, --tokens, --reps and --inner >= 1")
    bandwidth = args.bandwidth
    if not bandwidth and tile.backend() == "gpu":
        import torch
        from bench_qwen3 import copy_bandwidth

        bandwidth = copy_bandwidth(torch)
    model = build(config_for(args.model), args.context, args.tokens, args.decode_attention)
    results = []
    for fused in {"on": [True], "off": [False], "both": [True, False]}[args.fuse]:
        model.fuse = fused  # (the other form's matmuls are tuned by profile's model.tune)
        kw = {"tokens": args.tokens, "reps": args.reps, "inner": args.inner, "bandwidth": bandwidth}
        result = profile(model, args.context, **kw)
        result |= {"backend": tile.backend(), "decode_attention": args.decode_attention}
        print(f"{args.model}, context {args.context}, fuse={fused}:\n{table(result)}", flush=True)
        results.append(result)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
