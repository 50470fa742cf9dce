"""cuTile Python kernels whose exported bytecode is the tile-ir corpus (the peer's output, not ours).

Each kernel is plain cuTile Python (``import cuda.tile as ct``); `CORPUS` pairs it with the parameter
constraints it is exported with and the bytecode versions to export it at. Together they cover
elementwise arithmetic, math, casts, reductions, scans, GEMM with ``mma``, softmax, layernorm, attention,
atomics, gather/scatter, control flow, print/assert, views and hints. Kernels that need 13.4+ features
(``insert``, ``check_bounds=False``, grid dependency control) are exported at 13.5 only.

This module is imported only by the corpus tests (cuda-tile is a declared test dependency); it is never
imported by tile.ir.
"""

# ruff: noqa: N803, PLR0917, SIM108, PT009  -- kernels are cuTile code, in cuTile's idiom: capital tile sizes,
# many positional parameters, `if` blocks kept as the control flow under test, `ct.assert_` is not unittest's.
# mypy: ignore-errors
# cuTile's stubs type tile expressions loosely (kernels are traced, never called), so these bodies are not
# checked by mypy; the test modules that use them are.

from __future__ import annotations

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def vadd(a, b, c, TILE: ConstInt):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(TILE,))
    y = ct.load(b, index=(bid,), shape=(TILE,))
    ct.store(c, index=(bid,), tile=x + y)


