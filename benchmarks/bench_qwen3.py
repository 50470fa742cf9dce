"""Qwen3 batch-1 decode on Tile against torch eager (and Hugging Face transformers where installed), one process.

For each size (``--models``, default 0.6B,1.7B,4B) with seeded random bf16 weights (`qwen3_weights.SeededWeights`:
made tensor by tensor as the model uploads them, so 32B never sits on the host whole; ``build_s`` is printed): prefill
a ``--context``-token prompt (default 512), then time ``--tokens`` greedy decode steps (default 32). Reported per
contender: decode tokens/s and the fraction of the HBM roofline, i.e. (weight bytes + KV-cache bytes read per token) /
time per token over the bandwidth a device-to-device copy reaches in the same run (``--bandwidth`` overrides it, e.g.
3.35e12 for an H100 SXM's datasheet figure). Contenders get the same weights:

- ``tile_graph``: `tile.kernels.qwen3.DecodeGraph.greedy` (the one-token step captured once as a CUDA graph with an
  on-device argmax, replayed per token; one host wait per token for the new id and position, the replay and the one
  int read back); ``tile_graph_logits``: the same replay reading the f32 logits row back (`DecodeGraph.step`, what
  host-side top-k sampling needs) and taking the argmax on the host;
- ``tile``: `tile.kernels.qwen3.Qwen3.forward` (eager: the step as one ``.then()`` chain, enqueued launch by launch,
  one host wait per token);
- ``torch``: the same model written here in plain torch ops (``fn.scaled_dot_product_attention``, KV cache), eager;
- ``transformers_eager``: ``Qwen3ForCausalLM`` eager with its dynamic cache, when importable; with ``--peers all``
  also ``transformers_compiled``: its decode forward under ``torch.compile(mode="reduce-overhead")`` over a static
  cache, within ``--hf-limit`` seconds, or a skip with the reason (`qwen3_hf`).

``--decode-attention`` picks Tile's decode attention (`Qwen3`'s ``decode_attention``: ``one`` kernel, ``split`` +
combine, or ``auto``, the default: one kernel up to 1024 cache positions); the row records it. ``--fuse`` picks
`Qwen3`'s ``fuse`` (the RMSNorms and SwiGLU fused into the decode projections, SwiGLU into the prefill's gate/up
GEMM: ``on``, the default, or ``off``); ``both`` also times the unfused graph decode on the same model and
weights right after the fused one (``tile_graph_unfused``), an A/B in one run. ``--pdl`` picks `Qwen3`'s ``pdl``
(programmatic dependent launch: ``off``, the default, or ``on``); ``both`` also times the graph decode of the same
model with and without it in ``--pdl-rounds`` interleaved rounds (``tile_graph_pdl_off``, ``tile_graph_pdl_on``,
``pdl_speedup``, ``pdl_same_tokens``: `qwen3_pdl`).

The peers are skipped (``peers_skipped`` says why) with ``--peers none`` or where two more copies of the weights do
not fit the GPU beside Tile's (32B on one H200).

``--prefill`` times a ``--prefill-tokens`` prompt (default 2048, default model 4B) instead: Tile's eager and graphed
prefill and its GEMMs alone against the same GEMMs on cuBLAS (``torch.matmul``), with the FLOP counts and the
ratios (`qwen3_prefill`).

Run on the GPU machine from the repository root: ``python benchmarks/bench_qwen3.py`` (about 5 minutes for the three
sizes on an H100); ``--smoke`` runs the tiny config on the CPU interpreter without peers (with ``--prefill``, a
16-token prompt). Rows go into ``benchmarks/results/qwen3.json``, replacing the stored row of the same model and mode.

``--tp N`` (under ``torchrun --nproc-per-node N``; default models 4B,32B) times the tensor-parallel model
(`tile.kernels.qwen3.TPQwen3`, each rank making only its shard of the seeded weights): ``tile_tp_graph`` (the captured
step with its all-reduces, on-device argmax) and ``tile_tp`` (eager chain), against the N-GPU weight-streaming
roofline: (this rank's weight bytes + its KV bytes per token) / the D2D copy bandwidth measured on its GPU; then, for
a model whose bf16 weights fit one GPU, the one-GPU graph decode (``tile_graph``, rank 0 alone) for the tp=N vs tp=1
comparison. Results go to ``benchmarks/results/qwen3_tp.json``::

    NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_qwen3.py --tp 2

``--tp-split`` then times the same graph decode twice more on the same model, to split the step's time: with the
small all-reduces on torch's one-shot path (``tile_tp_graph_one_shot``: `tile.distributed.enable_one_shot`), and
with NO collectives at all (``tile_tp_graph_no_comm``: timing only, its tokens are wrong; the compute of a step).
``--skip-tp1`` leaves out the one-GPU comparison.

With ``--smoke`` it runs the tiny config on the CPU interpreter over gloo (no roofline, no results file).

``--contexts 128,512,1024,2048,4096,8192`` (default model 4B) times the graph decode at each context length instead,
the cache filled by prefill in ``--prefill-chunk``-token passes, with the roofline and (``--peers``) the torch and
transformers peers at every length (`qwen3_context`): one row of mode ``"context"`` whose ``points`` hold the series;
``benchmarks/plot_qwen3.py`` draws it into ``docs/images/qwen3_context.svg``. With ``--smoke``, the tiny config on the
CPU interpreter at the lengths given (no roofline, no peers, no results file).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from qwen3_context import bench_contexts, hf_points, kv_bytes_per_token, parse_contexts, roofline_s, torch_series
from qwen3_hf import decode_rate, hf_rates
from qwen3_pdl import pdl_ab
from qwen3_prefill import bench_prefill
from qwen3_torch import TorchQwen3, torch_rate
from qwen3_weights import SeededWeights

import tile.frontend as tile
from tile.kernels.qwen3 import DecodeGraph, Qwen3, Qwen3Config, TPQwen3, config_for, random_weights, shard_slices
from tile.kernels.qwen3.tp import sliced_shape

ROOT = Path(__file__).resolve().parent.parent


def copy_bandwidth(torch: Any) -> float:
    """Bytes/s of a 1 GiB device-to-device copy (read + write counted), median of 10."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    size = a.numel()
    del a, b
    torch.cuda.empty_cache()  # the 2 GiB go back to the device (a 32B model needs the room)
    return float(2 * size / np.median(times[2:]))


