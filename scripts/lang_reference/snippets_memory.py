"""Runnable examples of matmul, memory, grid, raw-pointer, debug ops, the methods, annotations and entry options.

Same contract as `lang_reference.snippets_math`: each script runs after the page's prelude on the CPU interpreter
and ends in an assertion against numpy. Keys: an `OPS` name, a `METHODS` row name (``partition_load``), ``"tile
methods"``, an annotation name (``Tensor``) or an entry topic (``entry``, ``by_arch``).
"""

from __future__ import annotations

__all__ = ["MEMORY_SNIPPETS", "PRINTS"]

# What the examples that print write to stdout on the CPU interpreter (the test compares it exactly).
PRINTS = {
    "print": "block 0 of 2\nblock 1 of 2\n",
    "printf": "block 0: [0.0, 1.0, 2.0, 3.0]\nblock 1: [4.0, 5.0, 6.0, 7.0]\n",
}

_ATOMIC = {
    "add": "a + v",
    "min": "np.minimum(a, v)",
    "max": "np.maximum(a, v)",
    "xchg": "v",
    "and": "a & v",
    "or": "a | v",
    "xor": "a ^ v",
}

_ATOMIC_TEMPLATE = """\
@tile.entry(unchecked=True)
def atomic_{op}_kernel(acc: Tensor[i32, -1], values: Tensor[i32, (8,)]):
    v = values.partition((8,)).load((0,))
    old = tile.atomic_{op}(acc.ptr() + tile.arange(8), v)  # returns the values before the update


a = np.array([5, 3, 0, 7, 12, 9, 1, 6], np.int32)
v = np.array([1, 4, 2, 7, 10, 3, 8, 6], np.int32)
acc, _ = atomic_{op}_kernel.grid((1,))(tile.from_numpy(a), tile.from_numpy(v)).sync()
np.testing.assert_array_equal(acc.to_numpy(), {expect})
"""

