"""The kernel language surface: the op catalog, annotations, helpers marker, dtypes, promotion and broadcasting."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.compiler.lang as tile
from tile.compiler._errors import TileError
from tile.compiler._typecheck import Checker
from tile.compiler._types import DTYPES, broadcast_shapes, promote
from tile.compiler.lang import (
    OPS,
    Const,
    ConstAnnotation,
    LangOp,
    Mut,
    MutAnnotation,
    Ptr,
    PtrAnnotation,
    Tensor,
    TensorAnnotation,
    f16,
    f32,
)
from tile.compiler.lang._ops import KernelOnlyError


def test_every_op_row_is_exported_under_its_name() -> None:
    for name, op in OPS.items():
        assert getattr(tile, name) is op
        assert name in tile.__all__


def test_every_op_family_and_method_has_a_rule_in_the_checker() -> None:
    for op in OPS.values():
        assert callable(getattr(Checker, f"op_{op.family}", None)), op.family
    for kind, methods in tile.METHODS.items():
        for family in methods.values():
            assert family in OPS or callable(getattr(Checker, f"method_{family}", None)), (kind, family)


def test_ops_cannot_be_called_outside_kernels() -> None:
    with pytest.raises(TypeError, match=r"tile.exp\(\) can only be called inside a @tile.entry kernel") as info:
        tile.exp(1.0)
    assert isinstance(info.value, KernelOnlyError)
    assert isinstance(info.value, TileError)
    assert repr(tile.sum) == "<tile.sum>"


def test_cdiv_sizes_a_grid_on_the_host() -> None:
    # cuTile code computes grids with ct.cdiv on the host; tile.cdiv rounds as the kernel's divi positive_inf does
    assert [tile.cdiv(n, 128) for n in (0, 1, 128, 129, 1001)] == [0, 1, 1, 2, 8]
    assert tile.cdiv(-7, 2) == -3
    assert tile.cdiv(np.int64(10), 4) == 3
    for bad in ((1.5, 2), (4, True), ("8", 2)):
        with pytest.raises(KernelOnlyError, match="takes ints"):
            tile.cdiv(*bad)
    with pytest.raises(ZeroDivisionError, match="by zero"):
        tile.cdiv(3, 0)


def test_op_parameters_follow_the_table() -> None:
    names = [p.name for p in tile.sum.params]
    assert names == ["x", "axis", "keepdims"]
    assert tile.sum.params[0].required
    assert not tile.sum.params[1].required
    assert tile.print.params[0].variadic


def test_tensor_annotations() -> None:
    assert Tensor[f32, -1] == TensorAnnotation(f32, (-1,))
    assert Tensor[f16, ("BM", 64)] == TensorAnnotation(f16, ("BM", 64))
    assert Mut[Tensor[f32, "B"]] == MutAnnotation(TensorAnnotation(f32, ("B",)))
    assert Const[int] == ConstAnnotation(int)
    assert Ptr[f32] == PtrAnnotation(f32)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Tensor[f32], "write Tensor"),
        (lambda: Tensor[3, 4], "write Tensor"),
        (lambda: Tensor["not a name", 4], "write Tensor"),
        (lambda: Tensor[f32, 0], "tensor shape items"),
        (lambda: Tensor[f32, 2.0], "tensor shape items"),
        (lambda: Tensor[f32, "not valid"], "tensor shape items"),
        (lambda: Mut[Tensor[f32, -1]], "tile shape"),
        (lambda: Mut[f32], "write Mut"),
        (lambda: Const[str], "write Const"),
        (lambda: Ptr[int], "write Ptr"),
    ],
)
def test_malformed_annotations_raise(build: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        build()  # type: ignore[operator]  # lambdas from the table


def test_function_marks_and_returns_the_same_function() -> None:
    def helper(x: int) -> int:
        return x + 1

    assert tile.function(helper) is helper
    assert tile.is_function(helper)
    assert helper(1) == 2
    assert not tile.is_function(len)


def test_dtype_table() -> None:
    assert tile.bool_ is DTYPES["i1"]
    assert (f32.itemsize, f16.itemsize, tile.tf32.itemsize, tile.i1.itemsize) == (4, 2, 4, 1)
    assert tile.f8e4m3fn.ir == "f8E4M3FN"
    assert all(isinstance(getattr(tile, n), type(f32)) for n in DTYPES)
    assert repr(f32) == "tile.f32"


def test_promotion_rules() -> None:
    d = DTYPES
    assert promote(d["f16"], d["f32"]) is d["f32"]
    assert promote(d["f16"], d["bf16"]) is d["f32"]
    assert promote(d["tf32"], d["f32"]) is d["f32"]
    assert promote(d["i8"], d["i32"]) is d["i32"]
    assert promote(d["u8"], d["u16"]) is d["u16"]
    for a, b in [("i32", "f32"), ("i32", "u32"), ("i1", "i32"), ("i1", "f16")]:
        assert promote(d[a], d[b]) is None


@given(st.sampled_from(sorted(DTYPES)), st.sampled_from(sorted(DTYPES)))
def test_promotion_is_symmetric_and_widening(a: str, b: str) -> None:
    pa, pb = promote(DTYPES[a], DTYPES[b]), promote(DTYPES[b], DTYPES[a])
    assert pa == pb
    if pa is not None:
        assert pa.kind == DTYPES[a].kind == DTYPES[b].kind
        assert pa.itemsize >= max(DTYPES[a].itemsize, DTYPES[b].itemsize)


shapes = st.lists(st.sampled_from([1, 2, 4, 8]), min_size=0, max_size=4).map(tuple)


@given(shapes, shapes)
def test_broadcasting_agrees_with_numpy(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    try:
        want: tuple[int, ...] | None = tuple(np.broadcast_shapes(a, b))
    except ValueError:
        want = None
    assert broadcast_shapes(a, b) == want


def test_lang_ops_are_langop_rows() -> None:
    assert all(isinstance(op, LangOp) for op in OPS.values())
    families = {op.family for op in OPS.values()}
    assert {"reduce", "scan", "mma", "atomic", "grid", "load_tile_like"} <= families
    assert list(itertools.islice(OPS, 1)) == ["exp"]
