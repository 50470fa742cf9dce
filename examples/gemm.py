# ruff: noqa: F821, N803
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""GEMM in f16 and bf16 with f32 accumulation: partitions of the inputs, a K loop and `tile.mma`.

BM and BN come from the output's partition; BK is a Const parameter passed by keyword. `gemm_f16` and `gemm_bf16`
give each block one output tile; `gemm_persistent` is the fast form (about cuBLAS's speed on an H100 at 8192^3, see
benchmarks/bench_frontend.py): a fixed grid of one block per SM, each walking output tiles in grouped order.
"""

import sys

import numpy as np

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, bf16, f16, f32
from tile.frontend.kernel_types import PartitionView, Tile

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
BM: int
BN: int
T: tile.DType


@tile.function
def k_loop(px: PartitionView, py: PartitionView, bm: Tile, bn: Tile, acc: Tile) -> Tile:
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    return acc


@tile.entry
def gemm_f16(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]
) -> None:
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    z.store(k_loop(px, py, bm, bn, tile.zeros((BM, BN), f32)))


@tile.entry
def gemm_bf16(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[bf16, (-1, -1)], y: Tensor[bf16, (-1, -1)], BK: Const[int]
) -> None:
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    z.store(k_loop(px, py, bm, bn, tile.zeros((BM, BN), f32)))


@tile.entry(occupancy=1)
def gemm_persistent(
    z: Mut[Tensor[f32, ("BM", "BN")]],
    x: Tensor["T", (-1, -1)],
    y: Tensor["T", (-1, -1)],
    BK: Const[int],
    GROUP: Const[int],
) -> None:
    # Launched with a fixed grid: z.tiles() hands each block distinct output tiles whatever the grid (so the launch
    # stays race-free), GROUP rows of tiles at a time, so blocks running together share input tiles in L2.
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    for idx in z.tiles(group=GROUP):
        m, n = idx
        z.store(k_loop(px, py, m, n, tile.zeros((BM, BN), f32)), at=idx)


def blocks_per_device() -> int:
    """One block per SM on the GPU; a few on the CPU interpreter."""
    if tile.backend() != "gpu":
        return 4
    from tile import core

    return core.Device(0).sm_count


def run(kernel: tile.Kernel, dtype: object, size: int, tiles: tuple[int, int, int], **extra: int) -> float:
    bm, bn, bk = tiles
    x, y = tile.randn(dtype, [size, size]), tile.randn(dtype, [size, size])
    expected = x.to_numpy().astype(np.float64) @ y.to_numpy().astype(np.float64)
    z, x, y, *_ = kernel(tile.empty(f32, [size, size]).partition([bm, bn]), x, y, BK=bk, **extra).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)
    return float(np.abs(out - expected).max())


def main() -> None:
    big = tile.backend() == "gpu" and "--small" not in sys.argv
    size, tiles = (2048, (128, 128, 64)) if big else (256, (64, 64, 32))
    for name, kernel, dtype in (("f16", gemm_f16, f16), ("bf16", gemm_bf16, bf16)):
        err = run(kernel, dtype, size, tiles)
        print(f"gemm {name}: {size}x{size}x{size} on {tile.backend()}, max error {err:.1e}: OK")
    persistent = gemm_persistent.grid((blocks_per_device(),))
    for name, dtype in (("f16", f16), ("bf16", bf16)):
        err = run(persistent, dtype, size, tiles, GROUP=4)
        print(f"gemm persistent {name}: {size}x{size}x{size} on {tile.backend()}, max error {err:.1e}: OK")


if __name__ == "__main__":
    main()