def bench(name: str, args: argparse.Namespace, torch: Any, bandwidth: float) -> dict[str, Any]:
    c = config_for(name)
    w = SeededWeights(c, seed=0)
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    max_seq = args.context + args.tokens + 4
    kv_bytes = kv_bytes_per_token(c, args.context, args.tokens)
    row: dict[str, Any] = {
        "model": name,
        "mode": "decode",
        "context": args.context,
        "weight_bytes": 2 * c.num_parameters(),
    }
    row["kv_bytes_per_token"] = kv_bytes
    floor = roofline_s(row["weight_bytes"], kv_bytes, bandwidth)
    start = time.perf_counter()
    options = {"decode_attention": args.decode_attention, "fuse": args.fuse != "off", "pdl": args.pdl in (None, "on")}
    model = Qwen3(c, w, max_seq=max_seq, **options)
    row["decode_attention"], row["fuse"], row["pdl"] = args.decode_attention, args.fuse, args.pdl or "on"
    row["build_s"] = time.perf_counter() - start  # the seeded weights made on the host and uploaded, tensor by tensor
    print(f"{name}: built in {row['build_s']:.1f} s", flush=True)
    start = time.perf_counter()
    first = int(np.argmax(model.forward(prompt)))
    row["tile_prefill_s"] = time.perf_counter() - start  # includes first-call compiles
    after_prompt = model.length
    sec = decode_rate(lambda tok: int(np.argmax(model.forward([tok]))), first, args.tokens, lambda: None)
    row["tile"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    model.length = after_prompt  # decode the same positions again (the cache rows past them are rewritten)
    start = time.perf_counter()
    with DecodeGraph(model) as graph:
        row["tile_graph_capture_s"] = time.perf_counter() - start
        sec = decode_rate(graph.greedy, first, args.tokens, lambda: None)
        row["tile_graph"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
        model.length = after_prompt
        sec = decode_rate(lambda tok: int(np.argmax(graph.step(tok))), first, args.tokens, lambda: None)
        row["tile_graph_logits"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    if args.pdl == "both":  # the A/B: the same model and positions, graphs with and without PDL, interleaved
        row |= pdl_ab(model, first, after_prompt=after_prompt, tokens=args.tokens, floor=floor, rounds=args.pdl_rounds)
        on, off = row["tile_graph_pdl_on"], row["tile_graph_pdl_off"]
        print(
            f"{name}: pdl on {on['tokens_per_s']:.1f} tok/s ({on['roofline_fraction']:.3f} of the roofline), off "
            f"{off['tokens_per_s']:.1f} ({off['roofline_fraction']:.3f}); same tokens: {row['pdl_same_tokens']}",
            flush=True,
        )
    if args.fuse == "both":  # the A/B: the same model and positions, the unfused decode steps
        model.fuse, model.length = False, after_prompt
        with DecodeGraph(model) as graph:
            sec = decode_rate(graph.greedy, first, args.tokens, lambda: None)
        row["tile_graph_unfused"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
        print(f"{name}: tile_graph_unfused {1 / sec:.1f} tok/s, {floor / sec:.3f} of the roofline", flush=True)
    model.reset()
    graphed = row["tile_graph"]
    print(f"{name}: tile_graph {graphed['tokens_per_s']:.1f} tok/s, {graphed['roofline_fraction']:.3f} of the roofline")
    if torch is not None:
        skip = peers_skipped(torch, row["weight_bytes"], args.peers)
        if skip:
            row["peers_skipped"] = skip
            print(f"{name}: torch/transformers peers skipped: {skip}", flush=True)
        else:
            row |= torch_peers(torch, c, w, prompt, args=args, floor=floor, max_seq=max_seq)
    print(json.dumps(row), flush=True)
    return row


def peers_skipped(torch: Any, weight_bytes: int, peers: str) -> str | None:
    """Why the torch and transformers peers do not run, or None: they need about two more copies of the weights on
    the GPU beside Tile's (transformers' model and the state dict it loads from)."""
    if peers == "none":
        return "--peers none"
    free = torch.cuda.mem_get_info()[0]
    if 2.2 * weight_bytes > free:
        return (
            f"two more copies of the weights ({2 * weight_bytes / 1e9:.0f} GB) do not fit the {free / 1e9:.0f} GB free"
        )
    return None


def torch_peers(
    torch: Any, c: Qwen3Config, w: Any, prompt: list[int], *, args: argparse.Namespace, floor: float, max_seq: int
) -> dict[str, Any]:
    """The torch eager row and the transformers rows (eager, and compiled with ``--peers all``)."""
    sec = torch_rate(torch, TorchQwen3(torch, c, w, max_seq), prompt, args.tokens)
    torch.cuda.empty_cache()  # the torch model is gone
    row: dict[str, Any] = {"torch_eager": {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}}
    peer = {"c": c, "w": w, "prompt": prompt, "tokens": args.tokens, "limit_s": args.hf_limit, "floor": floor}
    return row | hf_rates(torch, **peer, compiled=args.peers == "all")


def bench_tp(name: str, args: argparse.Namespace, torch: Any, bandwidth: float) -> dict[str, Any]:
    """Tensor-parallel decode of ``name`` on this rank (every rank runs it; rank 0's numbers are reported)."""
    import tile.frontend.distributed as dist

    g = dist.group()
    c = config_for(name)
    w = random_weights(c, seed=0, select=shard_slices(c, g.rank, g.world_size))
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    max_seq = args.context + args.tokens + 4
    pdl = args.pdl in ("on", "both")  # TPQwen3's default is off (not measured faster next to NCCL's kernels)
    model = TPQwen3(c, w, rank=g.rank, world=g.world_size, max_seq=max_seq, pdl=pdl)
    del w
    loc = model.config
    kv_bytes = 2 * c.num_hidden_layers * loc.kv_size * 2 * (args.context + args.tokens // 2)
    kv_cache = 2 * c.num_hidden_layers * loc.kv_size * 2 * model.max_seq
    row: dict[str, Any] = {"model": name, "tp": g.world_size, "context": args.context, "pdl": pdl}
    row |= {"weight_bytes_per_rank": model.weight_bytes(), "kv_bytes_per_token_per_rank": kv_bytes}
    row["device_bytes_per_rank"] = sum(2 * int(np.prod(s)) for s in _rank_shapes(c, g.rank, g.world_size)) + kv_cache
    floor = (row["weight_bytes_per_rank"] + kv_bytes) / bandwidth if bandwidth else 0.0
    row["roofline_s_per_token"] = floor
    row |= _tp_rates(model, prompt, args.tokens, floor, split=args.tp_split)
    del model  # freed before the one-GPU comparison
    dist.barrier()
    room = torch.cuda.get_device_properties(0).total_memory if args.tp_gpu else float("inf")
    if 2 * c.num_parameters() < 0.7 * room and not args.skip_tp1:
        if g.rank == 0:  # tp=1 on GPU 0 alone, the others wait
            row |= bench_one_gpu(c, args, bandwidth)
        dist.barrier()
    if g.rank == 0:
        print(json.dumps(row), flush=True)
    return row


def _tp_rates(model: TPQwen3, prompt: list[int], tokens: int, floor: float, *, split: bool) -> dict[str, Any]:
    row: dict[str, Any] = {}
    start = time.perf_counter()
    first = int(np.argmax(model.forward(prompt)))
    row["tile_tp_prefill_s"] = time.perf_counter() - start
    after_prompt = model.length
    sec = decode_rate(lambda tok: int(np.argmax(model.forward([tok]))), first, tokens, lambda: None)
    row["tile_tp"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    model.length = after_prompt
    start = time.perf_counter()
    with DecodeGraph(model) as graph:
        row["tile_tp_graph_capture_s"] = time.perf_counter() - start
        sec = decode_rate(graph.greedy, first, tokens, lambda: None)
        row["tile_tp_graph"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    if split:
        row |= _tp_split(model, after_prompt, first, tokens, floor)
    return row


def _tp_split(model: TPQwen3, after_prompt: int, first: int, tokens: int, floor: float) -> dict[str, Any]:
    """``--tp-split``: the graph decode again with small all-reduces on the one-shot path, then with NO collectives
    (timing only: its tokens are wrong), to split the step into compute and communication."""
    import tile.frontend.distributed as dist

    row: dict[str, Any] = {}
    try:
        dist.enable_one_shot(unchecked=True)  # (every rank, in step: a collective call)
    except tile.TileError as exc:
        row["tile_tp_graph_one_shot"] = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        model.length = after_prompt
        with DecodeGraph(model) as graph:
            sec = decode_rate(graph.greedy, first, tokens, lambda: None)
        dist.disable_one_shot()
        row["tile_tp_graph_one_shot"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
    dist.barrier()
    model.length = after_prompt
    without_collectives(model)
    with DecodeGraph(model) as graph:
        sec = decode_rate(graph.greedy, first, tokens, lambda: None)
    row["tile_tp_graph_no_comm"] = {
        "tokens_per_s": 1 / sec,
        "roofline_fraction": floor / sec,
        "note": "TIMING ONLY: the all-reduces and the logits all-gather removed, the tokens are wrong",
    }
    dist.barrier()
    return row


def without_collectives(model: TPQwen3) -> None:
    """Make ``model`` build its steps without the all-reduces and the logits all-gather (each is the last step of
    `TPQwen3.residual_steps` / `logits_steps`): WRONG numbers, for timing the compute of a tensor-parallel step alone.
    Every rank then runs on its own; nothing pairs up."""
    setattr(model, "residual_steps", lambda name, w: TPQwen3.residual_steps(model, name, w)[:-1])  # noqa: B010
    setattr(model, "logits_steps", lambda n: TPQwen3.logits_steps(model, n)[:-1])  # noqa: B010


def _rank_shapes(c: Qwen3Config, rank: int, world: int) -> list[tuple[int, ...]]:
    """Shapes of the tensors rank ``rank`` holds (a tied LM head is a view of the embedding: not counted again)."""
    parts = shard_slices(c, rank, world)
    return [sliced_shape(s, parts[n]) for n, s in c.weight_shapes().items()]


def bench_one_gpu(c: Qwen3Config, args: argparse.Namespace, bandwidth: float) -> dict[str, Any]:
    """The one-GPU graph decode of ``c`` (tp=1), for comparison with the tensor-parallel row."""
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    model = Qwen3(c, SeededWeights(c, seed=0), max_seq=args.context + args.tokens + 4)
    floor = roofline_s(model.weight_bytes(), kv_bytes_per_token(c, args.context, args.tokens), bandwidth)
    first = int(np.argmax(model.forward(prompt)))
    with DecodeGraph(model) as graph:
        sec = decode_rate(graph.greedy, first, args.tokens, lambda: None)
    return {"tp1_tile_graph": {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}}


def main_tp(args: argparse.Namespace) -> None:
    """``--tp N``: every rank runs `bench_tp` for each model; rank 0 writes the results."""
    import torch

    import tile.frontend.distributed as dist

    if os.environ.get("WORLD_SIZE") != str(args.tp):
        raise SystemExit(
            f"--tp {args.tp} runs one process per GPU: NCCL_NVLS_ENABLE=0 python -m torch.distributed.run "
            f"--nproc-per-node {args.tp} benchmarks/bench_qwen3.py --tp {args.tp}"
        )
    if args.smoke:
        tile.set_backend("cpu")
        args.models, args.context, args.tokens = "tiny", 8, 2
    args.tp_gpu = tile.backend() == "gpu"
    g = dist.init()
    bandwidth = args.bandwidth or (copy_bandwidth(torch) if args.tp_gpu else 0.0)  # this rank's GPU after init
    rows = [bench_tp(m, args, torch, bandwidth) for m in (args.models or "4B,32B").split(",")]
    if g.rank == 0:
        info = {"backend": tile.backend(), "python": platform.python_version(), "bandwidth_Bps": bandwidth}
        info |= {"torch": torch.__version__, "tp": args.tp, "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}
        if args.tp_gpu:
            info["device"] = torch.cuda.get_device_name()
        if not args.smoke:
            out = ROOT / "benchmarks" / "results" / "qwen3_tp.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({"info": info, "rows": rows}, indent=2) + "\n")
        print(json.dumps(info))
    dist.destroy()


def save_rows(rows: list[dict[str, Any]], info: dict[str, Any], path: Path) -> None:
    """Merge ``rows`` into the results file at ``path``: a row replaces the stored row of the same model and mode
    (a row without a mode is a decode row), the others are kept, as are top-level keys other than ``info`` and
    ``rows``; ``info`` describes the latest run (its keys replace the stored ones, the others are kept)."""
    old = json.loads(path.read_text()) if path.is_file() else {}

    def key(row: dict[str, Any]) -> tuple[str, str]:
        return str(row.get("model")), str(row.get("mode", "decode"))

    new = {key(r) for r in rows}
    kept = [r for r in old.get("rows", []) if key(r) not in new]
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = old | {"info": old.get("info", {}) | info, "rows": kept + rows}  # other top-level keys are kept
    path.write_text(json.dumps(merged, indent=2) + "\n")


def tp_arguments(p: argparse.ArgumentParser) -> None:
    """The ``--tp`` options."""
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (run under torchrun)")
    p.add_argument(
        "--tp-split",
        action="store_true",
        help="--tp: also time the graph with one-shot all-reduces and with no collectives (timing only, wrong tokens)",
    )
    p.add_argument("--skip-tp1", action="store_true", help="--tp: skip the one-GPU comparison (tp1_tile_graph)")


def decode_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the decode model (`Qwen3`'s ``decode_attention``, ``fuse`` and ``pdl``)."""
    p.add_argument(
        "--decode-attention",
        choices=("auto", "one", "split"),
        default="auto",
        help="Qwen3(decode_attention=...): one kernel, split + combine, or auto (one up to 128 cache positions)",
    )
    p.add_argument(
        "--fuse",
        choices=("on", "off", "both"),
        default="on",
        help="Qwen3(fuse=...): norms and SwiGLU fused into the decode projections; both: also time the unfused graph",
    )
    p.add_argument(
        "--pdl",
        choices=("off", "on", "both"),
        default=None,
        help="Qwen3(pdl=...): programmatic dependent launch (default: on for one GPU, off with --tp, as the models' "
        "defaults); both: also time the one-GPU graph with and without it, A/B",
    )
    p.add_argument("--pdl-rounds", type=int, default=5, help="--pdl both: interleaved rounds per mode (median)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help="default 0.6B,1.7B,4B (4B,32B with --tp; 4B with --prefill)")
    tp_arguments(p)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s; default: measured D2D copy")
    p.add_argument("--smoke", action="store_true", help="tiny config on the CPU interpreter, no peers")
    p.add_argument("--prefill", action="store_true", help="time prefill against cuBLAS instead of decode")
    p.add_argument("--prefill-tokens", type=int, default=2048, help="prompt length of --prefill")
    p.add_argument("--contexts", default=None, help="decode tokens/s at each of these context lengths (default 4B)")
    p.add_argument("--prefill-chunk", type=int, default=512, help="tokens per prefill pass filling --contexts caches")
    p.add_argument("--commit", default=None, help="the commit --contexts records (default: git rev-parse, if any)")
    p.add_argument(
        "--peers",
        choices=("eager", "all", "none"),
        default="eager",
        help="decode peers: torch and transformers eager (default), also transformers compiled (all), or none",
    )
    p.add_argument("--hf-limit", type=int, default=240, help="seconds transformers_compiled may take")
    decode_arguments(p)
    args = p.parse_args(argv)
    if args.tp > 1:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast needs fabric setup most hosts lack
        main_tp(args)
        return
    if args.contexts is not None and args.prefill:
        raise SystemExit("--contexts times decode; run --prefill separately")
    contexts = parse_contexts(args.contexts) if args.contexts is not None else None
    if args.prefill_chunk < 1:
        raise SystemExit(f"--prefill-chunk {args.prefill_chunk}: give a positive token count")
    args.models = args.models or ("4B" if args.prefill or contexts else "0.6B,1.7B,4B")
    if args.smoke:  # (--contexts keeps its lengths: the smoke test passes short ones)
        tile.set_backend("cpu")
        args.models, args.context, args.tokens, args.prefill_tokens = "tiny", 8, 2, 16
    torch = None
    if tile.backend() == "gpu":
        import torch as torch_module

        torch = torch_module
    device = torch.cuda.get_device_name() if torch is not None else "cpu interpreter"
    info: dict[str, Any] = {"backend": tile.backend(), "python": platform.python_version(), "device": device}
    if args.prefill:
        rows = [prefill_row(m, args, torch) for m in args.models.split(",")]
    elif contexts:
        info["bandwidth_Bps"] = args.bandwidth or (copy_bandwidth(torch) if torch is not None else 0.0)
        rows = [context_row(m, contexts, args, torch, info["bandwidth_Bps"]) for m in args.models.split(",")]
    else:
        info["bandwidth_Bps"] = args.bandwidth or (copy_bandwidth(torch) if torch is not None else 0.0)
        rows = [bench(m, args, torch, info["bandwidth_Bps"]) for m in args.models.split(",")]
    for row in rows:
        row["device"] = device
    if torch is not None:
        info["torch"] = torch.__version__
    if not args.smoke:
        save_rows(rows, info, ROOT / "benchmarks" / "results" / "qwen3.json")
    print(json.dumps(info))


def context_row(
    name: str, contexts: list[int], args: argparse.Namespace, torch: Any, bandwidth: float
) -> dict[str, Any]:
    """The ``--contexts`` row of ``name`` (`qwen3_context.bench_contexts`), with the torch and transformers peers at
    the same lengths on the GPU unless skipped (`peers_skipped`)."""

    def peers(c: Qwen3Config, w: Any, points: list[dict[str, Any]]) -> dict[str, Any]:
        gc.collect()  # the Tile models of the points are gone before the free memory is judged
        skip = peers_skipped(torch, 2 * c.num_parameters(), args.peers)
        if skip:
            print(f"{name}: torch/transformers peers skipped: {skip}", flush=True)
            return {"peers_skipped": skip}
        tm = TorchQwen3(torch, c, w, max(p["context"] for p in points) + args.tokens + 4)
        torch_series(torch, tm, c, points, tokens=args.tokens, chunk=args.prefill_chunk)
        del tm
        torch.cuda.empty_cache()
        hf_points(torch, c, w, points, tokens=args.tokens, limit_s=args.hf_limit, compiled=args.peers == "all")
        return {}

    kw = {"tokens": args.tokens, "chunk": args.prefill_chunk, "decode_attention": args.decode_attention}
    row = bench_contexts(name, contexts, bandwidth=bandwidth, peers=peers if torch is not None else None, **kw)
    if args.commit:
        row["commit"] = args.commit
    print(json.dumps(row), flush=True)
    return row


def prefill_row(name: str, args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    """The ``--prefill`` row of ``name`` (`qwen3_prefill.bench_prefill`), printed with its ratios."""
    c = config_for(name)
    row = bench_prefill(c, SeededWeights(c, seed=0), args.prefill_tokens, torch)
    print(json.dumps(row), flush=True)
    for key in ("prefill_vs_cublas", "prefill_graph_vs_cublas", "gemm_only_vs_cublas"):
        if key in row:
            print(f"{name} {key}: {row[key]:.3f}", flush=True)
    return row


if __name__ == "__main__":
    main()