_OWN = {
    "mma": """\
@tile.entry
def gemm(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f16, (-1, -1)], y: Tensor[f16, (-1, -1)], BK: Const[int]):
    bm, bn, _ = tile.block_id()
    px, py = x.partition((BM, BK)), y.partition((BK, BN))
    acc = tile.zeros((BM, BN), f32)
    for k in range(px.num_tiles[1]):
        acc = tile.mma(px.load((bm, k)), py.load((k, bn)), acc)
    z.store(acc)


x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float16)
y = np.random.default_rng(1).standard_normal((32, 16)).astype(np.float16)
z, *_ = gemm(tile.zeros(f32, [16, 16]).partition([8, 8]), tile.from_numpy(x), tile.from_numpy(y), BK=16).sync()
want = x.astype(np.float32) @ y.astype(np.float32)
np.testing.assert_allclose(z.unpartition().to_numpy(), want, rtol=1e-3, atol=1e-3)
""",
    "matmul": """\
@tile.entry
def square(z: Mut[Tensor[f32, (8, 8)]], x: Tensor[f32, (8, 8)]):
    t = x.partition((8, 8)).load((0, 0))
    z.store(tile.matmul(t, t) - t @ t)  # `a @ b` is tile.matmul(a, b)


x = np.arange(64, dtype=np.float32).reshape(8, 8) / 64
z, _ = square(tile.zeros(f32, [8, 8]).partition([8, 8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.zeros((8, 8), np.float32))
""",
    "load_tile_like": """\
@tile.entry
def copy(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    z.store(tile.load_tile_like(x, z, latency=2))  # the (BM, BN) tile of x at this block's output tile


x = np.arange(24 * 16, dtype=np.float32).reshape(24, 16)
z, _ = copy(tile.zeros(f32, [24, 16]).partition([8, 8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x)
""",
    "partition": """\
@tile.entry
def shift_left(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    p = x.partition((B,), padding="nan")  # tiles of B; reads past the end give NaN
    z.store(p.load((tile.block_id()[0] + 1,)))  # the next block's tile of x


x = np.arange(16, dtype=np.float32)
z, _ = shift_left(tile.zeros(f32, [16]).partition([4]), tile.from_numpy(np.concatenate([x, x[:4]]))).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.roll(x, -4))
""",
    "partition_load": """\
@tile.entry
def transpose_tiles(z: Mut[Tensor[f32, ("B", "B")]], x: Tensor[f32, (-1, -1)]):
    bm, bn, _ = tile.block_id()
    p = x.partition((B, B), order=(1, 0))  # tiles of x.T, straight from memory
    z.store(p.load((bm, bn), latency=3, allow_tma=True))


x = np.arange(64, dtype=np.float32).reshape(8, 8)
z, _ = transpose_tiles(tile.zeros(f32, [8, 8]).partition([4, 4]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x.T)
""",
    "mut_load": """\
@tile.entry
def accumulate(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.load() + tile.load_tile_like(x, z))  # read back this block's own tile


x = np.arange(16, dtype=np.float32)
z, _ = accumulate(tile.full(f32, [16], 1.0).partition([8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x + 1)
""",
    "mut_store": """\
@tile.entry
def broadcast_row(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, -1]):
    row = x.partition((BN,)).load((tile.block_id()[1],))
    z.store(row.reshape((1, BN)))  # broadcast to the (BM, BN) tile; stores past the end are masked


x = np.arange(16, dtype=np.float32)
z, _ = broadcast_row(tile.zeros(f32, [6, 16]).partition([4, 8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.broadcast_to(x, (6, 16)))
""",
    "mut_tiles": """\
@tile.entry
def persistent_scale(z: Mut[Tensor[f32, ("BM", "BN")]], x: Tensor[f32, (-1, -1)]):
    for idx in z.tiles(group=2):  # the tiles this block owns, whatever the grid
        m, n = idx
        z.store(x.partition((BM, BN)).load((m, n)) * 2.0, at=idx)


x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
z, _ = persistent_scale.grid((3,))(tile.zeros(f32, [32, 16]).partition([8, 8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x * 2)
""",
    "mut_subtiles": """\
@tile.entry
def chunked_copy(z: Mut[Tensor[f32, (1, "N")]], x: Tensor[f32, (-1, -1)], BN: Const[int]):
    zs = z.subtiles((1, BN))  # this block's (1, N) tile, in (1, BN) chunks
    px = x.partition((1, BN))
    for j in range(zs.num_tiles[1]):
        zs.store(px.load((tile.block_id()[0], j)), (0, j))
        zs.store(zs.load((0, j)) + 1.0, (0, j))  # indices are relative to the own tile


x = np.arange(4 * 12, dtype=np.float32).reshape(4, 12)
z, *_ = chunked_copy(tile.zeros(f32, [4, 12]).partition([1, 16]), tile.from_numpy(x), BN=4).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x + 1)
""",
    "subtiles_store": """\
@tile.entry
def halves(z: Mut[Tensor[f32, (8,)]]):
    zs = z.subtiles((4,))
    zs.store(tile.zeros((4,), f32), (0,))  # the first half of this block's tile
    zs.store(tile.full((4,), 1.0, f32), (1,))


(z,) = halves(tile.zeros(f32, [16]).partition([8])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.tile(np.repeat([0.0, 1.0], 4), 2))
""",
    "subtiles_load": """\
@tile.entry
def swap_halves(z: Mut[Tensor[f32, (8,)]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z))
    zs = z.subtiles((4,), padding="zero")
    a, b = zs.load((0,)), zs.load((1,))  # sees this block's store above (one token chain)
    zs.store(b, (0,))
    zs.store(a, (1,))


x = np.arange(8, dtype=np.float32)
z, _ = swap_halves(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.roll(x, 4))
""",
    "tensor_subtiles": """\
@tile.entry
def bad(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(x.subtiles((B,)).load((0,)))  # an input has no owned tile


try:
    bad.compile(tile.zeros(f32, [8]).partition([8]), tile.zeros(f32, [8]))
    raise AssertionError("x.subtiles compiled")
except tile.CompileError as err:
    assert "partition" in str(err)
""",
    "tensor_gather": """\
@tile.entry
def embed(z: Mut[Tensor[f32, ("B", "D")]], table: Tensor[f32, (-1, -1)], ids: Tensor[i32, -1]):
    b = tile.block_id()[0]
    rows = ids.partition((B,)).load((b,)).reshape((B, 1))  # a tile of ids
    z.store(table.gather(rows, tile.arange(D), padding=0.0))  # (B, 1) and (D,) broadcast to (B, D)


table = np.arange(12, dtype=np.float32).reshape(3, 4)
ids = np.array([2, 0, -1, 7], np.int32)  # -1 and 7 are outside the table: those rows read the padding
z, _, _ = embed(tile.zeros(f32, [4, 4]).partition([4, 4]), tile.from_numpy(table), tile.from_numpy(ids)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), [table[2], table[0], [0] * 4, [0] * 4])
""",
    "mut_gather": """\
@tile.entry
def bad(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(z.gather(tile.arange(B)))  # other blocks may be writing z


try:
    bad.compile(tile.zeros(f32, [8]).partition([8]), tile.zeros(f32, [8]))
    raise AssertionError("z.gather compiled")
except tile.CompileError as err:
    assert "gather from an input" in str(err)
""",
    "ptr": """\
@tile.entry(unchecked=True)
def reverse(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.gather(x.ptr() + (x.extents[0] - 1 - tile.arange(B))))


x = np.arange(8, dtype=np.float32)
z, _ = reverse(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x[::-1])
""",
    "block_id": """\
@tile.entry
def block_ids(z: Mut[Tensor[i32, ("BM", "BN")]]):
    bm, bn, _ = tile.block_id()
    z.store(bm * 10 + bn)


(z,) = block_ids(tile.zeros(i32, [4, 6]).partition([2, 2])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy()[::2, ::2], [[0, 1, 2], [10, 11, 12]])
""",
    "num_blocks": """\
@tile.entry
def grid_size(z: Mut[Tensor[i32, "B"]]):
    z.store(tile.num_blocks()[0])


(z,) = grid_size(tile.zeros(i32, [12]).partition([4])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(12, 3))
""",
    "cdiv": """\
@tile.entry
def tile_count(z: Mut[Tensor[i32, (1,)]], x: Tensor[f32, -1]):
    z.store(tile.cdiv(x.extents[0], 4))


z, _ = tile_count(tile.zeros(i32, [1]).partition([1]), tile.zeros(f32, [10])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), [3])
assert tile.cdiv(10, 4) == 3  # on the host too: the grid of a kernel launched with .grid((tile.cdiv(n, B),))
""",
    "gather": """\
@tile.entry(unchecked=True)
def masked_gather(z: Mut[Tensor[f32, (8,)]], x: Tensor[f32, -1]):
    i = tile.arange(8) * 2
    z.store(tile.gather(x.ptr() + i, mask=i < x.extents[0], padding=-1.0))


x = np.arange(10, dtype=np.float32)
z, _ = masked_gather(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), [0, 2, 4, 6, 8, -1, -1, -1])
""",
    "scatter": """\
@tile.entry(unchecked=True)
def scatter_reversed(out: Tensor[f32, -1], x: Tensor[f32, (8,)]):
    t = x.partition((8,)).load((0,))
    tile.scatter(out.ptr() + (7 - tile.arange(8)), t)


x = np.arange(8, dtype=np.float32)
out, _ = scatter_reversed.grid((1,))(tile.zeros(f32, [8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(out.to_numpy(), x[::-1])
""",
    "atomic_cas": """\
@tile.entry(unchecked=True)
def compare_and_swap(acc: Tensor[i32, -1]):
    old = tile.atomic_cas(acc.ptr() + tile.arange(8), 0, 7)  # where acc is 0, write 7


a = np.array([0, 1, 0, 2, 0, 3, 0, 4], np.int32)
(acc,) = compare_and_swap.grid((1,))(tile.from_numpy(a)).sync()
np.testing.assert_array_equal(acc.to_numpy(), np.where(a == 0, 7, a))
""",
    "print": """\
@tile.entry
def hello(z: Mut[Tensor[i32, "B"]]):
    tile.print("block", tile.block_id()[0], "of", tile.num_blocks()[0])
    z.store(0)


(z,) = hello(tile.zeros(i32, [16]).partition([8])).sync()  # prints "block 0 of 2", "block 1 of 2"
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.zeros(16))
""",
    "printf": """\
@tile.entry
def show(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    tile.printf("block %d: %.1f\\n", tile.block_id()[0], t)  # a tile prints as [e0, e1, ...]
    z.store(t)


x = np.arange(8, dtype=np.float32)
z, _ = show(tile.zeros(f32, [8]).partition([4]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x)
""",
    "assert_": """\
@tile.entry
def checked_sqrt(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    t = tile.load_tile_like(x, z)
    tile.assert_(t >= 0.0, "negative input")
    z.store(tile.sqrt(t))


_, x = checked_sqrt(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(np.arange(8.0, dtype=np.float32))).sync()
try:
    checked_sqrt(tile.zeros(f32, [8]).partition([8]), tile.full(f32, [8], -1.0)).sync()
    raise AssertionError("the assertion did not trap")
except tile.KernelFaultError as err:
    assert "negative input" in str(err)
""",
    "static_assert": """\
@tile.entry
def halves(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    tile.static_assert(B % 2 == 0, "B must be even")
    z.store(tile.load_tile_like(x, z) * 0.5)


z, _ = halves(tile.zeros(f32, [8]).partition([4]), tile.ones(f32, [8])).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.full(8, 0.5))
""",
    "launch_dependents": """\
@tile.entry(pdl=True)
def scaled(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    tile.launch_dependents()  # the next PDL kernel may start now; it still waits for this one to complete
    z.store(tile.load_tile_like(x, z) * 2.0)


@tile.entry(pdl=True)
def shifted(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):  # reads what `scaled` wrote: safe, it waits at entry
    z.store(tile.load_tile_like(x, z) + 1.0)


y, _ = scaled(tile.zeros(f32, [8]).partition([4]), tile.from_numpy(np.arange(8, dtype=np.float32))).sync()
z, _ = shifted(tile.zeros(f32, [8]).partition([4]), y.unpartition()).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(8) * 2.0 + 1.0)
""",
    "tile methods": """\
@tile.entry
def methods(z: Mut[Tensor[f32, (4, 1)]], x: Tensor[f32, (4, 8)]):
    t = x.partition((4, 8)).load((0, 0))
    s = t.reshape((8, 4)).transpose().permute((1, 0)).reshape((4, 8))  # back to t
    r = s.sum(axis=1) + s.prod(axis=1) * 0.0 + s.max(axis=1) - s.min(axis=1)
    r = r + s.cumsum(1).extract((0, 0), (4, 1)).reshape((4,)) * 0.0 + s.cumprod(0).argmax(1).astype(f32) * 0.0
    r = r + s.argmin(1).astype(f32) * 0.0
    z.store(r.expand_dims(1).broadcast_to((4, 1)))


x = np.arange(32, dtype=np.float32).reshape(4, 8) / 8
z, _ = methods(tile.zeros(f32, [4, 1]).partition([4, 1]), tile.from_numpy(x)).sync()
np.testing.assert_allclose(z.unpartition().to_numpy()[:, 0], x.sum(1) + x.max(1) - x.min(1), rtol=1e-6)
""",
    "Tensor": """\
@tile.entry
def scale_any(z: Mut[Tensor["T", "B"]], x: Tensor["T", -1]):  # "T": a dtype generic, bound from x
    z.store(tile.load_tile_like(x, z) * 3)


z, _ = scale_any(tile.zeros(i32, [8]).partition([4]), tile.from_numpy(np.arange(8, dtype=np.int32))).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(8) * 3)
""",
    "Mut": """\
@tile.entry
def rows(z: Mut[Tensor[f32, ("BM", "N")]], x: Tensor[f32, (-1, "N")]):  # N: from x's second extent
    t = x.partition((BM, N)).load((tile.block_id()[0], 0))
    z.store(t - tile.max(t, axis=1, keepdims=True))


x = np.arange(32, dtype=np.float32).reshape(4, 8)
z, _ = rows(tile.zeros(f32, [4, 8]).partition([2, 8]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x - x.max(axis=1, keepdims=True))
""",
    "Const": """\
@tile.entry
def power(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], P: Const[int], HALF: Const[bool]):
    t = tile.load_tile_like(x, z)
    r = t
    for _ in range(P - 1):  # P is a compile-time int: one compiled kernel per value
        r = r * t
    if HALF:  # a compile-time branch: only one side is compiled
        r = r * 0.5
    z.store(r)


x = np.arange(8, dtype=np.float32)
z, *_ = power(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x), P=3, HALF=True).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x**3 * 0.5)
""",
    "Ptr": """\
@tile.entry(unchecked=True)
def read_pointer(z: Mut[Tensor[f32, "B"]], p: Ptr[f32]):
    z.store(tile.gather(p + tile.block_id()[0] * B + tile.arange(B)))


src = tile.from_numpy(np.arange(16, dtype=np.float32))
z, _ = read_pointer(tile.zeros(f32, [16]).partition([8]), src.data_ptr()).sync()  # src must outlive the launch
np.testing.assert_array_equal(z.unpartition().to_numpy(), np.arange(16))
""",
    "tuple": """\
@tile.entry
def grouped_gemm(
    Cs: tuple[Mut[Tensor[f32, ("BM", "BN")]], ...],  # one output partition per group
    As: tuple[Tensor[f16, (-1, -1)], ...],
    Bs: tuple[Tensor[f16, (-1, -1)], ...],
    BK: Const[int],
):
    for g in range(len(Cs)):  # len() is compile-time; this loop is unrolled, so Cs[g] is one tensor
        pa = As[g].partition((BM, BK), padding="zero")
        pb = Bs[g].partition((BK, BN), padding="zero")
        for idx in Cs[g].tiles():  # each block takes its share of this group's tiles
            acc = tile.zeros((BM, BN), f32)
            for k in range(pa.num_tiles[1]):
                acc = tile.mma(pa.load((idx[0], k)), pb.load((k, idx[1])), acc)
            Cs[g].store(acc, at=idx)


shapes = [(24, 16, 40), (8, 40, 8)]  # (M, N, K) of each group
a = [np.random.default_rng(m).standard_normal((m, k)).astype(np.float16) for m, n, k in shapes]
b = [np.random.default_rng(n).standard_normal((k, n)).astype(np.float16) for m, n, k in shapes]
cs = tuple(tile.zeros(f32, [m, n]).partition([16, 16]) for m, n, _ in shapes)
As, Bs = tuple(map(tile.from_numpy, a)), tuple(map(tile.from_numpy, b))
cs, As, Bs, _ = grouped_gemm.grid((4,))(cs, As, Bs, BK=16).sync()  # tuples come back as tuples
for c, x, y in zip(cs, a, b):
    np.testing.assert_allclose(c.unpartition().to_numpy(), x.astype(np.float64) @ y.astype(np.float64), atol=1e-4)
""",
    "entry": """\
@tile.entry(flush_to_zero=True, approx=True, occupancy=2, num_worker_warps=4)
def fast_div(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1], y: Tensor[f32, -1]):
    tx, ty = tile.load_tile_like(x, z), tile.load_tile_like(y, z)
    exact = tile.truediv(tx, ty, rounding="nearest_even", flush_to_zero=False)  # a call's own mode wins
    z.store(tx / ty - exact)  # `/` here is divf with approx and flush_to_zero


x, y = np.arange(1, 9, dtype=np.float32), np.full(8, 4.0, np.float32)
z, *_ = fast_div(tile.zeros(f32, [8]).partition([8]), tile.from_numpy(x), tile.from_numpy(y)).sync()
np.testing.assert_allclose(z.unpartition().to_numpy(), np.zeros(8), atol=1e-6)
""",
    "by_arch": """\
@tile.entry(occupancy=tile.by_arch(sm_90=2, sm_100=4, default=1), num_ctas=tile.by_arch(sm_100=2))
def tuned_copy(z: Mut[Tensor[f32, "B"]], x: Tensor[f32, -1]):
    z.store(tile.load_tile_like(x, z))


x = np.arange(8, dtype=np.float32)
z, _ = tuned_copy(tile.zeros(f32, [8]).partition([4]), tile.from_numpy(x)).sync()
np.testing.assert_array_equal(z.unpartition().to_numpy(), x)
""",
    "globals": """\
SUB = (2,)  # a value global: compiled in, checked on every call


@tile.entry
def fill_sub(z: Mut[Tensor[f32, "B"]]):
    zs = z.subtiles(SUB)
    for j in range(zs.num_tiles[0]):
        zs.store(tile.full(SUB, SUB[0], f32), (j,))


(z,) = fill_sub(tile.zeros(f32, [8]).partition([8])).sync()
out = z.unpartition()
assert (out.to_numpy() == 2).all()
SUB = (4,)  # another value: the next call compiles the kernel again
(z,) = fill_sub(out.partition([8])).sync()
out = z.unpartition()
assert (out.to_numpy() == 4).all()
SUB = [4]  # a list could change under the compiled kernel: refused
try:
    fill_sub(out.partition([8]))
    raise AssertionError("a list global was accepted")
except tile.CompileError as error:
    assert "reads the mutable global 'SUB' (a list)" in str(error)
""",
}


def _build() -> dict[str, str]:
    out = {f"atomic_{op}": _ATOMIC_TEMPLATE.format(op=op, expect=expect) for op, expect in _ATOMIC.items()}
    return {**out, **_OWN}


MEMORY_SNIPPETS: dict[str, str] = _build()
