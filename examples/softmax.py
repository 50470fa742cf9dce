# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Row softmax: one block owns BM whole rows (N is a const generic taken from the input's static extent)."""

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
BM: int
N: int


@tile.entry
def softmax(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]) -> None:
    t = x.partition((BM, N), padding="neg_inf").load((tile.block_id()[0], 0))
    e = tile.exp(t - tile.max(t, axis=1, keepdims=True))
    z.store(e / tile.sum(e, axis=1, keepdims=True))


def main() -> None:
    rows, cols = 200, 256
    x = tile.randn(f32, [rows, cols])
    ref = x.to_numpy().astype(np.float64)
    ref = np.exp(ref - ref.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    z, x = softmax(tile.empty(f32, [rows, cols]).partition([16, cols]), x).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    print(f"softmax: {rows}x{cols} on {tile.backend()}, rows sum to 1: OK")


if __name__ == "__main__":
    main()
