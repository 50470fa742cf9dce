"""Host cost per collective: a ``.then()`` chain of Tile all-reduces against the same all-reduces on torch tensors, in
one process (world size 1), so the number is the per-op host overhead, not communication.

For each size (``--sizes`` MiB, default 1 and 256): ``--rounds`` rounds of ``--ops`` back-to-back
in-place sum all-reduces and one host wait, through Tile (one chain built inside the clock, as
``benchmarks/bench_distributed.py`` does) and through ``torch.distributed.all_reduce`` (then one synchronize);
then a cProfile of one Tile chain (top 20 by cumulative time) unless ``--no-profile``. Each row has the median
and the minimum round of both (the minimum is the robust one on a busy host).

One GPU (NCCL): ``python benchmarks/bench_collective_overhead.py``.
The CPU (gloo, host tensors): ``python benchmarks/bench_collective_overhead.py --cpu`` (torch with gloo installed).
"""

from __future__ import annotations

import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before torch/NCCL start: NVLink multicast needs fabric setup

import argparse
import cProfile
import io
import json
import pstats
import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_distributed import tile_round, torch_round  # the same chains bench_distributed.py times

MIB = 1 << 20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="host tensors and gloo (the CPU backend)")
    p.add_argument("--sizes", default="1,256", help="MiB, comma-separated")
    p.add_argument("--ops", type=int, default=50, help="all-reduces per round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--no-profile", action="store_true")
    args = p.parse_args()
    if "RANK" not in os.environ:  # one process: its own group
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    import torch

    if args.cpu:
        tile.set_backend("cpu")
    g = dist.init()
    on_gpu = g.backend == "nccl"
    device = torch.device("cuda", g.device.ordinal) if on_gpu else torch.device("cpu")  # type: ignore[attr-defined]
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    for mib in (float(s) for s in args.sizes.split(",")):
        count = int(mib * MIB) // 4
        x = tile.zeros(tile.f32, [count])
        t = torch.zeros(count, dtype=torch.float32, device=device)
        x, _ = tile_round(x, args.ops)  # warm-up: NCCL channels, Tile's first collective, caches
        torch_round(torch, t, args.ops, sync)
        times: dict[str, list[float]] = {"tile": [], "torch": []}
        for r in range(args.rounds):
            for who in ("tile", "torch") if r % 2 else ("torch", "tile"):
                if who == "tile":
                    x, sec = tile_round(x, args.ops)
                else:
                    sec = torch_round(torch, t, args.ops, sync)
                times[who].append(sec / args.ops)
        row: dict[str, Any] = {"backend": g.backend, "MiB": mib, "ops": args.ops}
        row |= {f"{who}_us_per_op": round(float(np.median(v)) * 1e6, 1) for who, v in times.items()}
        row |= {f"{who}_min_us": round(min(v) * 1e6, 1) for who, v in times.items()}  # (robust on a shared host)
        row["tile_minus_torch_us"] = round(row["tile_us_per_op"] - row["torch_us_per_op"], 1)
        print(json.dumps(row), flush=True)
        if not args.no_profile:
            prof = cProfile.Profile()
            prof.enable()
            x, _ = tile_round(x, args.ops)
            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(20)
            print(out.getvalue(), flush=True)
        del x
    dist.destroy()


if __name__ == "__main__":
    main()
