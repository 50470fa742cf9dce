"""The verifier finds structural, dominance, version, attribute, hint and typing problems."""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tile.ir import (
    V13_1,
    V13_2,
    V13_3,
    V13_5,
    Builder,
    FloatAttr,
    Function,
    FunctionType,
    Module,
    Operation,
    OptimizationHints,
    PartitionViewType,
    TensorViewType,
    UnsupportedVersionError,
    VerifyError,
    Version,
    f8E8M0FNU,
    f16,
    f32,
    i1,
    i8,
    i32,
    ptr,
    scalar,
    tile,
    token,
    verify,
    verify_problems,
)

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_kernels import FAMILIES, build_family

T = tile((16,), f32)


def _module(body: Callable[[Builder, Function], None], hints: OptimizationHints | None = None) -> Module:
    fn = Function("k", FunctionType((scalar(i32), scalar(ptr(f32)))), hints=hints)
    b = Builder(fn.body)
    body(b, fn)
    return Module([fn])


def _problems(body: Callable[[Builder, Function], None], version: Version = V13_5, **kw: object) -> list[str]:
    return verify_problems(_module(body, **kw), version)  # type: ignore[arg-type]  # kw is hints only


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("version", [V13_3, V13_5])
def test_family_kernels_verify(family: str, version: Version) -> None:
    assert verify_problems(build_family(family, version), version) == []


def test_missing_return() -> None:
    assert any("must end with return" in p for p in _problems(lambda b, fn: None))


def test_terminator_in_the_middle() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.return_()
        b.make_token()
        b.return_()

    assert any("terminator must be the last op" in p for p in _problems(body))


def test_value_used_before_definition() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(1.0, T)
        y = b.addf(x, x)
        ops = fn.body.ops
        ops[0], ops[1] = ops[1], ops[0]
        b.negf(y)
        b.return_()

    assert any("not defined before this use" in p for p in _problems(body))


def test_region_values_do_not_escape() -> None:
    def body(b: Builder, fn: Function) -> None:
        zero = b.constant(0, scalar(i32))
        with b.for_(zero, zero, zero) as loop:
            inner = b.addi(loop.iv, zero)
        b.addi(inner, zero)
        b.return_()

    assert any("out of scope" in p for p in _problems(body))


def test_mismatched_operand_types() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.addf(b.constant(1.0, T), b.constant(1.0, tile((16,), f16)), result_type=T)
        b.return_()

    assert any("same type" in p for p in _problems(body))


def test_op_newer_than_the_version() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(1.0, T)
        b.atan2(x, x)
        b.return_()

    assert any("needs bytecode 13.2+" in p for p in _problems(body, V13_1))
    assert not _problems(body, V13_2)


def test_attribute_newer_than_the_version() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.exp(b.constant(1.0, T), rounding_mode="approx")
        b.return_()

    assert any("rounding_mode" in p and "13.3+" in p for p in _problems(body, V13_2))
    assert not _problems(body, V13_3)


@pytest.mark.parametrize(
    ("hints", "message"),
    [
        ({"sm_91": {"occupancy": 2}}, "unknown architecture key 'sm_91'"),
        ({"sm_90": {"occupancy": 64}}, "occupancy"),
        ({"sm_90": {"num_cta_in_cga": 3}}, "power of two"),
        ({"sm_90": {"ocupancy": 2}}, "unknown hint 'ocupancy'"),
        ({"sm_90": {"latency": 2}}, "unknown hint 'latency'"),
    ],
)
def test_invalid_entry_hints(hints: dict[str, dict[str, int]], message: str) -> None:
    def body(b: Builder, fn: Function) -> None:
        b.return_()

    assert any(message in p for p in _problems(body, hints=OptimizationHints.of(hints)))


def test_default_hints_need_13_3() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.return_()

    hints = OptimizationHints.of({"default": {"num_worker_warps_per_cta": 4}})
    assert any("13.3+" in p for p in _problems(body, V13_1, hints=hints))
    assert not _problems(body, V13_3, hints=hints)


def _load(**attrs: Any) -> Callable[[Builder, Function], None]:
    tv = TensorViewType(f32, (None,), (1,))

    def body(b: Builder, fn: Function) -> None:
        view = b.make_partition_view(
            b.make_tensor_view(fn.params[1], [fn.params[0]], [], result_type=tv),
            result_type=PartitionViewType((16,), tv, (0,)),
        )
        b.load_view_tko(view, [fn.params[0]], **attrs)
        b.return_()

    return body


def test_load_hints_and_orderings() -> None:
    assert not _problems(_load(optimization_hints={"sm_90": {"latency": 3, "allow_tma": True}}))
    assert any("latency" in p for p in _problems(_load(optimization_hints={"sm_90": {"latency": 11}})))
    assert any(
        "unknown hint 'occupancy'" in p for p in _problems(_load(optimization_hints={"sm_90": {"occupancy": 1}}))
    )
    assert any("not allowed" in p for p in _problems(_load(memory_ordering_semantics="release", memory_scope="device")))
    assert any("needs a memory_scope" in p for p in _problems(_load(memory_ordering_semantics="acquire")))


