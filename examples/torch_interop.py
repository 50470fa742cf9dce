# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds, declared at module level
# (`B: int`, no value, which ruff does not count as a binding) for type checkers; uppercase names follow cuTile's
# convention. mypy reads the kernels through the plugin tile.frontend.mypy_plugin.
"""Interop: borrow a torch tensor (or, without torch, a numpy array) zero-copy with `tile.from_dlpack`, write it
from a kernel in place, and hand a Tile tensor back to torch through DLPack.

Borrowed memory takes part in the ownership checks by address range: a second borrow of the same buffer makes the
first one impossible to partition until it is dropped.
"""

from collections.abc import Callable
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import Mut, Tensor, f32

# Const generics: the compiler binds them from the kernels' annotations; declared here for type checkers.
B: int


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]) -> None:
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


def foreign(n: int) -> tuple[Any, Callable[[Any], np.ndarray[Any, Any]], str]:
    """A foreign array of n zeros, a function reading it back as numpy, and its library's name."""
    try:
        import torch
    except ImportError:
        if tile.backend() == "cpu":
            return np.zeros(n, np.float32), np.asarray, "numpy (torch is not installed)"
        import tile.core as tc  # any DLPack producer works; a raw tile.core buffer stands in for cupy here

        view = tc.DeviceBuffer.allocate(4 * n).view(np.float32, (n,))
        view.fill(0)
        return view, lambda v: v.to_numpy(), "a tile.core device buffer (torch is not installed)"
    device = "cuda" if tile.backend() == "gpu" else "cpu"
    return torch.zeros(n, dtype=torch.float32, device=device), lambda t: t.cpu().numpy(), "torch"


def main() -> None:
    n = 4096
    out, read, name = foreign(n)
    z = tile.from_dlpack(out)  # zero-copy borrow
    second = tile.from_dlpack(out)
    try:
        z.partition([512])
    except tile.BorrowError as err:
        print("rejected as expected:", str(err).split(":")[0])
    del second
    x, y = tile.ones(f32, [n]), tile.full(f32, [n], 2.0)
    _, x, y = add(z.partition([512]), x, y).sync()
    np.testing.assert_array_equal(read(out), np.full(n, 3.0, np.float32))  # written in place
    back = np.from_dlpack(x) if tile.backend() == "cpu" else None  # a Tile tensor seen by another library
    if back is not None:
        np.testing.assert_array_equal(back, np.ones(n, np.float32))
    print(f"torch_interop: {name} buffer written in place by a tile kernel on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
