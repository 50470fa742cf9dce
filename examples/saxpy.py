# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""SAXPY, z = a * x + y: a runtime scalar parameter next to tensors."""

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def saxpy(z: Mut[Tensor[f32, "B"]], a: f32, x: Tensor[f32, -1], y: Tensor[f32, -1]) -> None:
    z.store(a * tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


def main() -> None:
    n, a = 100_000, 2.5  # not a multiple of the tile: the last tile's store is masked
    x, y = tile.randn(f32, [n]), tile.randn(f32, [n])
    expected = a * x.to_numpy().astype(np.float64) + y.to_numpy()
    z, _, x, y = saxpy(tile.empty(f32, [n]).partition([1024]), a, x, y).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    print(f"saxpy: {n} elements (last tile partial) on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