def test_unknown_op_and_bad_segments() -> None:
    def body(b: Builder, fn: Function) -> None:
        fn.body.append(Operation("frobnicate"))
        x = b.constant(1.0, T)
        fn.body.append(Operation("addf", [x, x], [T], attributes={"rounding_mode": 0}, segments=[2]))
        b.return_()

    problems = _problems(body)
    assert any("unknown op 'frobnicate'" in p for p in problems)
    assert any("segments" in p for p in problems)


def test_verify_raises_with_every_problem_and_pickles() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.print_tko("x")

    module = _module(body)
    with pytest.raises(VerifyError) as info:
        verify(module, V13_1)
    assert "must end with return" in str(info.value)
    assert "@k" in str(info.value)
    clone = pickle.loads(pickle.dumps(info.value))
    assert str(clone) == str(info.value)
    assert not isinstance(info.value, UnsupportedVersionError)


def test_pointer_and_view_typing() -> None:
    def body(b: Builder, fn: Function) -> None:
        ptrs = b.broadcast(b.reshape(fn.params[1], result_type=tile((1,), ptr(f32))), result_type=tile((16,), ptr(f32)))
        offsets = b.iota(result_type=tile((16,), i32))
        moved = b.offset(ptrs, offsets)
        b.load_ptr_tko(moved, result_types=[tile((16,), f16), token])  # wrong element type
        bad_view = TensorViewType(f16, (None,), (1,))
        b.make_tensor_view(fn.params[1], [fn.params[0]], [], result_type=bad_view)  # base points at f32
        b.return_()

    problems = _problems(body)
    assert any("value type tile<16xf16> must be tile<16xf32>" in p for p in problems)
    assert any("base must be tile<ptr<f16>>" in p for p in problems)


def test_cat_and_shape_queries() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(1.0, T)
        b.cat(x, x, dim=0, result_type=tile((16,), f32))
        tv = b.make_tensor_view(fn.params[1], [fn.params[0]], [], result_type=TensorViewType(f32, (None,), (1,)))
        b.get_tensor_shape(tv, [scalar(i32), scalar(i32)])
        b.return_()

    problems = _problems(body)
    assert any("cat result must be tile<32xf32>" in p for p in problems)
    assert any("needs 1 results" in p for p in problems)


def test_print_format_must_match_its_arguments() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.print_tko("%d and %f, 100%%\n", [fn.params[0]])
        b.return_()

    assert any("2 conversions for 1 arguments" in p for p in _problems(body))


def test_mma_element_types_and_reduce_shapes() -> None:
    def body(b: Builder, fn: Function) -> None:
        a = b.constant(1.0, tile((16, 16), f32))
        b.mmaf(a, a, b.constant(0.0, tile((16, 16), f16)), result_type=tile((16, 16), f16))
        with b.reduce([a], 0, [FloatAttr.of(f32, 0.0)], result_types=[tile((8,), f32)]) as r:
            b.yield_([b.addf(r.args[0], r.args[1])])
        b.return_()

    problems = _problems(body)
    assert any("unsupported element types f32 x f32 -> f16" in p for p in problems)
    assert any("reduce result must be tile<16xf32>" in p for p in problems)


def test_get_global_must_name_a_global_and_types_must_exist() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.get_global(name="missing", result_type=scalar(ptr(f32)))
        b.constant(1.0, tile((4,), f8E8M0FNU))
        b.return_()

    assert any("'missing', which is not a global" in p for p in _problems(body))
    assert any("f8E8M0FNU" in p and "13.2+" in p for p in _problems(body, V13_1))


def test_value_defined_twice_is_reported() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(1.0, T)
        twin = b.negf(x)
        again = b.negf(x).defining_op
        assert again is not None
        again.results = [twin]  # the same Value object as the result of two ops
        b.return_()

    assert any("defined twice" in p for p in _problems(body))


def test_pointer_casts_and_pack_sizes() -> None:
    def body(b: Builder, fn: Function) -> None:
        b.int_to_ptr(b.constant(0, tile((16,), i32)), result_type=tile((16,), ptr(f32)))
        b.pack(b.constant(0.0, T), result_type=tile((16,), i8))
        b.return_()

    problems = _problems(body)
    assert any("operand must be a tile of i64" in p for p in problems)
    assert any("keeps the size in bytes" in p for p in problems)


def test_constant_buffer_size() -> None:
    from tile.ir import DenseElementsAttr

    def body(b: Builder, fn: Function) -> None:
        b.constant(DenseElementsAttr(tile((4,), f32), b"\x00" * 6))
        b.constant(DenseElementsAttr(tile((4,), f32), b"\x00" * 16))
        b.constant(DenseElementsAttr(tile((16,), i1), b"\x00\xff"))
        b.return_()

    problems = _problems(body)
    assert len(problems) == 1
    assert "needs 16 bytes (or one element), got 6" in problems[0]


def test_problems_name_the_source_location() -> None:
    from tile.ir import FileLoc

    def body(b: Builder, fn: Function) -> None:
        with b.location(FileLoc("kernel.py", 7, 3)):
            b.addf(b.constant(1.0, T), b.constant(1.0, tile((16,), f16)), result_type=T)
        b.return_()

    assert any("(kernel.py:7:3)" in p and "same type" in p for p in _problems(body))