@ct.kernel
def axpy(alpha: float, x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    tx = ct.load(x, index=(bid,), shape=(TILE,))
    ty = ct.load(y, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=alpha * tx + ty)


@ct.kernel
def elementwise_ops(x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    r = (a - b) * (a / b) + ct.maximum(a, b) - ct.minimum(a, b) + ct.negative(a) + ct.abs(b) + a % b
    ct.store(out, index=(bid,), tile=r)


@ct.kernel
def math_unary(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    r = ct.exp(a) + ct.exp2(a) + ct.log(a) + ct.log2(a) + ct.sqrt(a) + ct.rsqrt(a)
    r = r + ct.sin(a) + ct.cos(a) + ct.tan(a) + ct.sinh(a) + ct.cosh(a) + ct.tanh(a)
    r = r + ct.floor(a) + ct.ceil(a)
    ct.store(out, index=(bid,), tile=r)


@ct.kernel
def math_binary(x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=ct.pow(a, b) + ct.atan2(a, b))


@ct.kernel
def fma_f64(x, y, z, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    c = ct.load(z, index=(bid,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=a * b + c)


@ct.kernel
def int_ops(x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    r = (a & b) | (a ^ b)
    r = r + (a << 3) + (b >> 2) + a // b + a % b + a * b - ct.maximum(a, b) + ct.minimum(a, b)
    r = r + ct.abs(a) + ct.negative(b) + ct.bitwise_not(a)
    ct.store(out, index=(bid,), tile=r)


@ct.kernel
def unsigned_ops(x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    # No `//`: cuTile 1.7.0 lowers unsigned floor division to a `divi` that tileirdisasm rejects.
    r = a % b + (a >> 1) + ct.maximum(a, b) + a.astype(ct.float32).astype(ct.uint32)
    ct.store(out, index=(bid,), tile=ct.where(a < b, r, a))


@ct.kernel
def compare_select(x, y, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    b = ct.load(y, index=(bid,), shape=(TILE,))
    m = (a < b) | (a >= b * 2.0) | (a == 0.0) | (a != b) | ct.isnan(b)
    ct.store(out, index=(bid,), tile=ct.where(m, a, b))


@ct.kernel
def casts(x, out16, outi, outbf, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(out16, index=(bid,), tile=a.astype(ct.float16))
    ct.store(outi, index=(bid,), tile=a.astype(ct.int32))
    ct.store(outbf, index=(bid,), tile=a.astype(ct.bfloat16))


@ct.kernel
def int_casts(x, out64, out8, outf, outu, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(out64, index=(bid,), tile=a.astype(ct.int64))
    ct.store(out8, index=(bid,), tile=a.astype(ct.int8))
    ct.store(outf, index=(bid,), tile=a.astype(ct.float64))
    ct.store(outu, index=(bid,), tile=ct.bitcast(a, ct.uint32).astype(ct.float32))


@ct.kernel
def fp8_roundtrip(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,))
    q = a.astype(ct.float8_e4m3fn)
    r = q.astype(ct.float32) + a.astype(ct.float8_e5m2).astype(ct.float32)
    ct.store(out, index=(bid,), tile=r)


@ct.kernel
def row_reductions(x, out_sum, out_max, out_min, out_prod, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN))
    ct.store(out_sum, index=(bid,), tile=ct.sum(t, axis=1))
    ct.store(out_max, index=(bid,), tile=ct.max(t, axis=1))
    ct.store(out_min, index=(bid,), tile=ct.min(t, axis=1))
    ct.store(out_prod, index=(bid,), tile=ct.prod(t, axis=1))


@ct.kernel
def argmax_rows(x, out, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN))
    ct.store(out, index=(bid,), tile=ct.argmax(t, axis=1))


@ct.kernel
def int_reduce(x, out, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN))
    ct.store(out, index=(bid,), tile=ct.sum(t, axis=1) + ct.max(t, axis=1))


@ct.kernel
def scans(x, out_sum, out_prod, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN))
    ct.store(out_sum, index=(bid, 0), tile=ct.cumsum(t, axis=1))
    ct.store(out_prod, index=(bid, 0), tile=ct.cumprod(t, axis=1, reverse=True))


@ct.kernel
def gemm(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK), padding_mode=ct.PaddingMode.ZERO)
        tb = ct.load(b, index=(k, bn), shape=(BK, BN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=acc.astype(c.dtype))


@ct.kernel
def gemm_tf32(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK)).astype(ct.tfloat32)
        tb = ct.load(b, index=(k, bn), shape=(BK, BN)).astype(ct.tfloat32)
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=acc)


@ct.kernel
def gemm_int8(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.zeros((BM, BN), dtype=ct.int32)
    for k in range(ct.num_tiles(a, axis=1, shape=(BM, BK))):
        ta = ct.load(a, index=(bm, k), shape=(BM, BK))
        tb = ct.load(b, index=(k, bn), shape=(BK, BN))
        acc = ct.mma(ta, tb, acc)
    ct.store(c, index=(bm, bn), tile=acc)


@ct.kernel
def matmul_transposed(a, b, c, BM: ConstInt, BN: ConstInt, BK: ConstInt):
    bm = ct.bid(0)
    bn = ct.bid(1)
    ta = ct.load(a, index=(bm, 0), shape=(BM, BK))
    tb = ct.load(b, index=(bn, 0), shape=(BN, BK))
    ct.store(c, index=(bm, bn), tile=ct.matmul(ta, ct.transpose(tb)))


@ct.kernel
def softmax(x, out, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN), padding_mode=ct.PaddingMode.NEG_INF)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    ct.store(out, index=(bid, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


@ct.kernel
def layernorm(x, w, bias, out, eps: float, N: ConstInt, BN: ConstInt):
    row = ct.bid(0)
    acc = ct.zeros((1, BN), dtype=ct.float32)
    for j in range(N // BN):
        acc += ct.load(x, index=(row, j), shape=(1, BN))
    mean = ct.sum(acc, axis=1, keepdims=True) / N
    var = ct.zeros((1, BN), dtype=ct.float32)
    for j in range(N // BN):
        d = ct.load(x, index=(row, j), shape=(1, BN)) - mean
        var += d * d
    rstd = ct.rsqrt(ct.sum(var, axis=1, keepdims=True) / N + eps)
    for j in range(N // BN):
        t = (ct.load(x, index=(row, j), shape=(1, BN)) - mean) * rstd
        t = t * ct.load(w, index=(j,), shape=(BN,)) + ct.load(bias, index=(j,), shape=(BN,))
        ct.store(out, index=(row, j), tile=t)


@ct.kernel
def rmsnorm_f16(x, out, BN: ConstInt):
    row = ct.bid(0)
    t = ct.load(x, index=(row, 0), shape=(1, BN)).astype(ct.float32)
    r = ct.rsqrt(ct.sum(t * t, axis=1, keepdims=True) / BN + 1e-6)
    ct.store(out, index=(row, 0), tile=(t * r).astype(ct.float16))


@ct.kernel
def attention(q, k, v, out, qk_scale: float, BM: ConstInt, BN: ConstInt, D: ConstInt, CAUSAL: ct.Constant[bool]):
    bm = ct.bid(0)
    head = ct.bid(1)
    tq = ct.load(q, index=(head, bm, 0), shape=(1, BM, D)).reshape((BM, D))
    m_i = ct.full((BM, 1), -float("inf"), dtype=ct.float32)
    l_i = ct.zeros((BM, 1), dtype=ct.float32)
    acc = ct.zeros((BM, D), dtype=ct.float32)
    offs_m = bm * BM + ct.arange(BM, dtype=ct.int32)
    for j in range(ct.num_tiles(k, axis=1, shape=(1, BN, D))):
        tk = ct.load(k, index=(head, j, 0), shape=(1, BN, D)).reshape((BN, D))
        s = ct.mma(tq, ct.permute(tk, (1, 0)), ct.zeros((BM, BN), dtype=ct.float32)) * qk_scale
        if CAUSAL:
            offs_n = j * BN + ct.arange(BN, dtype=ct.int32)
            mask = offs_m[:, None] >= offs_n[None, :]
            s = ct.where(mask, s, -float("inf"))
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        tv = ct.load(v, index=(head, j, 0), shape=(1, BN, D)).reshape((BN, D))
        acc = ct.mma(p.astype(ct.float16), tv, acc * alpha)
        m_i = m_new
    res = (acc / l_i).astype(ct.float16).reshape((1, BM, D))
    ct.store(out, index=(head, bm, 0), tile=res)


@ct.kernel
def atomics(counter, hist, x, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.atomic_add(counter, (0,), 1)
    ct.atomic_max(counter, (1,), bid, memory_order=ct.MemoryOrder.RELAXED)
    ct.atomic_min(counter, (2,), bid, memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_xchg(counter, (3,), bid, memory_order=ct.MemoryOrder.RELEASE)
    ct.atomic_and(counter, (4,), bid)
    ct.atomic_or(counter, (5,), bid)
    ct.atomic_xor(counter, (6,), bid)
    ct.atomic_add(hist, t, 1)


@ct.kernel
def atomic_float_cas(x, lock, TILE: ConstInt):
    bid = ct.bid(0)
    ct.atomic_add(x, ct.arange(TILE, dtype=ct.int32), 1.5)
    while ct.atomic_cas(lock, (0,), 0, 1, memory_order=ct.MemoryOrder.ACQUIRE) == 1:
        pass
    ct.atomic_xchg(lock, (0,), 0, memory_order=ct.MemoryOrder.RELEASE, memory_scope=ct.MemoryScope.SYS)
    ct.store(x, index=(bid,), tile=ct.zeros((TILE,), dtype=ct.float32))


@ct.kernel
def gather_scatter(x, idx, out, TILE: ConstInt):
    bid = ct.bid(0)
    i = ct.load(idx, index=(bid,), shape=(TILE,))
    vals = ct.gather(x, i, padding_value=0.0)
    ct.scatter(out, i, vals * 2.0)


@ct.kernel
def gather_masked_2d(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    rows = ct.arange(TILE, dtype=ct.int32)
    cols = ct.full((TILE,), bid, dtype=ct.int32)
    vals = ct.gather(x, (rows, cols), mask=rows < 7, check_bounds=False)
    ct.scatter(out, (rows, cols), vals, mask=rows < 7)


@ct.kernel
def control_flow(x, out, n: int, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    if bid % 2 == 0:
        t = t * 2.0
    else:
        t = t + 1.0
    i = 0
    while i < n:
        t = t + 1.0
        i += 1
    for k in range(n):
        if k > 5:
            break
        t = t - 0.5
    ct.store(out, index=(bid,), tile=t)


@ct.kernel
def nested_loops(x, out, M: ConstInt, TILE: ConstInt):
    bid = ct.bid(0)
    acc = ct.zeros((TILE,), dtype=ct.float32)
    for i in range(M):
        for j in range(i, M, 2):
            acc = acc + ct.load(x, index=(j,), shape=(TILE,))
    ct.store(out, index=(bid,), tile=acc)


@ct.kernel
def print_assert(x, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.printf("block %d first %f\n", bid, t)
    ct.print("tile", bid, t, sep=", ")
    ct.assert_(t >= 0.0, "negative input")


@ct.kernel
def shape_ops(x, out, out2, BM: ConstInt, BN: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid, 0), shape=(BM, BN))
    p = ct.permute(t, (1, 0))
    r = ct.reshape(p, (BM * BN,))
    c = ct.cat((r, r), axis=0)
    e = ct.extract(c, index=(1,), shape=(BM * BN,))
    ct.store(out, index=(bid,), tile=e)
    b = ct.broadcast_to(ct.expand_dims(ct.sum(t, axis=0), axis=0), (BM, BN))
    ct.store(out2, index=(bid, 0), tile=b)


@ct.kernel
def grid_3d(x, out, B0: ConstInt, B1: ConstInt, B2: ConstInt):
    i, j, k = ct.bid(0), ct.bid(1), ct.bid(2)
    t = ct.load(x, index=(i, j, k), shape=(B0, B1, B2))
    n = ct.num_blocks(0) + ct.num_blocks(1) * ct.num_blocks(2)
    ct.store(out, index=(i, j, k), tile=t * n)


@ct.kernel
def transpose_order(x, out, BM: ConstInt, BN: ConstInt):
    bm, bn = ct.bid(0), ct.bid(1)
    t = ct.load(x, index=(bn, bm), shape=(BN, BM), order="F")
    ct.store(out, index=(bm, bn), tile=t, latency=3, allow_tma=False)


@ct.kernel
def padded_load(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    a = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.NAN, latency=5, allow_tma=True)
    b = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.POS_INF)
    c = ct.load(x, index=(bid,), shape=(TILE,), padding_mode=ct.PaddingMode.NEG_ZERO)
    ct.store(out, index=(bid,), tile=a + b + c)


@ct.kernel
def early_exit(x, out, n: int, TILE: ConstInt):
    # `return` inside `if`: cuTile writes an `if` whose then-region ends in `return` (an early exit from the kernel).
    bid = ct.bid(0)
    if bid >= n:
        return
    ct.store(out, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) + 1)


@ct.kernel
def gather_mask_pad(x, out, TILE: ConstInt):
    # `load_ptr_tko` with both optional operands: a mask (the bounds and the user's mask) and a padding value.
    bid = ct.bid(0)
    idx = ct.arange(TILE, dtype=ct.int32) + bid * TILE
    ct.scatter(out, idx, ct.gather(x, idx, mask=idx < 100, padding_value=7.0))


@ct.kernel(occupancy=2, num_ctas=2)
def hinted(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    ct.store(out, index=(bid,), tile=ct.load(x, index=(bid,), shape=(TILE,)) * 3)


@ct.kernel
def read_modify_write(x, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(x, index=(bid,), tile=t + 1.0)
    u = ct.load(x, index=(bid,), shape=(TILE,))
    ct.store(x, index=(bid,), tile=u * 2.0)


@ct.kernel
def iota_constants(out_i, out_f, out_b, TILE: ConstInt):
    bid = ct.bid(0)
    r = ct.arange(TILE, dtype=ct.int64, start=3, step=2)
    ct.store(out_i, index=(bid,), tile=r)
    ct.store(out_f, index=(bid,), tile=ct.full((TILE,), -1.25, dtype=ct.float64) + r.astype(ct.float64))
    ct.store(out_b, index=(bid,), tile=ct.full((TILE,), True, dtype=ct.bool_))


@ct.kernel
def unchecked_insert(x, out, TILE: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(TILE,), check_bounds=False)
    small = ct.full((TILE // 4,), 7.0, dtype=ct.float32)
    t = ct.insert(t, (1,), small)
    ct.grid_dependency_control_wait()
    ct.store(out, index=(bid,), tile=t, check_bounds=False)
    ct.grid_dependency_control_launch_dependents()


# --- the export table ----------------------------------------------------------------------------------

import contextlib  # noqa: E402  -- kept beside the table that needs it, after the kernels
import io  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from cuda.tile.compilation import (  # noqa: E402
    ArrayConstraint,
    CallingConvention,
    KernelSignature,
    ScalarConstraint,
    export_kernel,
)

V133 = "13.3"
V135 = "13.5"
BOTH = (V133, V135)


def arr(dtype, ndim=1, *, index=ct.int32, contiguous=False, alias=()):
    """An array parameter as cuTile's JIT would specialize it (optionally with a static unit stride)."""
    stride = tuple([None] * (ndim - 1) + [1]) if contiguous else None
    return ArrayConstraint(
        dtype,
        ndim,
        index_dtype=index,
        stride_lower_bound_incl=0,
        alias_groups=alias,
        may_alias_internally=False,
        stride_constant=stride,
        stride_divisible_by=1,
        shape_divisible_by=16 if contiguous else 1,
        base_addr_divisible_by=16 if contiguous else 1,
    )


@dataclass(frozen=True)
class CorpusKernel:
    """One corpus entry: a cuTile kernel, its export parameters, and the bytecode versions to export."""

    name: str
    kernel: object
    params: tuple[object, ...]
    versions: tuple[str, ...] = BOTH

    @property
    def function_name(self) -> str:
        """The Python name of the kernel (the prefix of its mangled symbol)."""
        return self.kernel._pyfunc.__name__


F32, F16, I32 = ct.float32, ct.float16, ct.int32
S_F32, S_I32 = ScalarConstraint(ct.float32), ScalarConstraint(ct.int32)

CORPUS: tuple[CorpusKernel, ...] = (
    CorpusKernel("vadd", vadd, (arr(F32), arr(F32), arr(F32), 128)),
    CorpusKernel("vadd_contiguous", vadd, (arr(F16, contiguous=True),) * 3 + (256,)),
    CorpusKernel("axpy", axpy, (S_F32, arr(F32), arr(F32), arr(F32), 64)),
    CorpusKernel("elementwise_ops", elementwise_ops, (arr(F32), arr(F32), arr(F32), 128)),
    CorpusKernel("math_unary", math_unary, (arr(F32), arr(F32), 128)),
    CorpusKernel("math_unary_f16", math_unary, (arr(F16), arr(F16), 64)),
    CorpusKernel("math_binary", math_binary, (arr(F32), arr(F32), arr(F32), 128)),
    CorpusKernel("fma_f64", fma_f64, (arr(ct.float64),) * 4 + (32,)),
    CorpusKernel("int_ops", int_ops, (arr(I32), arr(I32), arr(I32), 128)),
    CorpusKernel("int_ops_i64", int_ops, (arr(ct.int64, index=ct.int64),) * 3 + (64,)),
    CorpusKernel("unsigned_ops", unsigned_ops, (arr(ct.uint32), arr(ct.uint32), arr(ct.uint32), 128)),
    CorpusKernel("compare_select", compare_select, (arr(F32), arr(F32), arr(F32), 128)),
    CorpusKernel("casts", casts, (arr(F32), arr(F16), arr(I32), arr(ct.bfloat16), 128)),
    CorpusKernel("int_casts", int_casts, (arr(I32), arr(ct.int64), arr(ct.int8), arr(ct.float64), arr(F32), 64)),
    CorpusKernel("fp8_roundtrip", fp8_roundtrip, (arr(F32), arr(F32), 128)),
    CorpusKernel("row_reductions", row_reductions, (arr(F32, 2),) + (arr(F32),) * 4 + (16, 64)),
    CorpusKernel("argmax_rows", argmax_rows, (arr(F32, 2), arr(I32), 16, 64)),
    CorpusKernel("int_reduce", int_reduce, (arr(I32, 2), arr(I32), 8, 32)),
    CorpusKernel("scans", scans, (arr(F32, 2), arr(F32, 2), arr(F32, 2), 8, 64)),
    CorpusKernel("gemm_f16", gemm, (arr(F16, 2, contiguous=True),) * 2 + (arr(F16, 2),) + (64, 64, 32)),
    CorpusKernel("gemm_bf16", gemm, (arr(ct.bfloat16, 2),) * 2 + (arr(F32, 2),) + (128, 64, 32)),
    CorpusKernel("gemm_tf32", gemm_tf32, (arr(F32, 2),) * 3 + (64, 64, 16)),
    CorpusKernel("gemm_int8", gemm_int8, (arr(ct.int8, 2), arr(ct.int8, 2), arr(I32, 2), 64, 64, 64)),
    CorpusKernel("matmul_transposed", matmul_transposed, (arr(F16, 2),) * 2 + (arr(F32, 2),) + (32, 32, 64)),
    CorpusKernel("softmax", softmax, (arr(F32, 2), arr(F32, 2), 4, 128)),
    CorpusKernel("layernorm", layernorm, (arr(F32, 2), arr(F32), arr(F32), arr(F32, 2), S_F32, 1024, 256)),
    CorpusKernel("rmsnorm_f16", rmsnorm_f16, (arr(F16, 2), arr(F16, 2), 512)),
    CorpusKernel("attention", attention, (arr(F16, 3),) * 4 + (S_F32, 64, 64, 64, False)),
    CorpusKernel("attention_causal", attention, (arr(F16, 3),) * 4 + (S_F32, 64, 32, 64, True)),
    CorpusKernel("atomics", atomics, (arr(I32), arr(I32), arr(I32), 128)),
    CorpusKernel("atomic_float_cas", atomic_float_cas, (arr(F32), arr(I32), 64)),
    CorpusKernel("gather_scatter", gather_scatter, (arr(F32), arr(I32), arr(F32), 128)),
    CorpusKernel("gather_masked_2d", gather_masked_2d, (arr(F32, 2), arr(F32, 2), 16)),
    CorpusKernel("control_flow", control_flow, (arr(F32), arr(F32), S_I32, 128)),
    CorpusKernel("early_exit", early_exit, (arr(F32), arr(F32), S_I32, 128)),
    CorpusKernel("gather_mask_pad", gather_mask_pad, (arr(F32), arr(F32), 128)),
    CorpusKernel("nested_loops", nested_loops, (arr(F32), arr(F32), 8, 64)),
    CorpusKernel("print_assert", print_assert, (arr(F32), 16)),
    CorpusKernel("shape_ops", shape_ops, (arr(F32, 2), arr(F32), arr(F32, 2), 8, 16)),
    CorpusKernel("grid_3d", grid_3d, (arr(F32, 3), arr(F32, 3), 2, 4, 8)),
    CorpusKernel("transpose_order", transpose_order, (arr(F32, 2), arr(F32, 2), 32, 64)),
    CorpusKernel("padded_load", padded_load, (arr(F32), arr(F32), 128)),
    CorpusKernel("hinted", hinted, (arr(F32), arr(F32), 128)),
    CorpusKernel("read_modify_write", read_modify_write, (arr(F32), 128)),
    CorpusKernel("iota_constants", iota_constants, (arr(ct.int64), arr(ct.float64), arr(ct.bool_), 32)),
    CorpusKernel("unchecked_insert", unchecked_insert, (arr(F32), arr(F32), 64), versions=(V135,)),
)


@contextlib.contextmanager
def _allow_version(version: str) -> Iterator[None]:
    # cuTile 1.7.0 accepts 13.5 only when its developer features are on; that switch only widens the list
    # of versions it will target (it is read nowhere else), so it is lifted for the export alone.
    import cuda.tile._compile as compile_module

    saved = compile_module.dev_features_enabled
    if version == V135:
        compile_module.dev_features_enabled = lambda: True
    try:
        yield
    finally:
        compile_module.dev_features_enabled = saved


def export(entry: CorpusKernel, version: str) -> bytes:
    """Export `entry` with cuTile Python as Tile IR bytecode at `version` (CPU only, no tileiras run)."""
    sig = KernelSignature(list(entry.params), CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    with _allow_version(version):
        export_kernel(entry.kernel, [sig], buf, output_format="tileir_bytecode", bytecode_version=version)
    return buf.getvalue()


def cases() -> Sequence[tuple[CorpusKernel, str]]:
    """Every (kernel, version) pair of the corpus."""
    return [(k, v) for k in CORPUS for v in k.versions]
