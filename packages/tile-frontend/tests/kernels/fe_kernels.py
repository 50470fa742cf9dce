# mypy: ignore-errors
# ruff: noqa: F821, N803, PT009, UP037
# Kernel-language source, not typed Python: shape strings such as "B" are const generics that the compiler binds
# (so the names are undefined for Python and mypy), and uppercase parameters follow cuTile's convention.
"""Kernels the frontend tests launch (loaded by path from tests/helpers/fe_load.py)."""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import Const, Mut, Ptr, Tensor, bf16, f16, f32, i32


@tile.entry
def add(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry(unchecked=True)
def add_unchecked(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry(pdl=True)
def add_pdl(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tile.launch_dependents()  # the next PDL kernel may start; it still waits for this one to complete
    z.store(tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry
def axpy(z: Mut[Tensor[f32, "B"]], a: f32, x: Tensor[f32, -1], y: Tensor[f32, -1]):
    z.store(a * tile.load_tile_like(x, z) + tile.load_tile_like(y, z))


@tile.entry
def scale_int(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], n: int):
    z.store(tile.load_tile_like(x, z) * f32(n))


@tile.entry
def two_outputs(z1: Mut[Tensor[f32, "B"]], z2: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z1)
    z1.store(t)
    z2.store(t * 2.0)


@tile.entry
def static_input(z: Mut[Tensor[f32, 128]], x: Tensor[f32, 1024]):
    z.store(tile.load_tile_like(x, z))


@tile.entry
def generic_input(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, "N"]):
    z.store(tile.load_tile_like(x, z))


@tile.entry
def with_const(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], k: Const[int]):
    z.store(tile.load_tile_like(x, z) * k)


@tile.entry
def no_output(x: Tensor[f32, -1]):
    tile.assert_(tile.sum(x.partition((128,), padding="zero").load((tile.block_id()[0],))) >= 0.0, "negative")


@tile.entry
def raw_pointer(z: Mut[Tensor[f32, "B"]], p: Ptr[f32]):
    z.store(tile.zeros((B,), f32))


@tile.entry
def matrix_copy(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    z.store(tile.load_tile_like(x, z))


@tile.entry
def gemm(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


@tile.entry
def bad_kernel(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z) + undefined_name)


@tile.entry
def int_copy(z: Mut[Tensor[i32, "B"]], x: Tensor[i32, -1]):
    z.store(tile.load_tile_like(x, z))


@tile.entry
def accumulate(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.load() + tile.load_tile_like(x, z))


@tile.entry
def hello(z: Mut[Tensor[i32, "B"]]):
    bid = tile.block_id()[0]
    tile.print("hello from tile", bid)
    z.store(tile.full((B,), bid, i32))


@tile.entry
def gemm_bf16(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[bf16, (-1, -1)], y: Tensor[bf16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


@tile.entry
def copy_any(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1]):
    z.store(tile.load_tile_like(x, z))


@tile.entry(unchecked=True)
def read_pointer(z: Mut[Tensor[f32, "B"]], p: Ptr[f32]):
    z.store(tile.gather(p + tile.block_id()[0] * B + tile.arange(B)))


@tile.entry(unchecked=True)
def histogram(hist: Tensor[i32, -1], x: Tensor[i32, -1]):
    t = x.partition((128,), padding="zero").load((tile.block_id()[0],))
    tile.atomic_add(hist.ptr() + t, 1)


@tile.entry
def gemm_persistent(
    z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]
):
    px = x.partition((BM, BK), padding="zero")
    py = y.partition((BK, BN), padding="zero")
    for idx in z.tiles():
        acc = tile.zeros((BM, BN), f32)
        for k in range(px.num_tiles[1]):
            acc = tile.mma(px.load((idx[0], k)), py.load((k, idx[1])), acc)
        z.store(acc, at=idx)


# The permute-heads race of the cuTile Rust paper, written where safe Tile cannot stop it: an unchecked kernel
# scattering through a raw pointer, with the paper's slip (the head offset h * D is missing from the address), so
# the blocks of every head write the same elements. Only the interpreter's race detector catches it.
@tile.entry(unchecked=True)
def permute_heads_unchecked(out: Tensor[f32, (-1, -1, "D")], x: Tensor[f32, (-1, -1, "D")], BS: Const[int]):
    s, h, _ = tile.block_id()
    t = tile.reshape(x.partition((1, BS, D)).load((h, s, 0)), (BS, D))
    rows = tile.reshape(s * BS + tile.arange(BS), (BS, 1))
    cols = tile.reshape(tile.arange(D), (1, D))
    tile.scatter(out.ptr() + (rows * (x.shape[0] * D) + cols), t)


# The same scatter with the head offset in place: every element is written by exactly one block.
@tile.entry(unchecked=True)
def permute_heads_unchecked_fixed(out: Tensor[f32, (-1, -1, "D")], x: Tensor[f32, (-1, -1, "D")], BS: Const[int]):
    s, h, _ = tile.block_id()
    t = tile.reshape(x.partition((1, BS, D)).load((h, s, 0)), (BS, D))
    rows = tile.reshape(s * BS + tile.arange(BS), (BS, 1))
    cols = tile.reshape(tile.arange(D), (1, D))
    tile.scatter(out.ptr() + (rows * (x.shape[0] * D) + h * D + cols), t)


# Block 0 writes its tile, then raises a flag (an acq_rel atomic); block 1 takes the flag and then reads block 0's
# tile through a partition. The atomic orders the partition store and load of its own block (every token chain
# goes through it), so the two blocks do not race when block 1 sees the flag raised.
@tile.entry(unchecked=True)
def publish_then_read(z: Mut[Tensor[f32, "B"]], flag: Tensor[i32, -1]):
    if tile.block_id()[0] == 0:
        z.store(tile.full((B,), 7.0, f32))
        tile.atomic_xchg(flag.ptr() + tile.arange(1), 1)
    else:
        tile.atomic_add(flag.ptr() + tile.arange(1), 0)
        z.store(z.partition((B,)).load((0,)) + 1.0)


# The same read moved before taking the flag: nothing orders it after block 0's store.
@tile.entry(unchecked=True)
def read_then_take(z: Mut[Tensor[f32, "B"]], flag: Tensor[i32, -1]):
    if tile.block_id()[0] == 0:
        z.store(tile.full((B,), 7.0, f32))
        tile.atomic_xchg(flag.ptr() + tile.arange(1), 1)
    else:
        t = z.partition((B,)).load((0,))
        tile.atomic_add(flag.ptr() + tile.arange(1), 0)
        z.store(t + 1.0)


def doubled(z: Mut[Tensor[f32, "B"]], w: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    # Made a kernel by the tests with different entry options: the operator follows the kernel's default modes.
    t = tile.load_tile_like(x, z)
    z.store(t * 2.0)
    w.store(tile.mul(t, 2.0, flush_to_zero=False))


@tile.entry(occupancy=tile.by_arch(sm_90=2, default=1), num_ctas=tile.by_arch(sm_100=2), approx=True)
def transposed(z: Mut[Tensor[f32, ("BD", "BN")]], k: Tensor[f32, (-1, -1)]):
    z.store(k.partition((BD, BN), order=(1, 0), padding="zero").load(tile.block_id()[:2], latency=2))


@tile.entry
def row_mean_two_ranks(y: Mut[Tensor[f32, ("BM", 1)]], mean: Mut[Tensor[f32, "BM"]], x: Tensor[f32, (-1, "N")]):
    """Two outputs that agree on the grid at different ranks: y's grid [M, 1], mean's grid [M]."""
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    m = tile.sum(t, axis=1, keepdims=True) / N
    y.store(m)
    mean.store(m.reshape((BM,)))


@tile.entry
def scale_mixed(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], flag: bool, n: tile.u32, m: int, a: tile.f64):  # noqa: PLR0917
    # One scalar of each kind (the launch plan decides plain values of these without the check: test_frontend_plan)
    z.store(tile.load_tile_like(x, z) * f32(n) * f32(m) * f32(a))
