"""All-reduce bus bandwidth through Tile tensors (`tile.distributed.all_reduce`) against the same NCCL all-reduce on
torch tensors, measured in the same processes, interleaved.

For each dtype (bf16, f32) and size (``--sizes`` MiB, default 1, 2, 4, ... 1024): a round times ``k`` back-to-back
in-place sum all-reduces and one host wait (``k`` = 256 MiB / size, 2 to 50), once through Tile (one ``.then()``
chain of ``k`` collective ops, built inside the clock: Tile's checks and moves are part of its cost) and once through
``torch.distributed.all_reduce`` on a torch tensor of the same size (then ``torch.cuda.synchronize``); ``--rounds``
rounds (default 7) after one warm-up round, alternating which contender goes first, each round starting at a
barrier; the median per contender is reported. Bus bandwidth is NCCL's convention, ``2 (n - 1) / n * bytes / time``
(the bytes each rank sends and receives in a ring). The tensors hold zeros, so sums never overflow.

Issue 19's bar: at 1 GiB the all-reduce through Tile tensors reaches at least 0.95 of the bus bandwidth of the same
all-reduce on torch tensors in the same run; each 1 GiB row also prints a ``bar`` line saying whether it does (and the
results file keeps them). ``--sizes 1024`` measures just that (well under a minute on 2 H200s).

Two GPUs (results to ``benchmarks/results/distributed.json``, rank 0 writes):
``NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_distributed.py``.
``--smoke`` runs small sizes on the CPU (interpreter backend, gloo) and writes nothing:
``TILE_INTERPRET=1 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_distributed.py --smoke``.
"""

from __future__ import annotations

import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before torch/NCCL start: NVLink multicast needs fabric setup

import argparse
import faulthandler
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as dist

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
BAR_BYTES, BAR_RATIO = 1024 * MIB, 0.95  # issue 19: Tile's bus bandwidth over torch's at 1 GiB


def bar(row: dict[str, Any]) -> dict[str, Any] | None:
    """Issue 19's verdict on a row (``None`` for rows of other sizes)."""
    if row["bytes"] != BAR_BYTES:
        return None
    ratio = row["tile_vs_torch"]
    return {
        "bar": f"tile busbw >= {BAR_RATIO} x torch at 1 GiB",
        "dtype": row["dtype"],
        "ratio": ratio,
        "pass": ratio >= BAR_RATIO,
    }


def tile_round(x: tile.Tensor, k: int) -> tuple[tile.Tensor, float]:
    start = time.perf_counter()
    op = dist.all_reduce(x)
    for _ in range(k - 1):
        op = op.then(dist.all_reduce)
    out = op.sync()
    return out, time.perf_counter() - start


def torch_round(torch: Any, t: Any, k: int, sync: Any) -> float:
    start = time.perf_counter()
    for _ in range(k):
        torch.distributed.all_reduce(t)
    sync()
    return time.perf_counter() - start


def bench(torch: Any, g: dist.Group, dtype: str, nbytes: int, rounds: int) -> dict[str, Any]:
    """One (dtype, size) row: seconds per all-reduce and bus bandwidth of both contenders (medians of ``rounds``)."""
    tdt = getattr(torch, {"bf16": "bfloat16", "f32": "float32"}[dtype])
    count = nbytes // (2 if dtype == "bf16" else 4)
    on_gpu = g.backend == "nccl"
    device = torch.device("cuda", g.device.ordinal) if on_gpu else torch.device("cpu")  # type: ignore[attr-defined]
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    x = tile.zeros(getattr(tile, dtype), [count])
    t = torch.zeros(count, dtype=tdt, device=device)
    k = max(2, min(50, 256 * MIB // nbytes))
    times: dict[str, list[float]] = {"tile": [], "torch": []}
    for r in range(rounds + 1):
        order = ("tile", "torch") if r % 2 else ("torch", "tile")
        for who in order:
            torch.distributed.barrier()
            sync()
            if who == "tile":
                x, sec = tile_round(x, k)
            else:
                sec = torch_round(torch, t, k, sync)
            if r:  # round 0 warms up (NCCL channels, Tile's first collective)
                times[who].append(sec / k)
    factor = 2 * (g.world_size - 1) / g.world_size
    row: dict[str, Any] = {"dtype": dtype, "bytes": nbytes, "ops_per_round": k}
    for who, secs in times.items():
        med = float(np.median(secs))
        row[who] = {"seconds": med, "busbw_GBps": factor * nbytes / med / 1e9}
    row["tile_vs_torch"] = row["tile"]["busbw_GBps"] / row["torch"]["busbw_GBps"]
    return row


def main() -> None:
    faulthandler.enable(all_threads=True)  # a fatal signal (SIGABRT from a C++ terminate) prints every thread's stack
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(str(1 << i) for i in range(11)), help="MiB, comma-separated")
    p.add_argument("--dtypes", default="bf16,f32")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--smoke", action="store_true", help="CPU interpreter + gloo, 64 KiB and 1 MiB, no results file")
    args = p.parse_args()
    if "RANK" not in os.environ:
        raise SystemExit(
            "run under torchrun: NCCL_NVLS_ENABLE=0 python -m torch.distributed.run --nproc-per-node 2 "
            "benchmarks/bench_distributed.py"
        )
    import torch

    sizes = [64 * 1024, MIB] if args.smoke else [int(float(s) * MIB) for s in args.sizes.split(",")]
    if args.smoke:
        tile.set_backend("cpu")
        args.rounds = 3
    g = dist.init()
    rows = []
    for dtype in args.dtypes.split(","):
        for nbytes in sizes:
            row = bench(torch, g, dtype, nbytes, args.rounds)
            rows.append(row)
            if g.rank == 0:
                print(json.dumps(row), flush=True)
                if (verdict := bar(row)) is not None:
                    print(json.dumps(verdict), flush=True)
    info: dict[str, Any] = {"backend": g.backend, "world_size": g.world_size, "python": platform.python_version()}
    info |= {"torch": torch.__version__, "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}
    if g.backend == "nccl":
        info |= {"device": torch.cuda.get_device_name(), "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    if g.rank == 0 and not args.smoke:
        out = ROOT / "benchmarks" / "results" / "distributed.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        bars = [v for v in map(bar, rows) if v is not None]
        out.write_text(json.dumps({"info": info, "rows": rows, "bars": bars}, indent=2) + "\n")
    if g.rank == 0:
        print(json.dumps(info))
    dist.destroy()


if __name__ == "__main__":
    main()
