"""Verifier rules for mmaf_scaled scales, view indices, multimem/atomic views, ftof rounding and preview features.

Every rule has a rejected case (its message asserted) and an accepted neighbour; where tileiras is installed,
the same modules go through tileiras, which must reject exactly the rejected ones and compile the others.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tile.ir import (
    DYNAMIC,
    V13_4,
    V13_5,
    Bounded,
    Builder,
    DivBy,
    FloatAttr,
    Function,
    FunctionType,
    GatherScatterViewType,
    IntegerAttr,
    Module,
    Operation,
    Padding,
    PartitionViewType,
    PointerAttr,
    SameElements,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileError,
    TileType,
    Value,
    VerifyError,
    bf16,
    f4E2M1FN,
    f8E4M3FN,
    f8E5M2,
    f8E8M0FNU,
    f16,
    f32,
    f64,
    i1,
    i4,
    i8,
    i16,
    i32,
    i64,
    ptr,
    scalar,
    tf32,
    tile,
    verify_problems,
    write_bytecode,
)
from tile.ir.ops import lookup

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_tools import compile_cubin, disassemble
from helpers_ir_verify_gaps import (
    Case,
    ftof,
    kernel,
    malformed,
    multimem,
    mutants,
    pointer_atomic,
    scaled,
    through,
    view,
)

E4, E5, E8, F4 = f8E4M3FN, f8E5M2, f8E8M0FNU, f4E2M1FN
S, S64 = scalar(i32), scalar(i64)
TV = TensorViewType(f32, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))
TVI = TensorViewType(i32, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))
PV, SV = PartitionViewType((8, 16), TV, (0, 1)), StridedViewType((8, 16), (4, 16), TV, (0, 1))
GV = GatherScatterViewType((8, 16), TV, 0)
G8 = tile((8,), i32)


def _f4(strides: tuple[int | None, ...]) -> TensorViewType:
    return TensorViewType(F4, (DYNAMIC, DYNAMIC), strides)


def _mc1(elem: ScalarType) -> TensorViewType:
    return TensorViewType(elem, (DYNAMIC,), (1,), ptr_attr=PointerAttr.MULTICAST)


def _mc(elem: ScalarType, strides: tuple[int | None, ...] = (DYNAMIC, 1)) -> TensorViewType:
    return TensorViewType(elem, (DYNAMIC, DYNAMIC), strides, ptr_attr=PointerAttr.MULTICAST)


def _select(b: Builder, cond: Value, v: Value) -> Value:
    return b.select(cond, v, v)


def _identity(e: ScalarType) -> FloatAttr | IntegerAttr:
    return FloatAttr.of(e, 0.0) if e.is_float else IntegerAttr(e, 0)


def _reduce(b: Builder, v: Value) -> Value:
    """Sum-free reduction (keeps one element) back to the input's shape, to test element types alone."""
    assert isinstance(v.type, TileType)
    assert isinstance(v.type.element, ScalarType)
    e = v.type.element
    with b.reduce([v], 0, [_identity(e)], result_types=[scalar(e)]) as r:
        b.yield_([r.args[0]])
    return b.broadcast(b.reshape(r.op.results[0], result_type=tile((1,), e)), result_type=v.type)


def _scan(b: Builder, v: Value) -> Value:
    assert isinstance(v.type, TileType)
    assert isinstance(v.type.element, ScalarType)
    with b.scan([v], 0, [_identity(v.type.element)]) as r:
        b.yield_([r.args[0]])
    return r.op.results[0]


def _tensor_view(size: ScalarType, stride: ScalarType) -> Module:
    """A 2-D tensor view whose two dynamic sizes are `size` constants and dynamic stride a `stride` constant."""
    tv = TensorViewType(f32, (DYNAMIC, DYNAMIC), (DYNAMIC, 1))

    def body(b: Builder, fn: Function) -> None:
        sizes = [b.constant(4, scalar(size)) for _ in range(2)]
        b.make_tensor_view(fn.params[0], sizes, [b.constant(4, scalar(stride))], result_type=tv)

    return kernel(body)


def _slice(b: Builder, v: Value, index: ScalarType, at: int, put: int) -> Value:
    """Extract half of a 16-element tile at slot `at` and insert it back at slot `put` (indices of type `index`)."""
    assert isinstance(v.type, TileType)
    half = b.extract(v, [b.constant(at, scalar(index))], result_type=tile((8,), v.type.element))
    return b.insert(half, v, [b.constant(put, scalar(index))])


