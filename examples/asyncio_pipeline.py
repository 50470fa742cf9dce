# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""An asyncio pipeline: independent launches awaited concurrently, dependent ones in order.

`await op` does not block the event loop; each launch hands its tensors back only once its work is done, so the
next stage can only start from finished data. The input both branches read is a `Shared` tensor: launches do not
move it, so both can hold it at once, and `unshare()` gives it back once neither is pending.
"""

import asyncio
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def scale(z: Mut[Tensor[f32, "B"]], a: f32, x: Tensor[f32, -1]) -> None:
    z.store(a * tile.load_tile_like(x, z))


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]) -> None:
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


async def branch(a: float, x: tile.Shared, n: int) -> tile.Tensor:
    z, _, _ = await scale(tile.empty(f32, [n]).partition([256]), a, x)
    out: tile.Tensor = z.unpartition()
    return out


async def pipeline(n: int) -> np.ndarray[Any, Any]:
    x = tile.ones(f32, [n]).share()  # read by both branches while both are in flight
    left, right = await asyncio.gather(branch(2.0, x, n), branch(3.0, x, n))
    z, _, _ = await add(tile.empty(f32, [n]).partition([256]), left, right)
    x.unshare()  # no launch holds it any more
    result: np.ndarray[Any, Any] = z.unpartition().to_numpy()
    return result


def main() -> None:
    n = 4096
    out = asyncio.run(pipeline(n))
    np.testing.assert_array_equal(out, np.full(n, 5.0, np.float32))
    print(f"asyncio_pipeline: 2 concurrent branches + 1 join on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
