"""The interpreter ops no other test reads the output of, each against a numpy formula written here.

Every check names, in its docstring, a mutant of the interpreter it kills (tried by hand: edit the op's handler,
run this file, see the check fail, restore). `test_ir_interp_op_registry.py` makes sure every op of the
interpreter's table has such a check somewhere.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tile.ir import (
    DYNAMIC,
    Builder,
    Function,
    FunctionType,
    Module,
    PartitionViewType,
    PointerAttr,
    PointerType,
    TensorViewType,
    Value,
    f32,
    i8,
    i32,
    i64,
    interp,
    ptr,
    scalar,
    tile,
)

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))

from helpers_ir_interp_ops import I32, Arr, binary, run_ops, run_with_pointers, unary

INTS = np.array([7, -7, 0, -128, 127, 1, -1, 5], np.int8)
OTHER = np.array([2, 9, -3, 1, -128, 1, 127, -6], np.int8)


def _wrap(values: Arr, dtype: type[np.generic]) -> list[int]:
    """Two's-complement wrap of exact Python integers to `dtype` (the reference for signless integers)."""
    bits = np.dtype(dtype).itemsize * 8
    return [((int(v) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for v in values]


@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_negi_and_absi_wrap(dtype: type[np.generic]) -> None:
    """negi is -x and absi |x|, both wrapping at the minimum (-(-128) is -128 in i8).

    Kills: negi computing abs(x) (-7 would give 7), absi computing -x, either saturating at the minimum."""
    x = INTS.astype(dtype)
    if dtype is np.int32:
        x[3] = np.iinfo(np.int32).min
    assert unary("negi", x).tolist() == _wrap(np.array([-int(v) for v in x], object), dtype)
    assert unary("absi", x).tolist() == _wrap(np.array([abs(int(v)) for v in x], object), dtype)


def test_fpowi_raises_to_signed_integer_powers() -> None:
    """fpowi(x, n) = x**n for integer n, negative n included, x**0 = 1 (also for 0).

    Kills: fpowi computing x**(n+1), or |n|, or ignoring n's sign."""
    x = np.array([1.5, -2.0, 0.5, 3.0, -1.25, 2.0, 10.0, 0.0], np.float32)
    n = np.array([0, 1, 2, 3, -1, -2, 5, 0], np.int32)
    got = run_ops(lambda b, t: b.fpowi(t[0], t[1]), [x, n], np.zeros(8, np.float32))
    expect = [float(v) ** int(e) for v, e in zip(x.astype(np.float64), n, strict=True)]
    np.testing.assert_allclose(got, np.array(expect, np.float32), rtol=2e-7)


def test_subi_xori_mini_are_signless() -> None:
    """subi wraps, xori is bitwise, mini compares as signed or unsigned by its attribute.

    Kills: subi as b - a, xori as or, mini ignoring `signedness` (or returning the maximum)."""
    assert binary("subi", INTS, OTHER).tolist() == _wrap(INTS.astype(np.int64) - OTHER.astype(np.int64), np.int8)
    assert binary("xori", INTS, OTHER).tolist() == [int(a) ^ int(b) for a, b in zip(INTS, OTHER, strict=True)]
    assert binary("mini", INTS, OTHER, signedness="signed").tolist() == [
        min(int(a), int(b)) for a, b in zip(INTS, OTHER, strict=True)
    ]
    unsigned = [min(int(a) & 0xFF, int(b) & 0xFF) for a, b in zip(INTS, OTHER, strict=True)]
    assert binary("mini", INTS, OTHER, signedness="unsigned").tolist() == _wrap(np.array(unsigned, object), np.int8)


@pytest.mark.parametrize(("name", "ref"), [("cosh", np.cosh), ("sinh", np.sinh), ("tan", np.tan)])
def test_hyperbolic_and_tangent_match_float64(name: str, ref: np.ufunc) -> None:
    """Kills: one of these mapped to another function (cosh as sinh, tan as sin...)."""
    x = np.linspace(-1.4, 1.4, 16, dtype=np.float32)
    np.testing.assert_allclose(unary(name, x), ref(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_insert_writes_the_piece_at_its_tile_index() -> None:
    """insert(src, dst, [i, j]) replaces the piece at tile index (i, j) (element offset (i*h, j*w)), nothing else.

    Kills: indices taken as element offsets, the destination modified in place, the piece not written."""
    dst = np.arange(8, dtype=np.float32).reshape(2, 4)
    src = np.array([[-1.0, -2.0]], np.float32)

    def build(b: Builder, t: list[Value]) -> Value:
        inserted = b.insert(t[1], t[0], [b.constant(1, I32), b.constant(1, I32)])
        return b.addf(inserted, t[0])  # the destination tile is still the original

    expect = dst.copy()
    expect[1:2, 2:4] = src
    np.testing.assert_array_equal(run_ops(build, [dst, src], np.zeros((2, 4), np.float32)), expect + dst)


def test_pack_and_unpack_reinterpret_little_endian_bytes() -> None:
    """pack gives the bytes of the tile (little endian, element order); unpack reads them back.

    Kills: pack converting values (1.5 -> 1) instead of reinterpreting, unpack reversing the byte order."""
    x = np.array([1.5, -2.0, 3.25e-3, 65504.0], np.float32)
    packed = run_ops(lambda b, t: b.pack(t[0], result_type=tile((16,), i8)), [x], np.zeros(16, np.int8))
    expect = [b - 256 if b > 127 else b for v in x.tolist() for b in np.float32(v).tobytes()]
    assert packed.tolist() == expect
    raw = np.array(expect, np.int8)
    unpacked = run_ops(lambda b, t: b.unpack(t[0], result_type=tile((4,), f32)), [raw], np.zeros(4, np.float32))
    assert unpacked.tolist() == x.tolist()


def _e8m0(exponents: Arr) -> Arr:
    """E8M0 scale factors 2**e, built from their bit pattern (biased exponent e + 127)."""
    return (np.asarray(exponents) + 127).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def test_mmaf_scaled_scales_each_k_block_of_both_operands() -> None:
    """acc + sum_k (a[m,k] * 2**sa[m, k//32]) * (b[k,n] * 2**sb[k//32, n]), in f32.

    Kills: scales ignored, a scale applied along the wrong axis or to the wrong K block, the accumulator dropped."""
    rng = np.random.default_rng(7)
    m, k, n = 16, 64, 16
    a = rng.uniform(-2, 2, (m, k)).astype(ml_dtypes.float8_e4m3fn)
    bm = rng.uniform(-2, 2, (k, n)).astype(ml_dtypes.float8_e4m3fn)
    ea, eb = rng.integers(-3, 4, (m, k // 32)), rng.integers(-3, 4, (k // 32, n))
    acc = rng.standard_normal((m, n)).astype(np.float32)
    got = run_ops(
        lambda b, t: b.mmaf_scaled(t[0], t[1], t[2], t[3], t[4]),
        [a, bm, acc, _e8m0(ea), _e8m0(eb)],
        np.zeros((m, n), np.float32),
    )
    lhs = a.astype(np.float64) * np.ldexp(1.0, np.repeat(ea, 32, axis=1))
    rhs = bm.astype(np.float64) * np.ldexp(1.0, np.repeat(eb, 32, axis=0))
    np.testing.assert_allclose(got, lhs @ rhs + acc, rtol=1e-5, atol=1e-5)


def _pointers(b: Builder, base: Value, elem: PointerType, count: int) -> Value:
    """The tile of pointers base + 0, base + 1, ... base + count - 1."""
    one = b.reshape(base, result_type=tile((1,), elem))
    return b.offset(b.broadcast(one, result_type=tile((count,), elem)), b.iota(result_type=tile((count,), i32)))


def test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets() -> None:
    """ptr_to_int(base + i) - ptr_to_int(base) = 4 i for f32; loading through ptr_to_ptr<i32> gives the bits.

    Kills: ptr_to_int returning element indices, ptr_to_ptr converting the pointee's values."""
    x = np.array([1.0, -2.5, 3.0, 0.5], np.float32)

    def addresses(b: Builder, bases: list[Value], t: list[Value]) -> Value:
        ints = b.ptr_to_int(_pointers(b, bases[0], ptr(f32), 4), result_type=tile((4,), i64))
        base = b.broadcast(b.reshape(bases[0], result_type=tile((1,), ptr(f32))), result_type=tile((4,), ptr(f32)))
        return b.subi(ints, b.ptr_to_int(base, result_type=tile((4,), i64)))

    assert run_with_pointers(addresses, [x], np.zeros(4, np.int64)).tolist() == [0, 4, 8, 12]

    def bits(b: Builder, bases: list[Value], t: list[Value]) -> Value:
        as_int = b.ptr_to_ptr(_pointers(b, bases[0], ptr(f32), 4), result_type=tile((4,), ptr(i32)))
        loaded, _ = b.load_ptr_tko(as_int, None, None, b.make_token())
        return loaded

    assert run_with_pointers(bits, [x], np.zeros(4, np.int32)).tolist() == x.view(np.int32).tolist()


def test_int_to_ptr_inverts_ptr_to_int() -> None:
    """Loading through int_to_ptr(ptr_to_int(p)) reads what p points at.

    Kills: int_to_ptr scaling the integer (to or from element units), ptr_to_int dropping the offset."""
    x = np.array([1.0, -2.5, 3.0, 0.5], np.float32)

    def build(b: Builder, bases: list[Value], t: list[Value]) -> Value:
        ints = b.ptr_to_int(_pointers(b, bases[0], ptr(f32), 4), result_type=tile((4,), i64))
        back = b.int_to_ptr(b.addi(ints, b.constant(4, tile((4,), i64))), result_type=tile((4,), ptr(f32)))
        mask = b.cmpi(b.iota(result_type=tile((4,), i32)), b.constant(3, tile((4,), i32)),
                      comparison_predicate="less_than", signedness="signed")  # fmt: skip
        loaded, _ = b.load_ptr_tko(back, mask, b.constant(9.0, tile((4,), f32)), b.make_token())
        return loaded

    assert run_with_pointers(build, [x], np.zeros(4, np.float32)).tolist() == [-2.5, 3.0, 0.5, 9.0]


def test_alloca_gives_each_allocation_its_own_scratch() -> None:
    """Two allocas are distinct buffers: what is stored through one is read back, untouched by the other.

    Kills: every alloca returning the same buffer (the second store would overwrite the first), an alloca too
    small for num_elem (an out-of-bounds fault)."""
    x = np.array([1.0, -2.5, 3.0, 0.5], np.float32)

    def build(b: Builder, bases: list[Value], t: list[Value]) -> Value:
        first = b.alloca(num_elem=4, alignment=16, result_type=scalar(ptr(f32)))
        second = b.alloca(num_elem=4, alignment=16, result_type=scalar(ptr(f32)))
        p, q = _pointers(b, first, ptr(f32), 4), _pointers(b, second, ptr(f32), 4)
        tok = b.store_ptr_tko(p, t[0], None, b.make_token())
        tok = b.store_ptr_tko(q, b.negf(t[0]), None, tok)
        loaded, _ = b.load_ptr_tko(p, None, None, tok)
        return loaded

    assert run_with_pointers(build, [x], np.zeros(4, np.float32)).tolist() == x.tolist()


def test_for_runs_lower_to_upper_by_step_carrying_values() -> None:
    """for iv in [1, 7) step 2 runs iv = 1, 3, 5: acc = x + 3 x + (1 + 3 + 5).

    Kills: an inclusive upper bound, step ignored, the carried value reset each iteration."""
    x = np.array([1.0, 2.0, -4.0, 0.5], np.float32)

    def build(b: Builder, t: list[Value]) -> Value:
        one, seven, two = (b.constant(v, I32) for v in (1, 7, 2))
        with b.for_(one, seven, two, [t[0]]) as loop:
            iv = b.itof(loop.iv, signedness="signed", result_type=scalar(f32))
            ivs = b.broadcast(b.reshape(iv, result_type=tile((1,), f32)), result_type=tile((4,), f32))
            b.continue_([b.addf(b.addf(loop.args[0], t[0]), ivs)])
        return loop.results[0]

    assert run_ops(build, [x], np.zeros(4, np.float32)).tolist() == (4 * x + 9).tolist()


def test_get_num_tile_blocks_is_the_grid_in_every_block() -> None:
    """Every block of a (3, 2, 1) grid sees (3, 2, 1); block (x, y) writes row x + 3 y.

    Kills: get_num_tile_blocks returning the block id, or its axes in another order."""
    tv_t = TensorViewType(i32, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))
    fn = Function("k", FunctionType((scalar(ptr(i32)), I32, I32, I32)))
    b = Builder(fn.body)
    base, rows, cols, stride = fn.params
    tv = b.make_tensor_view(base, [rows, cols], [stride], result_type=tv_t)
    view = b.make_partition_view(tv, result_type=PartitionViewType((1, 3), tv_t, (0, 1)))
    bx, by, _ = b.get_tile_block_id()
    counts = [b.reshape(v, result_type=tile((1, 1), i32)) for v in b.get_num_tile_blocks()]
    row = b.cat(b.cat(counts[0], counts[1], dim=1, result_type=tile((1, 2), i32)), counts[2], dim=1,
                result_type=tile((1, 3), i32))  # fmt: skip
    index = b.addi(bx, b.muli(by, b.constant(3, I32)))
    b.store_view_tko(row, view, [index, b.constant(0, I32)], b.make_token())
    b.return_()
    out = np.zeros((6, 3), np.int32)
    interp.launch(Module([fn]), (3, 2, 1), [out, 6, 3, 3])
    assert out.tolist() == [[3, 2, 1]] * 6


MULTICAST = PointerType(i32, ptr_attr=PointerAttr.MULTICAST)


def _multicast_kernel(body: Callable[[Builder, Value, Value], None]) -> Module:
    """A kernel over a multicast i32 buffer (one member: this process) and a plain i32 output, 16 each."""
    fn = Function("k", FunctionType((scalar(MULTICAST), I32, scalar(ptr(i32)), I32)))
    b = Builder(fn.body)
    mc, n, out, m = fn.params
    mc_t = TensorViewType(i32, (DYNAMIC,), (1,), ptr_attr=PointerAttr.MULTICAST)
    out_t = TensorViewType(i32, (DYNAMIC,), (1,))
    mc_view = b.make_partition_view(b.make_tensor_view(mc, [n], [], result_type=mc_t),
                                    result_type=PartitionViewType((16,), mc_t, (0,)))  # fmt: skip
    out_view = b.make_partition_view(b.make_tensor_view(out, [m], [], result_type=out_t),
                                     result_type=PartitionViewType((16,), out_t, (0,)))  # fmt: skip
    body(b, mc_view, out_view)
    b.return_()
    return Module([fn])


def test_multimem_store_reduce_and_load_reduce_on_one_member() -> None:
    """On a one-member multicast group: store writes, reduce(add) adds into memory, load_reduce(add) reads.

    buffer = 3 i, then += i + 100, so buffer and the loaded tile are 4 i + 100. Kills: multimem_store a no-op,
    multimem_reduce storing instead of adding, multimem_load_reduce returning anything but the memory."""

    def body(b: Builder, mc: Value, out: Value) -> None:
        zero, iota = b.constant(0, I32), b.iota(result_type=tile((16,), i32))
        tok = b.call("multimem_store_view_tko", mc, b.muli(iota, b.constant(3, tile((16,), i32))), [zero],
                     b.make_token(), memory_ordering_semantics="weak").results[0]  # fmt: skip
        tok = b.call("multimem_reduce_view_tko", mc, b.addi(iota, b.constant(100, tile((16,), i32))), [zero], tok,
                     memory_scope="sys", reduction="add").results[0]  # fmt: skip
        loaded, tok = b.multimem_load_reduce_view_tko(mc, [zero], tok, memory_scope="sys", reduction="add")
        b.store_view_tko(loaded, out, [zero], tok)

    buffer, out = np.full(16, 7, np.int32), np.zeros(16, np.int32)
    interp.launch(_multicast_kernel(body), 1, [buffer, 16, out, 16])
    expect = [4 * i + 100 for i in range(16)]
    assert buffer.tolist() == expect
    assert out.tolist() == expect


@pytest.mark.parametrize("chain", [("memory_fence_alias_tko",), ("gdc_launch_dependents_tko", "gdc_wait_tko")])
def test_token_only_ops_order_the_load_after_the_store(chain: tuple[str, ...]) -> None:
    """A load whose token went store -> (these ops) reads the stored tile, with no token-order error.

    Kills: one of these ops returning a fresh token (the load would no longer be ordered after the store: a
    TokenOrderError) or dropping its token operand."""
    x = np.arange(16, dtype=np.int32)

    def body(b: Builder, mc: Value, out: Value) -> None:
        zero = b.constant(0, I32)
        tok = b.store_view_tko(b.addi(b.iota(result_type=tile((16,), i32)), b.constant(5, tile((16,), i32))), out,
                               [zero], b.make_token())  # fmt: skip
        for name in chain:
            tok = b.call(name, tok).results[0]
        loaded, tok = b.load_view_tko(out, [zero], tok)
        b.store_view_tko(b.muli(loaded, loaded), out, [zero], tok)

    out = np.zeros(16, np.int32)
    interp.launch(_multicast_kernel(body), 1, [x.copy(), 16, out, 16])
    assert out.tolist() == [(i + 5) ** 2 for i in range(16)]


def test_trunci_to_i1_keeps_the_low_bit() -> None:
    """Kills: trunci to i1 as x | 1, or as x != 0 (2 would be true)."""
    x = np.array([0, 1, 2, 3, -1, -2, 4, 5], np.int32)
    got = unary("trunci", x, np.bool_)
    assert got.tolist() == [(int(v) & 1) == 1 for v in x]


def test_flush_to_zero_keeps_the_smallest_normal() -> None:
    """Only subnormals flush: the smallest normal f32 stays. Kills: the flush test written with <= (or > 0)."""
    tiny = np.finfo(np.float32).tiny
    x = np.array([tiny, -tiny, tiny / 2, -tiny / 4], np.float32)
    got = binary("addf", x, np.zeros(4, np.float32), flush_to_zero=True)
    assert got.tolist() == [tiny, -tiny, 0.0, 0.0]


@pytest.mark.parametrize(
    ("element", "values"),
    [
        ("i1", [True, False, True, True, False, False, True, False, True]),
        ("i1", [True, False, True, True]),  # packed into one byte, which is not a splat
        ("i1", [False, True]),
        ("i1", [False] * 8 + [True]),  # two bytes, the first all zeros: not a splat either
        ("tf32", [1.5, -2.0, 0.25, 3.0, -0.0, 65504.0]),
        ("i4", [-8, 7, -1, 3, 0, -2]),
        ("f4E2M1FN", [0.5, -1.0, 6.0, -0.0, 1.5, -4.0]),
    ],
)
def test_dense_constants_of_packed_types_decode_to_their_values(element: str, values: list[float]) -> None:
    """i1 (bits, little endian), tf32 (3 bytes), i4 and f4 (a nibble each) constants read back as written.

    Bug caught: an i1 constant of at most 8 elements (one packed byte) was read as a splat of that byte != 0, so
    [True, False, True, True] read as four Trues. Kills: the i1 splat test inverted, the tf32 bytes combined with &
    or misaligned. (The i4 sign threshold at > 8 is equivalent: ml_dtypes wraps 8 to -8.)"""
    from tile import ir
    from tile.ir.interp._shape import decode_dense

    attr = ir.DenseElementsAttr.from_values(tile((len(values),), getattr(ir, element)), values)
    got = np.asarray(decode_dense(attr)).astype(np.float64 if element != "i1" else np.bool_)
    assert got.tolist() == values
    assert np.signbit(got).tolist() == np.signbit(np.array(values, np.float64)).tolist()
    splat = ir.DenseElementsAttr.from_values(tile((4,), getattr(ir, element)), [values[0]] * 4)
    assert np.asarray(decode_dense(splat)).astype(np.float64).tolist() == [float(values[0])] * 4


@pytest.mark.parametrize(("byte", "value"), [(b"\xff", True), (b"\x00", False)])
def test_a_one_byte_i1_splat_fills_a_tile_of_any_size(byte: bytes, value: bool) -> None:
    """An i1 constant stored as one byte of all ones (or all zeros) is a splat, as in MLIR, also for more than
    8 elements. Mutant killed (scripts/mutation.py): the all-ones byte 0xFF read as 256 (only 0x00 a splat)."""
    from tile import ir
    from tile.ir.interp._shape import decode_dense

    attr = ir.DenseElementsAttr(tile((16,), ir.i1), byte)
    assert np.asarray(decode_dense(attr)).tolist() == [value] * 16