def _transpose(b: Builder, v: Value) -> Value:
    assert isinstance(v.type, TileType)
    return b.permute(v, permutation=(1, 0), result_type=v.type.with_shape(v.type.shape[::-1]))


def _mmaf(lhs: ScalarType, rhs: ScalarType) -> Module:
    def body(b: Builder, fn: Function) -> None:
        b.mmaf(
            b.constant(1.0, tile((16, 32), lhs)),
            b.constant(1.0, tile((32, 16), rhs)),
            b.constant(0.0, tile((16, 16), f32)),
        )

    return kernel(body)


MMA = "16x32 32x16 16x16"
CASES: dict[str, Case] = {
    # mmaf_scaled: element types, scale shapes and block sizes
    "scaled-f8-block32": Case(scaled((E4, E4), (E8, E8), f"{MMA} 16x1 1x16"), None),
    "scaled-f8-block16": Case(scaled((E4, E4), (E8, E8), f"{MMA} 16x2 2x16"), "must cover 32 f8E4M3FN elements"),
    "scaled-f4-e4m3-16": Case(scaled((F4, F4), (E4, E4), "16x64 64x16 16x16 16x4 4x16"), None),
    "scaled-f4-e4m3-32": Case(scaled((F4, F4), (E4, E4), "16x64 64x16 16x16 16x2 2x16"), "must cover 16 f4E2M1FN"),
    "scaled-f4-e8m0-64": Case(scaled((F4, F4), (E8, E8), "16x64 64x16 16x16 16x1 1x16"), "cover 16 or 32"),
    "scaled-f8-e4m3-scale": Case(scaled((E4, E4), (E4, E4), f"{MMA} 16x1 1x16"), "f8E4M3FN scaled by f8E4M3FN"),
    "scaled-f16": Case(scaled((f16, f16), (E8, E8), f"{MMA} 16x1 1x16"), "f16 scaled by f8E8M0FNU"),
    "scaled-mixed-operands": Case(scaled((E4, E5), (E8, E8), f"{MMA} 16x1 1x16"), "lhs and rhs must share"),
    "scaled-mixed-scales": Case(scaled((F4, F4), (E8, E4), "16x64 64x16 16x16 16x4 4x16"), "must share one element"),
    "scaled-m-mismatch": Case(scaled((E4, E4), (E8, E8), f"{MMA} 8x1 1x16"), "scale shapes must be 16 x K/V"),
    "scaled-k-mismatch": Case(scaled((E5, E5), (E8, E8), "16x64 64x16 16x16 16x2 1x16"), "one K/V for both"),
    "scaled-rank": Case(scaled((E4, E4), (E8, E8), f"{MMA} 16 16"), "must share one rank"),
    "scaled-batched": Case(scaled((E4, E4), (E8, E8), "2x16x32 2x32x16 2x16x16 2x16x1 2x1x16"), None),
    "scaled-batch-mismatch": Case(scaled((E4, E4), (E8, E8), "2x16x32 2x32x16 2x16x16 1x16x1 2x1x16"), "batch"),
    # view indices: count, integer scalars of one type; gather: a 1-D index tile at sparse_dim
    "pv-i64-indices": Case(view(PV, [S64, S64]), None),
    "pv-mixed-indices": Case(view(PV, [S, S64]), "scalar indices must share one type"),
    "pv-tile-index": Case(view(PV, [G8, S]), "index 0 must be a scalar tile"),
    "pv-float-index": Case(view(PV, [scalar(f32), S]), "index 0 must be a tile of i1, i8, i16, i32 or i64"),
    "pv-i1-indices": Case(view(PV, [scalar(i1), scalar(i1)]), None),
    "sv-load": Case(view(SV, [S, S]), None),
    "sv-one-index": Case(view(SV, [S]), "view of rank 2 needs 2 indices, got 1"),
    "sv-wrong-tile": Case(view(SV, [S, S], value=tile((16, 8), f32)), "does not match the view's tile"),
    "sv-store-tile-index": Case(view(SV, [S, tile((16,), i32)], "store"), "index 1 must be a scalar tile"),
    "gv-load": Case(view(GV, [G8, S]), None),
    "gv-store-i64-gather": Case(view(GV, [tile((8,), i64), S], "store"), None),
    "gv-scalar-sparse": Case(view(GV, [S, S]), "must be a 1-D index tile of 8 elements"),
    "gv-long-sparse": Case(view(GV, [tile((16,), i32), S]), "must be a 1-D index tile of 8 elements"),
    "gv-tile-other": Case(view(GV, [G8, tile((16,), i32)]), "index 1 must be a scalar tile"),
    "gv-one-index": Case(view(GV, [G8]), "view of rank 2 needs 2 indices, got 1"),
    "gv-i16-gather": Case(view(GV, [tile((8,), i16), S]), "must hold i32 or i64"),
    "gv-i16-scalar": Case(view(GV, [G8, scalar(i16)]), None),
    # view types: strided traversal strides, gather rank and sparse_dim, float-only paddings
    "sv-stride-count": Case(view(StridedViewType((8, 16), (4,), TV, (0, 1)), [S, S]), "one positive traversal"),
    "sv-zero-stride": Case(view(StridedViewType((8, 16), (0, 16), TV, (0, 1)), [S, S]), "one positive traversal"),
    "gv-sparse-dim": Case(view(GatherScatterViewType((8, 16), TV, 2), [S, S]), "sparse_dim 2 is outside"),
    "gv-rank": Case(view(GatherScatterViewType((8,), TV, 0), [G8]), "needs the tensor view's rank 2"),
    "pv-int-nan-padding": Case(view(PartitionViewType((8, 16), TVI, (0, 1), Padding.NAN), [S, S]), "needs a float"),
    "pv-int-zero-padding": Case(view(PartitionViewType((8, 16), TVI, (0, 1), Padding.ZERO), [S, S]), None),
    # f4 views: exactly one static unit stride (the packing dim), never gathered along
    "f4-unit-stride": Case(view(PartitionViewType((8, 16), _f4((DYNAMIC, 1)), (0, 1)), [S, S]), None),
    "f4-no-unit": Case(view(PartitionViewType((8, 16), _f4((DYNAMIC, DYNAMIC)), (0, 1)), [S, S]), "got 0"),
    "f4-two-units": Case(view(StridedViewType((8, 16), (8, 16), _f4((1, 1)), (0, 1)), [S, S], "store"), "got 2"),
    "f4-gather-rows": Case(view(GatherScatterViewType((8, 16), _f4((DYNAMIC, 1)), 0), [G8, S]), None),
    "f4-gather-packed": Case(
        view(GatherScatterViewType((8, 16), _f4((DYNAMIC, 1)), 1), [S, tile((16,), i32)]), "packing dim 1"
    ),
    # atomic_red_view_tko: no gather views; scalar integer indices (of any mix of types)
    "red-sv-mixed": Case(view(SV, [S64, S], "addf"), None),
    "red-gv": Case(view(GV, [G8, S], "addf"), "does not take a gather_scatter_view"),
    "red-tile-index": Case(view(PV, [G8, S], "addf"), "index 0 must be a scalar tile"),
    "red-wrong-tile": Case(view(SV, [S, S], "addf", tile((16, 8), f32)), "does not match the view's tile"),
    # element types by atomic mode / multimem reduction
    "rmw-add-f32": Case(pointer_atomic(f32, "add"), "mode add works only on i32, i64 elements, got f32"),
    "rmw-addf-bf16": Case(pointer_atomic(bf16, "addf"), None),
    "rmw-xchg-f64": Case(pointer_atomic(f64, "xchg"), None),
    "rmw-max-i16": Case(pointer_atomic(i16, "max"), "got i16"),
    "cas-f16": Case(pointer_atomic(f16, None), "atomic_cas_tko works only on f32, f64, i32, i64"),
    "cas-i64": Case(pointer_atomic(i64, None), None),
    "red-xchg": Case(view(SV, [S, S], "xchg"), "mode = xchg is not allowed"),
    "red-addf-i32": Case(view(PartitionViewType((8, 16), TVI, (0, 1)), [S, S], "addf"), "mode addf works only"),
    "mm-max-f32": Case(
        multimem(PartitionViewType((16,), _mc1(f32), (0,)), [S], "multimem_load_reduce_view_tko", "max"),
        "reduction max of multimem_load_reduce_view_tko works only on bf16, f16, i32, i64",
    ),
    "mm-max-bf16": Case(
        multimem(PartitionViewType((16,), _mc1(bf16), (0,)), [S], "multimem_load_reduce_view_tko", "max"), None
    ),
    "mm-reduce-max-f16": Case(
        multimem(PartitionViewType((16,), _mc1(f16), (0,)), [S], "multimem_reduce_view_tko", "max"), "got f16"
    ),
    "mm-store-i8": Case(multimem(PartitionViewType((16,), _mc1(i8), (0,)), [S]), "works only on bf16, f16, f32"),
    # tile types: power-of-two dims, f4 tiles of an even element count
    "f4-odd-tile": Case(ftof(f32, F4, "nearest_even", 1), "f4E2M1FN tiles hold an even number of elements"),
    "f4-even-tile": Case(ftof(f32, F4, "nearest_even", 2), None),
    "tile-not-pow2": Case(ftof(f32, f16, "nearest_even", 12), "tile dims must be positive powers of two"),
    # element types: arithmetic on f16/bf16/f32/f64 or i1..i64; i4 only in storage and shuffles
    "addf-bf16": Case(through(bf16, lambda b, v: b.addf(v, v)), None),
    "addf-tf32": Case(through(tf32, lambda b, v: b.addf(v, v)), "expects float tiles of f16, bf16, f32, f64"),
    "cos-f8": Case(through(E5, lambda b, v: b.cos(v)), "expects float tiles"),
    "cmpf-tf32": Case(
        through(tf32, lambda b, v: _select(b, b.cmpf(v, v, comparison_predicate="equal"), v)), "expects float"
    ),
    "addi-i4": Case(through(i4, lambda b, v: b.addi(v, v)), "expects int tiles of i1, i8, i16, i32, i64"),
    "select-i4": Case(through(i4, lambda b, v: _select(b, b.constant(1, tile((16,), i1)), v)), None),
    "select-f4": Case(through(F4, lambda b, v: _select(b, b.constant(1, tile((16,), i1)), v)), "f4E2M1FN is sub-byte"),
    "permute-i4": Case(
        through(
            i4,
            lambda b, v: b.reshape(
                _transpose(b, b.reshape(v, result_type=tile((4, 4), i4))), result_type=tile((16,), i4)
            ),
        ),
        None,
    ),
    "itof-e8m0": Case(
        through(
            E8,
            lambda b, v: b.itof(
                b.ftoi(v, result_type=tile((16,), i32), signedness="signed"), result_type=v.type, signedness="signed"
            ),
        ),
        "does not take a f8E8M0FNU result",
    ),
    "iota-i4": Case(through(i4, lambda b, v: b.iota(result_type=tile((16,), i4))), "iota does not take a i4 result"),
    "constant-i4": Case(through(i4, lambda b, v: b.constant(1, tile((16,), i4))), "does not take a i4 result"),
    "pointer-i4": Case(
        kernel(lambda b, fn: None, (scalar(ptr(i4)), scalar(i32))), "no pointer or tensor view can address i4"
    ),
    "reduce-f16": Case(through(f16, _reduce), None),
    "reduce-tf32": Case(through(tf32, _reduce), "reduce does not take a tf32 operand"),
    "scan-f8": Case(through(E4, _scan), "scan does not take a f8E4M3FN operand"),
    "scan-f4": Case(through(F4, _scan), "f4E2M1FN tiles hold an even number"),
    "f4-pointer-tile": Case(ftof(F4, f32, "nearest_even"), "tiles of ptr<f4E2M1FN> must be scalars"),
    "fpowi-i32": Case(through(f32, lambda b, v: b.fpowi(v, b.constant(2, tile((16,), i32)))), None),
    "fpowi-i64": Case(through(f32, lambda b, v: b.fpowi(v, b.constant(2, tile((16,), i64)))), "i64 exponent"),
    "bitcast-tf32": Case(through(tf32, lambda b, v: b.bitcast(v, result_type=tile((16,), i32))), "a tf32 operand"),
    "tv-i64-dynamic": Case(_tensor_view(i64, i64), None),
    "tv-mixed-dynamic": Case(_tensor_view(i32, i64), "dynamic sizes and strides must all have one type"),
    "extract-i64-index": Case(through(f32, lambda b, v: _slice(b, v, i64, 1, 0)), "indices must be tile<i32>"),
    "insert-in-bounds": Case(through(f32, lambda b, v: _slice(b, v, i32, 1, 1)), None),
    "insert-out-of-bounds": Case(
        through(f32, lambda b, v: _slice(b, v, i32, 0, 2)), "insert index 0 is 2, outside 0..1"
    ),
    # assume predicates
    "assume-div-by-8": Case(through(i32, lambda b, v: b.assume(v, predicate=DivBy(8))), None),
    "assume-div-by-3": Case(through(i32, lambda b, v: b.assume(v, predicate=DivBy(3))), "must be a power of two"),
    "assume-div-by-float": Case(through(f32, lambda b, v: b.assume(v, predicate=DivBy(8))), "integer or pointer"),
    "assume-every": Case(through(i32, lambda b, v: b.assume(v, predicate=DivBy(8, 32, 0))), "every=32 must be"),
    "assume-same-16": Case(through(i8, lambda b, v: b.assume(v, predicate=SameElements((16,)))), None),
    "assume-same-32": Case(through(i8, lambda b, v: b.assume(v, predicate=SameElements((32,)))), "within 0..dim"),
    "assume-bounded-i8": Case(through(i8, lambda b, v: b.assume(v, predicate=Bounded(-128, 127))), None),
    "assume-bounded-wide": Case(through(i8, lambda b, v: b.assume(v, predicate=Bounded(0, 128))), "[-128, 127]"),
    "assume-bounded-swapped": Case(through(i16, lambda b, v: b.assume(v, predicate=Bounded(5, 2))), "exceeds"),
    # f32-only modifiers: flush_to_zero everywhere, approx (and full on divf)
    "addf-f32-ftz": Case(through(f32, lambda b, v: b.addf(v, v, flush_to_zero=True)), None),
    "addf-f16-ftz": Case(
        through(f16, lambda b, v: b.addf(v, v, flush_to_zero=True)), "flush_to_zero works only on f32"
    ),
    "exp-f32-approx": Case(through(f32, lambda b, v: b.exp(v, rounding_mode="approx")), None),
    "exp-bf16-approx": Case(through(bf16, lambda b, v: b.exp(v, rounding_mode="approx")), "approx works only on f32"),
    "divf-f64-full": Case(through(f64, lambda b, v: b.divf(v, v, rounding_mode="full")), "full works only on f32"),
    # multimem: partition views only; f16/bf16 need one static unit stride
    "mm-pv": Case(multimem(PartitionViewType((8, 16), _mc(f16), (0, 1)), [S, S]), None),
    "mm-sv": Case(multimem(StridedViewType((8, 16), (8, 16), _mc(i32), (0, 1)), [S, S]), "take a strided_view"),
    "mm-f16-dyn": Case(
        multimem(PartitionViewType((8, 16), _mc(bf16, (DYNAMIC, DYNAMIC)), (0, 1)), [S, S]), "f16/bf16 multimem"
    ),
    "mm-i32-dyn": Case(multimem(PartitionViewType((8, 16), _mc(i32, (DYNAMIC, DYNAMIC)), (0, 1)), [S, S]), None),
    "mm-mixed": Case(
        multimem(PartitionViewType((8, 16), _mc(i32), (0, 1)), [S64, S], "multimem_load_reduce_view_tko"), "share"
    ),
    # ftof rounding modes per conversion (tileiras's verifier), and the widenings tileiras crashes on
    "ftof-narrow-zero": Case(ftof(f32, bf16, "zero"), None),
    "ftof-narrow-up": Case(ftof(f16, bf16, "positive_inf"), "narrowing conversions take nearest_even, zero"),
    "ftof-f64-f32-down": Case(ftof(f64, f32, "negative_inf"), None),
    "ftof-f64-tf32-down": Case(ftof(f64, tf32, "negative_inf"), "narrowing"),
    "ftof-e8m0-f32-up": Case(ftof(E8, f32, "positive_inf"), "narrowing"),
    "ftof-e8m0-f64-up": Case(ftof(E8, f64, "positive_inf"), None),
    "ftof-widen-away": Case(ftof(f16, f32, "nearest_away"), None),
    "ftof-widen-approx": Case(ftof(bf16, f32, "approx"), "widening (exact) conversions take"),
    "ftof-to-e5m2-zero": Case(ftof(f32, E5, "zero"), "conversions to f8E5M2 take nearest_even"),
    "ftof-tf32-crash": Case(ftof(f16, tf32, "negative_inf"), "tileiras 13.5 crashes"),
    "ftof-tf32-zero": Case(ftof(f16, tf32, "zero"), None),
    "ftof-bf16-crash": Case(ftof(E4, bf16, "nearest_away"), "tileiras 13.5 crashes"),
    "ftof-bf16-zero": Case(ftof(E4, bf16, "zero"), None),
    # mmaf: lhs and rhs of one element type
    "mmaf-same-f8": Case(_mmaf(E5, E5), None),
    "mmaf-mixed-f8": Case(_mmaf(E4, E5), "lhs and rhs must share one element type"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_verifier_rule(name: str) -> None:
    case = CASES[name]
    problems = verify_problems(case.module, V13_5)
    if case.message is None:
        assert problems == []
    else:
        assert any(case.message in p for p in problems), problems


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("name", sorted(CASES))
def test_tileiras_agrees(name: str) -> None:
    case = CASES[name]
    proc, cubin = compile_cubin(write_bytecode(case.module, V13_5), case.arch)
    if case.message is None:
        assert proc.returncode == 0, proc.stderr
        assert cubin.startswith(b"\x7fELF")
    else:
        assert proc.returncode != 0, f"tileiras compiled what the verifier rejects ({case.message})"


def _returning(fn: Function) -> Function:
    Builder(fn.body).return_()
    return fn


NON_ENTRY = Module([_returning(Function("helper", FunctionType((scalar(i32),)), entry=False))])
E5M3 = ScalarType("fnv8E5M3FNU", 130, 8, True, V13_4)  # what tileirdisasm reads from type tag 130


def test_non_entry_functions_are_the_simt_preview() -> None:
    problems = verify_problems(NON_ENTRY, V13_5)
    assert any("'simt' preview" in p and "--preview=simt" in p and "@helper" in p for p in problems)
    assert verify_problems(Module([_returning(Function("k", FunctionType((scalar(i32),))))]), V13_5) == []


def test_preview_call_is_named_not_unknown() -> None:
    with pytest.raises(VerifyError, match=r"preview\$call.*--preview=simt"):
        lookup("call")
    with pytest.raises(VerifyError, match="unknown Tile IR op 'calls'"):
        lookup("calls")

    def body(b: Builder, fn: Function) -> None:
        fn.body.append(Operation("call"))

    assert any("'call' is a 13.5 preview op" in p for p in verify_problems(kernel(body), V13_5))


def test_unmodelled_element_types_are_named() -> None:
    problems = verify_problems(ftof(f32, E5M3, "nearest_even"), V13_5)
    assert len(problems) == 1  # reported where the type is defined: the result of the ftof
    assert all("f8E5M3FNU" in p and "only for sm_107" in p for p in problems)
    odd = ScalarType("f7", 99, 7, True)
    assert any("f7 (tag 99) is not a Tile IR type" in p for p in verify_problems(ftof(f32, odd, "zero"), V13_5))


@pytest.mark.requires_tileiras
def test_tileiras_rejects_non_entry_functions_without_the_preview_flag() -> None:
    proc, _ = compile_cubin(write_bytecode(NON_ENTRY, V13_5), "sm_100")
    assert proc.returncode != 0
    assert "uses preview feature 'simt', which is not enabled" in proc.stderr


@pytest.mark.requires_tileiras
def test_tileiras_compiles_f8e5m3fnu_only_for_sm_107() -> None:
    data = write_bytecode(ftof(f32, E5M3, "nearest_even"), V13_5)
    rejected, _ = compile_cubin(data, "sm_100")
    assert rejected.returncode != 0
    assert "unsupported type 'fnv8E5M3FNU'" in rejected.stderr
    accepted, cubin = compile_cubin(data, "sm_107")
    assert accepted.returncode == 0, accepted.stderr
    assert cubin.startswith(b"\x7fELF")


def test_malformed_ops_are_reported_not_raised() -> None:
    crashed = []
    for module in malformed(1500, seed=7):
        try:
            verify_problems(module, V13_5)
        except Exception as exc:  # any exception at all is the failure this test looks for
            crashed.append(repr(exc))
    assert crashed == []


@pytest.mark.requires_tileiras
def test_verifier_and_tileirdisasm_agree_on_mutated_samples() -> None:
    """Both directions: what tileirdisasm rejects, the verifier rejects, and the reverse, except for the
    rules that mirror tileiras compile failures (their messages name tileiras 13.5)."""
    disagreements = []
    for name, module in mutants(600, seed=2026):
        problems = verify_problems(module, V13_5)
        try:
            data = write_bytecode(module, V13_5)
        except TileError:
            continue  # the writer refuses what it cannot encode; nothing to compare
        theirs = disassemble(data).returncode == 0
        lowering_only = bool(problems) and all("tileiras 13.5" in p for p in problems)
        if theirs != (not problems) and not (theirs and lowering_only):
            disagreements.append((name, theirs, problems[:1]))
    assert disagreements == []
