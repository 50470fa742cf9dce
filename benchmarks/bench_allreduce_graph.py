"""Small all-reduces inside a captured graph: the cost per all-reduce of a tensor-parallel decode step (issue 19).

A tp=2 Qwen3-32B decode step all-reduces the ``(1, 5120)`` bf16 residual stream twice per layer, 128 times per token,
all inside one captured graph. This times exactly that: one graph holding a chain of ``--ops`` (128) in-place sum
all-reduces of ``--numel`` (5120) bf16 elements, replayed ``--replays`` times per round (each replay waited for),
``--rounds`` rounds after a warm-up, median round reported as microseconds per all-reduce. Contenders, each also
checked once for the right sum on rank-dependent data before it is timed:

- ``tile_nccl``: `tile.distributed.all_reduce` ``.then()`` chain, ``.graph()`` (NCCL through torch.distributed);
- ``tile_one_shot``: the same after `tile.distributed.enable_one_shot` (torch's symmetric-memory one-shot kernel);
- ``torch_nccl``: ``torch.distributed.all_reduce`` on a torch tensor, captured with ``torch.cuda.graph``;
- ``torch_one_shot``: ``torch.ops.symm_mem.one_shot_all_reduce_copy_out`` captured the same way (the floor of the
  one-shot path: no Tile in it).

``tile_nccl`` against ``torch_nccl`` is Tile's own overhead per captured collective (expected about none: the graph
holds the same NCCL kernel); ``tile_nccl`` times ``--ops`` is the all-reduce share of a decode token; ``tile_one_shot``
what the one-shot path saves. A contender that fails (say, no symmetric memory here) prints its error and the rest go
on. Results go to ``benchmarks/results/allreduce_graph.json`` (rank 0)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 python -m torch.distributed.run --nproc-per-node 2 \\
        benchmarks/bench_allreduce_graph.py

``--smoke`` runs the Tile contender on the CPU (interpreter backend, gloo, a host graph) and writes nothing::

    TILE_INTERPRET=1 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_allreduce_graph.py --smoke
"""

from __future__ import annotations

import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before torch/NCCL start: NVLink multicast needs fabric setup
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import argparse
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as dist
from tile import aio

ROOT = Path(__file__).resolve().parent.parent


