"""Types: spellings, structural equality, version availability, float bit patterns."""

from __future__ import annotations

import math
import struct
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile.ir import (
    DYNAMIC,
    V13_1,
    V13_2,
    V13_3,
    V13_4,
    FloatAttr,
    FunctionType,
    GatherScatterViewType,
    IRTypeError,
    Padding,
    PartitionViewType,
    PointerAttr,
    PointerType,
    StridedViewType,
    TensorViewType,
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
    i32,
    ptr,
    scalar,
    tf32,
    tile,
    token,
)
from tile.ir._types import SCALARS, type_since

TV = TensorViewType(f32, (DYNAMIC, 64), (DYNAMIC, 1))


def test_spellings_match_tileirdisasm() -> None:
    assert str(tile((128, 64), f16)) == "tile<128x64xf16>"
    assert str(scalar(ptr(f32))) == "tile<ptr<f32>>"
    assert str(scalar(i32)) == "tile<i32>"
    assert str(token) == "token"
    assert str(TensorViewType(f32, (DYNAMIC,), (1,))) == "tensor_view<?xf32, strides=[1]>"
    pv = PartitionViewType((128,), TensorViewType(f32, (DYNAMIC,), (1,)), (0,))
    assert str(pv) == "partition_view<tile=(128), tensor_view<?xf32, strides=[1]>>"


def test_types_are_values() -> None:
    assert tile((4,), f32) == tile([4], f32)
    assert len({tile((4,), f32), tile((4,), f32), tile((4,), f16)}) == 2
    assert PartitionViewType((8, 8), TV, (1, 0)) != PartitionViewType((8, 8), TV, (0, 1))


@pytest.mark.parametrize(
    ("t", "since"),
    [
        (tile((4,), f32), V13_1),
        (scalar(f8E8M0FNU), V13_2),
        (scalar(f4E2M1FN), V13_3),
        (tile((2,), i4), V13_3),
        (StridedViewType((8,), (4,), TV, (0,)), V13_3),
        (GatherScatterViewType((8,), TV, 0, Padding.ZERO), V13_3),
        (scalar(PointerType(f32, PointerAttr.MULTICAST)), V13_4),
        (FunctionType((scalar(f8E8M0FNU),)), V13_2),
    ],
)
def test_type_since(t: object, since: object) -> None:
    assert type_since(t) == since  # type: ignore[arg-type]  # parametrized values are Types


def test_scalar_tags_are_unique() -> None:
    assert len({s.tag for s in SCALARS}) == len(SCALARS) == 15
    assert {s.name for s in SCALARS} >= {"i1", "i4", "i64", "tf32", "f8E4M3FN", "f8E5M2"}


@given(st.floats(allow_nan=False, width=32))
def test_f32_bits_round_trip(value: float) -> None:
    attr = FloatAttr.of(f32, value)
    assert attr.bits == struct.unpack("<I", struct.pack("<f", value))[0]
    assert attr.value == value


@given(st.floats(allow_nan=False, width=16))
def test_f16_bits_match_struct(value: float) -> None:
    assert FloatAttr.of(f16, value).bits == struct.unpack("<H", struct.pack("<e", value))[0]
    assert FloatAttr.of(f16, value).value == value


@pytest.mark.parametrize(
    ("t", "value", "bits"),
    [
        (bf16, 1.0, 0x3F80),
        (bf16, -2.5, 0xC020),
        (tf32, 1.0, 0x1FC00),
        (f8E4M3FN, 448.0, 0x7E),
        (f8E4M3FN, -1.5, 0xBC),
        (f8E5M2, 1.0, 0x3C),
        (f8E5M2, -math.inf, 0xFC),
        (f8E8M0FNU, 1.0, 0x7F),
        (f8E8M0FNU, 0.25, 0x7D),
        (f4E2M1FN, 6.0, 0x7),
        (f4E2M1FN, -0.5, 0x9),
        (f64, -1.5, 0xBFF8000000000000),
    ],
)
def test_small_float_encodings(t: object, value: float, bits: int) -> None:
    attr = FloatAttr.of(t, value)  # type: ignore[arg-type]  # parametrized values are ScalarTypes
    assert attr.bits == bits
    assert attr.value == value


@pytest.mark.parametrize(
    ("t", "value", "why"),
    [
        (f8E4M3FN, math.inf, "f8E4M3FN has no infinity"),
        (f8E4M3FN, 1000.0, "1000.0 is outside the finite range of f8E4M3FN"),
        (f4E2M1FN, math.nan, "f4E2M1FN has no NaN"),
    ],
)
def test_unrepresentable_floats_are_rejected(t: object, value: float, why: str) -> None:
    with pytest.raises(IRTypeError, match=why):
        FloatAttr.of(t, value)  # type: ignore[arg-type]  # parametrized values are ScalarTypes


def test_float_attr_needs_float_type() -> None:
    with pytest.raises(IRTypeError, match="float type"):
        FloatAttr.of(i1, 1.0)


def test_importing_tile_ir_loads_neither_numpy_nor_cuda() -> None:
    import subprocess

    code = "import sys, tile.ir; print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'cuda')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
