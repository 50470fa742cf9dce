# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Capture a launch once as a graph (a CUDA graph on the GPU, a recorded host schedule on the CPU) and replay it.

Pointers are baked in at capture, so every replay reads and writes the same tensors: here each replay adds x into
the accumulator z. The graph owns the captured tensors until it is closed; closing hands them back.
"""

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def accumulate(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]) -> None:
    z.store(z.load() + tile.load_tile_like(x, z))


def main() -> None:
    n, replays = 8192, 10
    x = tile.arange(f32, n)
    graph = accumulate(tile.zeros(f32, [n]).partition([512]), x).graph()  # captured, not run
    for _ in range(replays):
        graph.launch().sync()
    z, x = graph.close()  # the graph owns its output until closed: replays and reads never overlap
    out = z.unpartition().to_numpy()
    np.testing.assert_array_equal(out, replays * np.arange(n, dtype=np.float32))
    print(f"graph_replay: {replays} replays of one captured launch on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
