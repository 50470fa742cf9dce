"""Qwen3 batch-1 decode on Tile against torch eager (and Hugging Face transformers where installed), one process.

For each size (``--models``, default 0.6B,1.7B,4B) with seeded random bf16 weights: prefill a ``--context``-token
prompt (default 512), then time ``--tokens`` greedy decode steps (default 32). Reported per contender: decode
tokens/s and the fraction of the HBM roofline, i.e. (weight bytes + KV-cache bytes read per token) / time per token
over the bandwidth a device-to-device copy reaches in the same run (``--bandwidth`` overrides it, e.g. 3.35e12 for
an H100 SXM's datasheet figure). Contenders get the same weights (Tile's are copied to torch through numpy):

- ``tile_graph``: `tile.kernels.qwen3.DecodeGraph.greedy` (the one-token step captured once as a CUDA graph with an
  on-device argmax, replayed per token; one host wait per token for the new id and position, the replay and the one
  int read back); ``tile_graph_logits``: the same replay reading the f32 logits row back (`DecodeGraph.step`, what
  host-side top-k sampling needs) and taking the argmax on the host;
- ``tile``: `tile.kernels.qwen3.Qwen3.forward` (eager: the step as one ``.then()`` chain, enqueued launch by launch,
  one host wait per token);
- ``torch``: the same model written here in plain torch ops (``fn.scaled_dot_product_attention``, KV cache), eager;
- ``transformers``: ``Qwen3ForCausalLM`` eager with its dynamic cache, when importable.

Run on the GPU machine from the repository root: ``python benchmarks/bench_qwen3.py`` (about 5 minutes for the three
sizes on an H100); ``--smoke`` runs the tiny config on the CPU interpreter without peers. Results go to
``benchmarks/results/qwen3.json``.

``--tp N`` (under ``torchrun --nproc-per-node N``; default models 4B,32B) times the tensor-parallel model
(`tile.kernels.qwen3.TPQwen3`, each rank making only its shard of the seeded weights): ``tile_tp_graph`` (the captured
step with its all-reduces, on-device argmax) and ``tile_tp`` (eager chain), against the N-GPU weight-streaming
roofline: (this rank's weight bytes + its KV bytes per token) / the D2D copy bandwidth measured on its GPU; then, for
a model whose bf16 weights fit one GPU, the one-GPU graph decode (``tile_graph``, rank 0 alone) for the tp=N vs tp=1
comparison. Results go to ``benchmarks/results/qwen3_tp.json``::

    NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_qwen3.py --tp 2

With ``--smoke`` it runs the tiny config on the CPU interpreter over gloo (no roofline, no results file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

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
    return 2 * a.numel() / float(np.median(times[2:]))


def bf16_to_torch(torch: Any, a: Any) -> Any:
    """A CUDA bf16 torch tensor with the bits of the ml_dtypes bf16 array ``a``."""
    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).to("cuda").view(torch.bfloat16)


def hf_decode_rate(torch: Any, c: Qwen3Config, w: dict[str, Any], prompt: list[int], tokens: int) -> float | None:
    """Seconds per greedy decode step of transformers' ``Qwen3ForCausalLM`` (eager), or None without it."""
    try:
        import transformers
    except ImportError:
        return None
    cfg = transformers.Qwen3Config(**c.to_hf())
    model = transformers.Qwen3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    model.load_state_dict({n: bf16_to_torch(torch, a) for n, a in w.items()}, strict=False)
    with torch.no_grad():
        out = model(torch.tensor([prompt], device="cuda"), use_cache=True)
        cache = out.past_key_values

        def step(tok: int) -> int:
            nonlocal cache
            o = model(torch.tensor([[tok]], device="cuda"), past_key_values=cache, use_cache=True)
            cache = o.past_key_values
            return int(o.logits[0, -1].argmax())

        return decode_rate(step, int(out.logits[0, -1].argmax()), tokens, torch.cuda.synchronize)


