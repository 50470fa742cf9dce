"""All-gather + GEMM across processes (cuTile Python's AllGatherMatmul): each rank holds a block of rows of A, the
ranks all-gather A, and each computes C = A @ B with the GEMM of ``gemm.py``, checked against the same GEMM on the
whole A computed on one device (and against numpy).

Two GPUs:   NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 examples/allgather_gemm.py
CPU, gloo:  TILE_INTERPRET=1 torchrun --nproc-per-node 2 examples/allgather_gemm.py
Alone (``python examples/allgather_gemm.py``) it runs as a group of one (gloo or NCCL through a local store); without
torch it runs as one process without a collective, and says so.

The all-gather is a ``tile.aio`` op: the GEMM is chained on it with ``.then``, so it runs after the gather in stream
order, taking the gathered A while it is still in flight (only a launch may), with no host synchronisation between.
"""

import importlib
import importlib.util
import os
import sys
import tempfile
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as d
from tile.frontend import f16, f32

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
gemm_f16: Any = importlib.import_module("gemm").gemm_f16  # the kernel of the example next to this one


def gemm(a: tile.Tensor, b: tile.Tensor | tile.Shared, tiles: tuple[int, int, int], device: object) -> np.ndarray:
    bm, bn, bk = tiles
    c = tile.empty(f32, [a.shape[0], b.shape[1]], device=device).partition([bm, bn])
    done, *_ = gemm_f16(c, a, b, BK=bk).sync()
    result: np.ndarray = done.unpartition().to_numpy()
    return result


def main() -> None:
    big = tile.backend() == "gpu"
    m, n, k, tiles = (4096, 4096, 4096, (128, 128, 64)) if big else (128, 64, 64, (32, 32, 32))
    rng = np.random.default_rng(0)  # every rank draws the same A and B: each can check against the whole
    a_all = rng.standard_normal((m, k)).astype(np.float16)
    b_all = rng.standard_normal((k, n)).astype(np.float16)

    if importlib.util.find_spec("torch") is None:
        rank, world, device, how = 0, 1, None, "no torch: one process, no collective"
    else:
        alone = "RANK" not in os.environ
        store = f"file://{tempfile.mkdtemp()}/store" if alone else None
        g = d.init(init_method=store, rank=0 if alone else None, world_size=1 if alone else None)
        rank, world, device, how = g.rank, g.world_size, g.device, f"{g.backend}, {g.world_size} rank(s)"
    rows = m // world
    a_mine = tile.from_numpy(a_all[rank * rows : (rank + 1) * rows], device=device)
    b = tile.from_numpy(b_all, device=device).share()  # read by the GEMMs below; never moved by them
    bm, bn, bk = tiles

    c = tile.empty(f32, [m, n], device=device).partition([bm, bn])
    if device is None:  # one process: its rows are all of A
        c, *_ = gemm_f16(c, a_mine, b, BK=bk).sync()
    else:
        gathered = tile.empty(f16, [m, k], device=device)
        op = d.all_gather(gathered, a_mine).then(lambda out: gemm_f16(c, out[0], b, BK=bk))
        c, *_ = op.sync()
    out = c.unpartition().to_numpy()

    single = gemm(tile.from_numpy(a_all, device=device), b, tiles, device)  # the whole A, one device
    np.testing.assert_array_equal(out, single)
    expected = a_all.astype(np.float64) @ b_all.astype(np.float64)
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-2)
    if device is not None:
        d.destroy()
    if rank == 0:
        print(f"all-gather + gemm {m}x{n}x{k} ({how}) on {tile.backend()}, equal to one device's result: OK")


if __name__ == "__main__":
    main()
