# ruff: noqa: F821, N803
# Kernel-language source: shape strings such as "BM" are const generics the compiler binds, declared at module level
# (`BM: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""RMSNorm in column chunks: each block owns rows (BM, NT) of the output and walks them in (BM, BN) sub-tiles.

The first loop accumulates the sum of squares chunk by chunk; the second stores the normalised chunks through
``z.subtiles(...)``, whose indices are relative to the block's own tile. A loop over ``range(zs.num_tiles[1])`` is
proven in range, so the kernel carries no index check; the last chunk of a row (1000 is not a multiple of 256) is
masked, and no index can reach another block's rows.
"""

import numpy as np

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32

# Const generics: the compiler binds them from the kernel's annotations; declared here for type checkers.
BM: int
NT: int


@tile.entry
def rmsnorm(z: Mut[Tensor[f32, ("BM", "NT")]], x: Tensor[f32, (-1, -1)], w: Tensor[f32, -1], BN: Const[int]) -> None:
    bm = tile.block_id()[0]
    zs = z.subtiles((BM, BN))  # this block's (BM, NT) tile, in (BM, BN) chunks
    px = x.partition((BM, BN), padding="zero")
    pw = w.partition((BN,), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for j in range(zs.num_tiles[1]):  # the chunks of the own tile that touch the tensor
        t = px.load((bm, j))
        acc = acc + t * t
    r = tile.rsqrt(tile.sum(acc, axis=1, keepdims=True) / x.extents[1].astype(f32) + 1e-6)
    for j in range(zs.num_tiles[1]):
        zs.store(px.load((bm, j)) * r * pw.load((j,)).reshape((1, BN)), (0, j))


def main() -> None:
    rows, cols = 100, 1000
    x, w = tile.randn(f32, [rows, cols]), tile.rand(f32, [cols])
    xn, wn = (t.to_numpy().astype(np.float64) for t in (x, w))
    ref = xn / np.sqrt((xn * xn).mean(axis=1, keepdims=True) + 1e-6) * wn
    z, *_ = rmsnorm(tile.empty(f32, [rows, cols]).partition([4, 1024]), x, w, BN=256).sync()
    np.testing.assert_allclose(z.unpartition().to_numpy(), ref, rtol=1e-4, atol=1e-4)
    print(f"rmsnorm_chunked: {rows}x{cols} in chunks of 256 on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
