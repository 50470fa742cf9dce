# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""LayerNorm over rows with weight and bias; `eps` is a compile-time Const."""

import numpy as np

import tile.frontend as tile
from tile.frontend import Const, Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
BM: int
N: int


@tile.entry
def layernorm(
    z: Mut[Tensor[f32, ("BM", "N")]],
    x: Tensor[f32, (-1, "N")],
    w: Tensor[f32, "N"],
    b: Tensor[f32, "N"],
    eps: Const[float],
) -> None:
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    mean = tile.sum(t, axis=1, keepdims=True) / N
    d = t - mean
    var = tile.sum(d * d, axis=1, keepdims=True) / N
    z.store(d * tile.rsqrt(var + eps) * w.partition((N,)).load((0,)) + b.partition((N,)).load((0,)))


def main() -> None:
    rows, cols, eps = 128, 512, 1e-5
    x, w, b = tile.randn(f32, [rows, cols]), tile.rand(f32, [cols]), tile.rand(f32, [cols])
    xn, wn, bn = (t.to_numpy().astype(np.float64) for t in (x, w, b))
    mean = xn.mean(axis=1, keepdims=True)
    ref = (xn - mean) / np.sqrt(xn.var(axis=1, keepdims=True) + eps) * wn + bn
    z, *_ = layernorm(tile.empty(f32, [rows, cols]).partition([8, cols]), x, w, b, eps).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    print(f"layernorm: {rows}x{cols} on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
