"""Attributes: dense constants, hints helpers, dictionaries, enums' names."""

from __future__ import annotations

import pytest

from tile.ir import (
    BoolAttr,
    DenseElementsAttr,
    DictAttr,
    IntegerAttr,
    IRTypeError,
    MemoryScope,
    OptimizationHints,
    RoundingMode,
    f16,
    f32,
    i1,
    i8,
    i32,
    ptr,
    scalar,
    tf32,
    tile,
)


def test_splat_constants() -> None:
    assert DenseElementsAttr.splat(tile((64, 64), f32), 0.0).data == b"\x00\x00\x00\x00"
    assert DenseElementsAttr.splat(tile((4,), i1), True).data == b"\xff"
    assert DenseElementsAttr.splat(scalar(i32), -1).data == b"\xff\xff\xff\xff"
    assert DenseElementsAttr.splat(scalar(f16), 1.0).data == b"\x00\x3c"
    assert len(DenseElementsAttr.splat(scalar(tf32), 1.0).data) == 3


def test_from_values_packs_i1_and_orders_row_major() -> None:
    assert DenseElementsAttr.from_values(tile((4,), i1), [True, False, True, True]).data == b"\x0d"
    assert DenseElementsAttr.from_values(tile((2,), i8), [1, -1]).data == b"\x01\xff"


def test_constants_need_number_elements() -> None:
    with pytest.raises(IRTypeError, match="constants need a number element type, got ptr<f32>"):
        DenseElementsAttr.splat(scalar(ptr(f32)), 0)


def test_hints_from_plain_values() -> None:
    hints = OptimizationHints.of({"sm_90": {"occupancy": 2, "allow_tma": False}, "default": {}})
    arch, table = hints.by_arch[0]
    assert arch == "sm_90"
    assert table.get("occupancy") == IntegerAttr(i32, 2)
    assert table.get("allow_tma") == BoolAttr(False)
    assert table.get("latency") is None
    assert hints.to_dict() == {"sm_90": {"occupancy": 2, "allow_tma": False}, "default": {}}


def test_dictionary_preserves_order() -> None:
    d = DictAttr.of({"b": BoolAttr(True), "a": BoolAttr(False)})
    assert [k for k, _ in d.items] == ["b", "a"]


def test_enum_keywords() -> None:
    assert str(RoundingMode.NEAREST_EVEN) == "nearest_even"
    assert str(MemoryScope.TL_BLK) == "tl_blk"
    assert int(RoundingMode.APPROX) == 4
