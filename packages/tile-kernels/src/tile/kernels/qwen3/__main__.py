"""``python -m tile.kernels.qwen3``: run Qwen3 on Tile and print prefill and decode tokens/s.

Random weights of the chosen size unless ``--weights DIR`` names a Hugging Face checkpoint directory; the prompt is
``--prompt-len`` seeded random token ids; decoding is greedy unless ``--temperature`` is set, and replays the decode
step captured once as a graph (`DecodeGraph`) unless ``--eager``.

``--tp N`` runs the model tensor-parallel over N GPUs (`tile.kernels.qwen3.tp`), one process per GPU:
``NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node N -m tile.kernels.qwen3 --tp N ...``; each rank makes or reads only its
shard of the weights, rank 0 prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as dist
from tile.frontend import TileError
from tile.kernels.qwen3 import (
    DecodeGraph,
    Qwen3,
    Qwen3Config,
    Sampler,
    config_for,
    load_checkpoint,
    random_weights,
)
from tile.kernels.qwen3._progress import progress_bar
from tile.kernels.qwen3.tp import TPQwen3, shard_slices, torchrun_world


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tile.kernels.qwen3", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="0.6B", help="0.6B, 1.7B, 4B, 8B, 14B, 32B or tiny (default 0.6B)")
    p.add_argument("--weights", metavar="DIR", help="a Hugging Face safetensors checkpoint directory")
    p.add_argument("--prompt-len", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens to decode (default 32)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 for greedy (default)")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k most likely tokens (0: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, the prompt and sampling")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs, under torchrun with N processes")
    p.add_argument("--eager", action="store_true", help="decode with the eager chain instead of the captured graph")
    p.add_argument("--plain-progress", action="store_true", help="a plain progress bar even if rich is installed")
    return p


def _load(args: argparse.Namespace, config: Qwen3Config, rank: int, world: int) -> Qwen3:
    """The model (rank ``rank``'s `TPQwen3` shard when ``world > 1``), its weights made or read with a progress bar."""
    select = shard_slices(config, rank, world) if world > 1 else None
    with progress_bar(f"Qwen3-{config.name} weights", plain=args.plain_progress or rank > 0) as update:
        shown = update if rank == 0 else None
        if args.weights:
            weights = load_checkpoint(args.weights, config, progress=shown, select=select)
        else:
            weights = random_weights(config, seed=args.seed, progress=shown, select=select)
    max_seq = args.prompt_len + args.new_tokens
    if world == 1:
        return Qwen3(config, weights, max_seq=max_seq)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast needs fabric setup most hosts lack
    dist.init()
    return TPQwen3(config, weights, rank=rank, world=world, max_seq=max_seq)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.prompt_len < 1 or args.new_tokens < 0 or args.tp < 1:
        print("--prompt-len must be >= 1, --tp must be >= 1 and --new-tokens >= 0", file=sys.stderr)
        return 2
    rank, world = 0, 1
    if args.tp > 1:
        try:
            rank, world = torchrun_world(args.tp)
        except TileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        config = Qwen3Config.from_dir(args.weights) if args.weights else config_for(args.model)
        model = _load(args, config, rank, world)
        rng = np.random.default_rng(args.seed)
        prompt = rng.integers(0, config.vocab_size, args.prompt_len).tolist()
        sampler = Sampler(args.temperature, args.top_k, seed=args.seed)
        start = time.perf_counter()
        token = sampler(model.forward(prompt))
        prefill = time.perf_counter() - start
        tokens = [token]
        graph = None if args.eager or args.new_tokens < 2 else DecodeGraph(model)  # captured before the clock starts
        try:
            start = time.perf_counter()
            for _ in range(max(0, args.new_tokens - 1)):
                if graph is not None and sampler.greedy:
                    tokens.append(graph.greedy(tokens[-1]))  # argmax on the device: one int comes back
                else:
                    logits = graph.step(tokens[-1]) if graph is not None else model.forward([tokens[-1]])
                    tokens.append(sampler(logits))
            decode = time.perf_counter() - start
        finally:
            if graph is not None:
                graph.close()
    except TileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        dist.destroy()  # (nothing to leave without --tp)
    if rank > 0:
        return 0
    where = f"{tile.backend()}, tensor-parallel over {world}" if world > 1 else tile.backend()
    print(f"Qwen3-{config.name} on {where}: {config.num_parameters() / 1e9:.2f}B parameters")
    print(f"prefill: {args.prompt_len} tokens in {prefill:.3f} s = {args.prompt_len / prefill:.1f} tokens/s")
    if len(tokens) > 1:
        print(f"decode: {len(tokens) - 1} tokens in {decode:.3f} s = {(len(tokens) - 1) / decode:.1f} tokens/s")
    print("tokens:", " ".join(map(str, tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
