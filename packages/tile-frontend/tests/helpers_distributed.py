"""One rank of the 2-process collective checks: ``python helpers_distributed.py gloo|nccl`` under torchrun (or with
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by `run_ranks`). Each collective is checked against numpy; the process
prints ``rank R ok`` and exits 0 only when every check passed (an AssertionError exits 1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as d
from tile import aio
from tile.frontend import bf16, f32


def _checks(backend: str) -> None:
    g = d.init(backend)
    r, w, dev = g.rank, g.world_size, g.device
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    assert tile.zeros(f32, [1]).device == dev  # the rank's device is its default (NCCL) or the host (gloo)

    t = d.all_reduce(tile.full(f32, [1000], float(r + 1), device=dev)).sync()
    np.testing.assert_array_equal(t.to_numpy(), np.full(1000, w * (w + 1) / 2, np.float32))

    m = d.all_reduce(tile.from_numpy(np.arange(64) * (r + 1), dtype=bf16, device=dev), op="max").sync()
    np.testing.assert_array_equal(m.to_numpy().astype(np.float32), (np.arange(64) * w).astype(np.float32))

    b = d.broadcast(tile.from_numpy(np.arange(10) * (r + 1), dtype=f32, device=dev), src=1).sync()
    np.testing.assert_array_equal(b.to_numpy(), np.arange(10, dtype=np.float32) * 2)

    part = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r
    out, inp = d.all_gather(tile.empty(f32, [2 * w, 3], device=dev), tile.from_numpy(part, device=dev).share()).sync()
    expected = np.concatenate([np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * q for q in range(w)])
    np.testing.assert_array_equal(out.to_numpy(), expected)
    inp.unshare()

    whole = np.arange(4 * w * 5, dtype=np.float32).reshape(4 * w, 5)
    block, _ = d.reduce_scatter(
        tile.empty(f32, [4, 5], device=dev), tile.from_numpy(whole * (r + 1), device=dev)
    ).sync()
    total = whole * (w * (w + 1) / 2)
    np.testing.assert_array_equal(block.to_numpy(), total[4 * r : 4 * (r + 1)])

    # Composition: a collective chained on another's in-flight output runs after it, in stream order.
    twice = d.all_reduce(tile.ones(f32, [256], device=dev)).then(d.all_reduce).sync()
    np.testing.assert_array_equal(twice.to_numpy(), np.full(256, w * w, np.float32))

    if backend == "nccl":  # graph capture of an all-reduce, replayed three times
        graph = d.all_reduce(tile.ones(f32, [256], device=dev)).graph()
        for _ in range(3):
            graph.launch().sync_on(graph.context)
        graph.close()
        np.testing.assert_array_equal(graph.output.to_numpy(), np.full(256, float(w**3), np.float32))

    d.barrier()
    d.destroy()
    print(f"rank {r} ok", flush=True)


def _one_shot_checks() -> None:
    """The one-shot path (``tile.distributed.enable_one_shot``) on NCCL's group: the calls it serves give numpy's
    sums, NCCL's results for the same bf16 inputs, and the same again captured in a graph of a 128-call chain."""
    g = d.init("nccl")
    r, w, dev = g.rank, g.world_size, g.device
    d.enable_one_shot(1 << 16, unchecked=True)
    rng = np.random.default_rng(r)
    x = rng.standard_normal(5120).astype(np.float32)
    want = sum(np.random.default_rng(q).standard_normal(5120).astype(np.float32) for q in range(w))

    t = tile.from_numpy(x, device=dev)
    assert d.one_shot_reason(t) is None
    np.testing.assert_allclose(d.all_reduce(t).sync().to_numpy(), want, rtol=1e-6, atol=1e-5)

    fast = d.all_reduce(tile.from_numpy(x, dtype=bf16, device=dev)).sync().to_numpy().astype(np.float32)
    assert d.one_shot_reason(tile.ones(f32, [1 << 15], device=dev)) is not None  # 128 KiB: NCCL's
    d.disable_one_shot()
    slow = d.all_reduce(tile.from_numpy(x, dtype=bf16, device=dev)).sync().to_numpy().astype(np.float32)
    np.testing.assert_array_equal(fast, slow)  # two ranks: one bf16 rounding of the same sum either way
    d.enable_one_shot(1 << 16, unchecked=True)

    # Larger than the buffer and not a sum: NCCL's path, right results.
    big = d.all_reduce(tile.full(f32, [1 << 15], float(r + 1), device=dev)).sync()
    np.testing.assert_array_equal(big.to_numpy(), np.full(1 << 15, w * (w + 1) / 2, np.float32))
    top = d.all_reduce(tile.full(f32, [64], float(r), device=dev), op="max").sync()
    np.testing.assert_array_equal(top.to_numpy(), np.full(64, w - 1, np.float32))

    # A graph of a 64-call chain (a decode step has 128), replayed twice: 2**-64 times w ** 128 (exact in f32).
    op: aio.DeviceOp[Any] = d.all_reduce(tile.full(f32, [5120], 2.0**-64, device=dev))
    for _ in range(63):
        op = op.then(d.all_reduce)
    graph = op.graph()
    for _ in range(2):
        graph.launch().sync_on(graph.context)
    graph.close()
    np.testing.assert_array_equal(graph.output.to_numpy(), np.full(5120, 2.0**-64 * float(w) ** 128, np.float32))
    d.barrier()
    d.destroy()
    print(f"rank {r} ok", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(script: Path, args: list[str], world: int = 2, timeout: float = 240) -> list[str]:
    """Run ``script args`` as ``world`` ranks (torchrun's environment, on this host); return each rank's output.

    Raises AssertionError naming the rank and its output when one fails."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(world))
    env["NCCL_NVLS_ENABLE"] = "0"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    outputs = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"rank {r} timed out") from None
        assert p.returncode == 0, f"rank {r} failed (exit {p.returncode}):\n{out}"
        outputs.append(out)
    return outputs


if __name__ == "__main__":
    if sys.argv[1] == "gloo":
        tile.set_backend("cpu")
    if sys.argv[1] == "nccl-one-shot":
        _one_shot_checks()
    else:
        _checks(sys.argv[1])
