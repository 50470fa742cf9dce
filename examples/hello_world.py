# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Hello from every tile block: `tile.print` runs on the device (or the interpreter) once per block."""

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, i32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def hello(z: Mut[Tensor[i32, "B"]]) -> None:
    bid = tile.block_id()[0]
    tile.print("hello from tile", bid, "of", tile.num_blocks()[0])
    z.store(tile.full((B,), bid, i32))


def main() -> None:
    blocks, size = 4, 8
    (z,) = hello(tile.zeros(i32, [blocks * size]).partition([size])).sync()
    out = z.unpartition().to_numpy()
    np.testing.assert_array_equal(out, np.repeat(np.arange(blocks), size))
    print(f"hello_world: {blocks} tiles each wrote their id on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
