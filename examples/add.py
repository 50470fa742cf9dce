# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Add two vectors: the cuTile Rust README example in Python."""

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]) -> None:
    tx = tile.load_tile_like(x, z)  # the tile of x at this block's output position
    ty = tile.load_tile_like(y, z)
    z.store(tx + ty)  # a block can only store its own tile


def main() -> None:
    n = 1 << 16
    x = tile.rand(f32, [n])
    y = tile.rand(f32, [n])
    expected = x.to_numpy() + y.to_numpy()
    z = tile.zeros(f32, [n]).partition([1024])  # grid (64, 1, 1) and B = 1024 inferred
    z, x, y = add(z, x, y).sync()  # compiles on first use; hands everything back when done
    out = z.unpartition().to_numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    print(f"add: {n} elements on {tile.backend()}, max error {np.abs(out - expected).max():.1e}: OK")


if __name__ == "__main__":
    main()
