# ruff: noqa: F821
# Kernel-language source: shape strings such as "B" are const generics the compiler binds (undefined for Python),
# and uppercase names follow cuTile's convention; keep the strings quoted.
"""The permute-heads race from the cuTile Rust paper (sec. 3), in Python.

In cuTile Python a kernel may store at any index it computes, so a slip in the index math makes two blocks write
the same tile, and the output differs from run to run. Here an output is a partition and `store` takes no index:
each block can only write its own tile. Both racy versions below are rejected before anything runs; the safe
version permutes (H, S, D) -> (S, H, D) correctly.
"""

import numpy as np

import tile.frontend as tile
from tile.frontend import CompileError, Mut, Tensor, f32


@tile.entry
def permute_heads_racy(z: Mut[Tensor[f32, ("BS", 1, "D")]], x: Tensor[f32, (-1, -1, "D")]):
    s, h, _ = tile.block_id()
    t = x.partition((1, BS, D)).load((h, s, 0))
    z.store(tile.permute(t, (1, 0, 2)), (s, 0, 0))  # an index chosen by the block: the race of the paper


@tile.entry
def permute_heads(z: Mut[Tensor[f32, ("BS", 1, "D")]], x: Tensor[f32, (-1, -1, "D")]):
    s, h, _ = tile.block_id()
    t = x.partition((1, BS, D)).load((h, s, 0))
    z.store(tile.permute(t, (1, 0, 2)))  # the block's own tile, nothing else


def main() -> None:
    heads, seq, dim, bs = 4, 64, 32, 16
    x = tile.randn(f32, [heads, seq, dim])
    expected = x.to_numpy().transpose(1, 0, 2)

    try:
        permute_heads_racy(tile.empty(f32, [seq, heads, dim]).partition([bs, 1, dim]), x)
    except CompileError as err:
        print("racy version rejected at compile time:", str(err).splitlines()[0].split("error: ")[-1])

    buffer = np.zeros(heads * seq * dim, np.float32)  # in place: output and input are one buffer
    out = tile.from_dlpack(buffer).reshape(seq, heads, dim).partition([bs, 1, dim])
    try:  # the partition holds the buffer: a second borrow of it, to read it as the input, is refused
        permute_heads(out, tile.from_dlpack(buffer).reshape(heads, seq, dim))
    except tile.BorrowError as err:
        print("in-place version rejected before the launch:", str(err).split(", and")[0])

    z, x = permute_heads(tile.empty(f32, [seq, heads, dim]).partition([bs, 1, dim]), x).sync()
    np.testing.assert_array_equal(z.unpartition().to_numpy(), expected)
    print(f"permute_race: safe permute of {heads}x{seq}x{dim} on {tile.backend()}: OK")


if __name__ == "__main__":
    main()