class TorchQwen3:
    """Qwen3 in plain torch ops (eager), with a preallocated KV cache."""

    def __init__(self, torch: Any, c: Qwen3Config, w: dict[str, Any], max_seq: int) -> None:
        self.t, self.c = torch, c
        self.w = {n: bf16_to_torch(torch, a) for n, a in w.items()}
        shape = (c.num_hidden_layers, 1, c.num_key_value_heads, max_seq, c.head_dim)
        self.k = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
        self.v = torch.zeros_like(self.k)
        half = c.head_dim // 2
        inv = c.rope_theta ** (-torch.arange(half, dtype=torch.float64) * 2 / c.head_dim)
        ang = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv[None]
        self.cos, self.sin = ang.cos().float().cuda(), ang.sin().float().cuda()
        self.length = 0

    def _norm(self, x: Any, w: Any) -> Any:
        x32 = x.float()
        return (x32 * self.t.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.c.rms_norm_eps) * w.float()).to(x.dtype)

    def _rope(self, x: Any, pos: slice) -> Any:  # (1, heads, T, hd)
        a, b = x.float().chunk(2, -1)
        cos, sin = self.cos[pos], self.sin[pos]
        return self.t.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)

    def forward(self, ids: list[int]) -> Any:
        t, c, w, fn = self.t, self.c, self.w, self.t.nn.functional
        n, p0 = len(ids), self.length
        pos = slice(p0, p0 + n)
        x = w["model.embed_tokens.weight"][t.tensor(ids, device="cuda")][None]
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(1, n, -1, c.head_dim)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(1, n, -1, c.head_dim)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(1, n, -1, c.head_dim)
            q = self._rope(self._norm(q, w[p + "self_attn.q_norm.weight"]).transpose(1, 2), pos)
            self.k[i, :, :, pos] = self._rope(self._norm(k, w[p + "self_attn.k_norm.weight"]).transpose(1, 2), pos)
            self.v[i, :, :, pos] = v.transpose(1, 2)
            kk, vv = self.k[i, :, :, : p0 + n], self.v[i, :, :, : p0 + n]
            mask = t.ones(n, p0 + n, dtype=t.bool, device="cuda").tril(p0)
            o = fn.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=True)
            x = x + o.transpose(1, 2).reshape(1, n, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (fn.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
        self.length += n
        head = w["model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"]
        return (self._norm(x[:, -1], w["model.norm.weight"]) @ head.T).float()[0]


def decode_rate(step: Any, first: int, tokens: int, sync: Any) -> float:
    """Seconds per decode step of ``step(token) -> next token`` over ``tokens`` steps after two warm-up steps."""
    token = step(first)
    token = step(token)
    sync()
    start = time.perf_counter()
    for _ in range(tokens):
        token = step(token)
    sync()
    return (time.perf_counter() - start) / tokens


def bench(name: str, args: argparse.Namespace, torch: Any, bandwidth: float) -> dict[str, Any]:
    c = config_for(name)
    w = random_weights(c, seed=0)
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    max_seq = args.context + args.tokens + 4
    kv_bytes = 2 * c.num_hidden_layers * c.kv_size * 2 * (args.context + args.tokens // 2)
    row: dict[str, Any] = {"model": name, "context": args.context, "weight_bytes": 2 * c.num_parameters()}
    row["kv_bytes_per_token"] = kv_bytes
    floor = (row["weight_bytes"] + kv_bytes) / bandwidth if bandwidth else 0.0
    model = Qwen3(c, w, max_seq=max_seq)
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
    model.reset()
    if torch is not None:
        tm = TorchQwen3(torch, c, w, max_seq)
        with torch.no_grad():
            first = int(tm.forward(prompt).argmax())
            sec = decode_rate(lambda tok: int(tm.forward([tok]).argmax()), first, args.tokens, torch.cuda.synchronize)
        row["torch_eager"] = {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}
        del tm
        sec_hf = hf_decode_rate(torch, c, w, prompt, args.tokens)
        if sec_hf is not None:
            row["transformers_eager"] = {"tokens_per_s": 1 / sec_hf, "roofline_fraction": floor / sec_hf}
        torch.cuda.empty_cache()
    print(json.dumps(row), flush=True)
    return row


def bench_tp(name: str, args: argparse.Namespace, torch: Any, bandwidth: float) -> dict[str, Any]:
    """Tensor-parallel decode of ``name`` on this rank (every rank runs it; rank 0's numbers are reported)."""
    import tile.frontend.distributed as dist

    g = dist.group()
    c = config_for(name)
    w = random_weights(c, seed=0, select=shard_slices(c, g.rank, g.world_size))
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    max_seq = args.context + args.tokens + 4
    model = TPQwen3(c, w, rank=g.rank, world=g.world_size, max_seq=max_seq)
    del w
    loc = model.config
    kv_bytes = 2 * c.num_hidden_layers * loc.kv_size * 2 * (args.context + args.tokens // 2)
    kv_cache = 2 * c.num_hidden_layers * loc.kv_size * 2 * model.max_seq
    row: dict[str, Any] = {"model": name, "tp": g.world_size, "context": args.context}
    row |= {"weight_bytes_per_rank": model.weight_bytes(), "kv_bytes_per_token_per_rank": kv_bytes}
    row["device_bytes_per_rank"] = sum(2 * int(np.prod(s)) for s in _rank_shapes(c, g.rank, g.world_size)) + kv_cache
    floor = (row["weight_bytes_per_rank"] + kv_bytes) / bandwidth if bandwidth else 0.0
    row["roofline_s_per_token"] = floor
    row |= _tp_rates(model, prompt, args.tokens, floor)
    del model  # freed before the one-GPU comparison
    dist.barrier()
    room = torch.cuda.get_device_properties(0).total_memory if args.tp_gpu else float("inf")
    if 2 * c.num_parameters() < 0.7 * room:
        if g.rank == 0:  # tp=1 on GPU 0 alone, the others wait
            row |= bench_one_gpu(c, args, bandwidth)
        dist.barrier()
    if g.rank == 0:
        print(json.dumps(row), flush=True)
    return row


def _tp_rates(model: TPQwen3, prompt: list[int], tokens: int, floor: float) -> dict[str, Any]:
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
    return row


def _rank_shapes(c: Qwen3Config, rank: int, world: int) -> list[tuple[int, ...]]:
    """Shapes of the tensors rank ``rank`` holds (a tied LM head is a view of the embedding: not counted again)."""
    parts = shard_slices(c, rank, world)
    return [sliced_shape(s, parts[n]) for n, s in c.weight_shapes().items()]


def bench_one_gpu(c: Qwen3Config, args: argparse.Namespace, bandwidth: float) -> dict[str, Any]:
    """The one-GPU graph decode of ``c`` (tp=1), for comparison with the tensor-parallel row."""
    w = random_weights(c, seed=0)
    prompt = np.random.default_rng(0).integers(0, c.vocab_size, args.context).tolist()
    model = Qwen3(c, w, max_seq=args.context + args.tokens + 4)
    del w
    kv_bytes = 2 * c.num_hidden_layers * c.kv_size * 2 * (args.context + args.tokens // 2)
    floor = (model.weight_bytes() + kv_bytes) / bandwidth if bandwidth else 0.0
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help="default 0.6B,1.7B,4B (4B,32B with --tp)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (run under torchrun)")
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s; default: measured D2D copy")
    p.add_argument("--smoke", action="store_true", help="tiny config on the CPU interpreter, no peers")
    args = p.parse_args()
    if args.tp > 1:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast needs fabric setup most hosts lack
        main_tp(args)
        return
    args.models = args.models or "0.6B,1.7B,4B"
    if args.smoke:
        tile.set_backend("cpu")
        args.models, args.context, args.tokens = "tiny", 8, 2
    torch = None
    if tile.backend() == "gpu":
        import torch as torch_module

        torch = torch_module
    bandwidth = args.bandwidth or (copy_bandwidth(torch) if torch is not None else 0.0)
    rows = [bench(m, args, torch, bandwidth) for m in args.models.split(",")]
    info = {"backend": tile.backend(), "python": platform.python_version(), "bandwidth_Bps": bandwidth}
    if torch is not None:
        info |= {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if not args.smoke:
        out = ROOT / "benchmarks" / "results" / "qwen3.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"info": info, "rows": rows}, indent=2) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
