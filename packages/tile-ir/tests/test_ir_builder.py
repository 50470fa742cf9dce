"""The builder: result inference, attribute defaults and spelling, structured ops, and helpful errors."""

from __future__ import annotations

import pytest

from tile.ir import (
    V13_1,
    V13_5,
    Builder,
    ComparisonPredicate,
    FloatAttr,
    Function,
    FunctionType,
    IRTypeError,
    RoundingMode,
    f16,
    f32,
    i1,
    i32,
    scalar,
    tile,
    token,
    verify,
)

T = tile((16,), f32)


def _builder(version: object = V13_5) -> tuple[Function, Builder]:
    fn = Function("k", FunctionType((scalar(i32),)))
    return fn, Builder(fn.body, version=version)  # type: ignore[arg-type]  # tests pass Versions


def test_single_result_ops_infer_types_and_default_attributes() -> None:
    _, b = _builder()
    x = b.constant(2.0, T)
    y = b.addf(x, x)
    op = y.defining_op
    assert op is not None
    assert y.type == T
    assert op.attributes == {"rounding_mode": RoundingMode.NEAREST_EVEN}
    c = b.cmpf(x, y, comparison_predicate="less_than")
    assert c.type == tile((16,), i1)
    assert c.defining_op is not None
    assert c.defining_op.attributes["comparison_predicate"] is ComparisonPredicate.LESS_THAN
    assert b.make_token().type == token


def test_unit_attributes_are_stored_only_when_set() -> None:
    _, b = _builder()
    x = b.constant(2.0, T)
    assert b.maxf(x, x).defining_op.attributes == {}  # type: ignore[union-attr]  # a result always has its op
    assert b.maxf(x, x, propagate_nan=True).defining_op.attributes == {"propagate_nan": True}  # type: ignore[union-attr]  # idem


def test_conversions_need_a_result_type() -> None:
    _, b = _builder()
    x = b.constant(2.0, T)
    with pytest.raises(IRTypeError, match="result_type"):
        b.ftof(x)
    assert b.ftof(x, result_type=tile((16,), f16)).type == tile((16,), f16)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b, x: b.addf(x, x, rounding="zero"), "has no attribute"),
        (lambda b, x: b.addf(x, x, rounding_mode="sideways"), "must be one of"),
        (lambda b, x: b.addf(x), "needs operand 'rhs'"),
        (lambda b, x: b.cmpi(x, x, comparison_predicate="equal"), "needs attribute 'signedness'"),
        (lambda b, x: b.join_tokens(x), "takes a sequence"),
        (lambda b, x: b.frobnicate(x), "no method or Tile IR op"),
    ],
)
def test_builder_errors_name_the_problem(call: object, message: str) -> None:
    _, b = _builder()
    x = b.constant(2.0, T)
    with pytest.raises((IRTypeError, AttributeError), match=message):
        call(b, x)  # type: ignore[operator]  # parametrized callables


def test_for_loop_carries_values_and_verifies() -> None:
    fn, b = _builder()
    zero, one = b.constant(0, scalar(i32)), b.constant(1, scalar(i32))
    acc = b.constant(0.0, T)
    with b.for_(zero, fn.params[0], one, [acc]) as loop:
        assert loop.iv.type == scalar(i32)
        assert [a.type for a in loop.args] == [T]
        b.continue_([b.addf(loop.args[0], acc)])
    assert [r.type for r in loop.results] == [T]
    b.return_()
    verify_ok(fn)


def test_region_without_values_gets_its_terminator() -> None:
    fn, b = _builder()
    zero, one = b.constant(0, scalar(i32)), b.constant(1, scalar(i32))
    with b.for_(zero, one, one):
        b.make_token()
    cond = b.cmpi(zero, one, comparison_predicate="less_than", signedness="signed")
    with b.if_(cond) as br, br.then_():
        b.make_token()
    b.return_()
    names = [op.name for op in fn.walk()]
    assert names.count("continue") == 1
    assert names.count("yield") == 2
    verify_ok(fn)


def test_carrying_region_must_be_terminated_explicitly() -> None:
    _, b = _builder()
    zero = b.constant(0, scalar(i32))
    with pytest.raises(IRTypeError, match="explicit 'continue'"), b.for_(zero, zero, zero, [zero]):
        pass


def test_reduce_body_arguments_pair_elements_and_accumulators() -> None:
    fn, b = _builder()
    x = b.constant(1.0, tile((4, 8), f32))
    with b.reduce([x], 1, [FloatAttr.of(f32, 0.0)]) as r:
        assert [a.type for a in r.args] == [scalar(f32), scalar(f32)]
        b.yield_([b.addf(r.args[0], r.args[1])])
    assert r.results[0].type == tile((4,), f32)
    b.return_()
    verify_ok(fn)


def test_print_has_no_token_before_13_2() -> None:
    _, b = _builder(V13_1)
    assert b.print_tko("hello\n") is None
    _, b = _builder()
    assert b.print_tko("hello\n") is not None


def test_location_context() -> None:
    from tile.ir import FileLoc

    _, b = _builder()
    loc = FileLoc("k.py", 3, 1)
    with b.location(loc):
        x = b.constant(1.0, T)
    assert x.defining_op is not None
    assert x.defining_op.loc == loc
    assert b.constant(1.0, T).defining_op.loc is None  # type: ignore[union-attr]  # a result always has its op


def verify_ok(fn: Function) -> None:
    from tile.ir import Module

    verify(Module([fn]))


def test_package_docstring_example_runs() -> None:
    import doctest

    import tile.ir

    result = doctest.testmod(tile.ir, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 10
    assert result.failed == 0