def tile_graph(ops: int, numel: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """A Tile graph of ``ops`` chained all-reduces of zeros: (replay and wait, close)."""
    op: aio.DeviceOp[Any] = dist.all_reduce(tile.zeros(tile.bf16, [numel]))
    for _ in range(ops - 1):
        op = op.then(dist.all_reduce)
    graph = op.graph()

    def replay() -> None:
        graph.launch().sync_on(graph.context)

    return replay, graph.close


def tile_check(numel: int, g: dist.Group) -> None:
    """One Tile all-reduce of rank-dependent values gives the sum (on the path the process has selected)."""
    got = dist.all_reduce(tile.full(tile.bf16, [numel], float(g.rank + 1))).sync().to_numpy().astype(np.float32)
    want = g.world_size * (g.world_size + 1) / 2
    if not np.all(got == want):
        raise AssertionError(f"rank {g.rank}: all-reduce gave {np.unique(got)[:4]}, not {want}")


def torch_graph(
    torch: Any, ops: int, numel: int, g: dist.Group, one_shot: bool
) -> tuple[Callable[[], None], Callable[[], None]]:
    """A torch.cuda.graph of ``ops`` all-reduces (NCCL, or the symmetric-memory one-shot kernel), checked first."""
    x = torch.full((numel,), float(g.rank + 1), dtype=torch.bfloat16, device="cuda")
    if one_shot:
        import torch.distributed._symmetric_memory as symm

        name = torch.distributed.group.WORLD.group_name
        buf = symm.empty(numel, dtype=torch.bfloat16, device="cuda")
        symm.rendezvous(buf, name)

        def one() -> None:
            torch.ops.symm_mem.one_shot_all_reduce_copy_out(buf, x, "sum", name, x)
    else:

        def one() -> None:
            torch.distributed.all_reduce(x)

    one()
    torch.cuda.synchronize()
    if not bool((x == g.world_size * (g.world_size + 1) / 2).all()):
        raise AssertionError(f"rank {g.rank}: torch's all-reduce gave {x[:4].tolist()}")
    x.zero_()
    side = torch.cuda.Stream()  # warm up off the default stream, as torch.cuda.graph wants
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        one()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(ops):
            one()

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize()

    return replay, graph.reset


def timed(replay: Callable[[], None], barrier: Callable[[], None], replays: int, rounds: int) -> list[float]:
    """Seconds per replay of each round (round 0, the warm-up, dropped)."""
    out = []
    for r in range(rounds + 1):
        barrier()
        start = time.perf_counter()
        for _ in range(replays):
            replay()
        if r:
            out.append((time.perf_counter() - start) / replays)
    return out


def run(name: str, make: Callable[[], tuple[Callable[[], None], Callable[[], None]]], args: Any) -> dict[str, Any]:
    replay, close = make()
    try:
        secs = timed(replay, dist.barrier, args.replays, args.rounds)
    finally:
        close()
    med = float(np.median(secs))
    return {
        "contender": name,
        "us_per_all_reduce": round(med / args.ops * 1e6, 2),
        "us_per_replay": round(med * 1e6, 1),
        "min_us_per_all_reduce": round(min(secs) / args.ops * 1e6, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=128, help="all-reduces in the graph (a 64-layer model's decode step)")
    p.add_argument("--numel", type=int, default=5120, help="bf16 elements each (Qwen3-32B's hidden size)")
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="CPU interpreter + gloo, Tile only, 8 ops, no results file")
    args = p.parse_args()
    if "RANK" not in os.environ:
        raise SystemExit("run under torchrun: see this script's docstring")
    import torch

    if args.smoke:
        tile.set_backend("cpu")
        args.ops, args.numel, args.replays, args.rounds = 8, 256, 2, 2
    g = dist.init()
    on_gpu = g.backend == "nccl"
    contenders: list[tuple[str, Callable[[], tuple[Callable[[], None], Callable[[], None]]]]] = []

    def tile_nccl() -> tuple[Callable[[], None], Callable[[], None]]:
        dist.disable_one_shot()
        tile_check(args.numel, g)
        return tile_graph(args.ops, args.numel)

    def tile_one_shot() -> tuple[Callable[[], None], Callable[[], None]]:
        dist.enable_one_shot(2 * args.numel, unchecked=True)
        if (why := dist.one_shot_reason(tile.zeros(tile.bf16, [args.numel]))) is not None:
            raise RuntimeError(f"not on the one-shot path: {why}")
        tile_check(args.numel, g)
        return tile_graph(args.ops, args.numel)

    contenders.append(("tile_nccl", tile_nccl))
    if on_gpu:
        contenders += [
            ("torch_nccl", lambda: torch_graph(torch, args.ops, args.numel, g, one_shot=False)),
            ("tile_one_shot", tile_one_shot),
            ("torch_one_shot", lambda: torch_graph(torch, args.ops, args.numel, g, one_shot=True)),
        ]
    rows = []
    for name, make in contenders:
        try:
            row = run(name, make, args)
        except Exception as exc:  # (one contender failing, say no symmetric memory, leaves the rest)
            row = {"contender": name, "error": f"{type(exc).__name__}: {exc}"[:400]}
        rows.append(row)
        if g.rank == 0:
            print(json.dumps(row), flush=True)
    dist.disable_one_shot()
    info: dict[str, Any] = {"backend": g.backend, "world_size": g.world_size, "ops": args.ops, "numel": args.numel}
    info |= {"python": platform.python_version(), "torch": torch.__version__}
    info |= {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "NCCL_PROTO", "NCCL_ALGO", "NCCL_MAX_NCHANNELS")}
    if on_gpu:
        info |= {"device": torch.cuda.get_device_name(), "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    if g.rank == 0:
        print(json.dumps(info), flush=True)
        if not args.smoke:
            out = ROOT / "benchmarks" / "results" / "allreduce_graph.json"
            out.write_text(json.dumps({"info": info, "rows": rows}, indent=2) + "\n")
    dist.destroy()


if __name__ == "__main__":
    main()
