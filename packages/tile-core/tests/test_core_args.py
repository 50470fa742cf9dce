"""Argument kinds, conversion, range checks and parameter layout (no GPU)."""

from __future__ import annotations

import ctypes
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tile.core as tc
from tile.core._args import KINDS, infer_kind
from tile.core._params import kernel_params

# The nine parameters of the vec_add fixture: (ptr, i32 extent, i32 stride) per 1-D array.
VEC_ADD = ("ptr", "i32", "i32") * 3


def test_vec_add_layout_matches_the_cuda_parameter_block() -> None:
    offsets = [offset for offset, _ in tc.param_layout(VEC_ADD)]
    assert offsets == [0, 8, 12, 16, 24, 28, 32, 40, 44]


def test_layout_aligns_each_parameter_naturally() -> None:
    assert tc.param_layout(["i32", "f64", "f16", "bf16", "ptr"]) == ((0, 4), (8, 8), (16, 2), (18, 2), (24, 8))


@pytest.mark.parametrize(
    ("kind", "value", "carrier"),
    [
        ("i32", 7, np.int32),
        ("i64", 2**40, np.int64),
        ("f16", 1.5, np.float16),
        ("f32", 2, np.float32),
        ("f64", 0.1, np.float64),
    ],
)
def test_scalars_are_converted_to_their_carrier(kind: str, value: Any, carrier: type) -> None:
    packed = tc.pack_args([value], [kind])
    assert type(packed.values[0]) is carrier
    assert packed.values[0] == carrier(value)


def test_bf16_travels_as_its_bit_pattern() -> None:
    (bits,) = tc.pack_args([1.0 / 3.0], ["bf16"]).values
    assert bits.dtype == np.uint16
    assert bits == np.array(1.0 / 3.0, ml_dtypes.bfloat16).view(np.uint16)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_integer_ranges_are_enforced(value: int) -> None:
    for kind, bits in (("i32", 32), ("i64", 64)):
        if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            assert int(tc.pack_args([value], [kind]).values[0]) == value
        else:
            with pytest.raises(tc.LaunchArgumentError, match="does not fit"):
                tc.pack_args([value], [kind])


@pytest.mark.parametrize(("kind", "value"), [("i32", 1.5), ("i32", True), ("f32", "1.0"), ("f64", None)])
def test_wrong_scalar_types_are_rejected(kind: str, value: Any) -> None:
    with pytest.raises(tc.LaunchArgumentError, match=f"parameter, got {value!r}"):
        tc.pack_args([value], [kind])


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (np.int8(1), "i8"),
        (np.int16(1), "i16"),
        (np.uint8(1), "u8"),
        (np.uint16(1), "u16"),
        (np.int32(1), "i32"),
        (np.int64(1), "i64"),
        (np.float16(1), "f16"),
        (ml_dtypes.bfloat16(1), "bf16"),
        (np.float32(1), "f32"),
        (np.float64(1), "f64"),
    ],
)
def test_numpy_scalars_keep_their_kind(value: Any, kind: str) -> None:
    assert infer_kind(value) == kind


@pytest.mark.parametrize("value", [1, 1.0, "x", np.bool_(True), np.complex64(1)])
def test_ambiguous_values_need_a_signature(value: Any) -> None:
    with pytest.raises(tc.LaunchArgumentError, match="pass a signature"):
        tc.pack_args([value])


def test_raw_pointers_need_unchecked_and_are_never_null() -> None:
    assert tc.pack_args([0x7F0000001000], ["ptr"], unchecked=True).values == (0x7F0000001000,)
    with pytest.raises(tc.LaunchArgumentError, match=r"raw address .* opt out explicitly with unchecked=True"):
        tc.pack_args([0x7F0000001000], ["ptr"])
    with pytest.raises(tc.NullHandleError, match="argument 0 is a null pointer"):
        tc.pack_args([0], ["ptr"], unchecked=True)
    with pytest.raises(tc.LaunchArgumentError, match="must be a DeviceBuffer"):
        tc.pack_args([1.0], ["ptr"])


def test_argument_count_is_checked_against_the_kernel() -> None:
    layout = tc.param_layout(VEC_ADD)
    with pytest.raises(tc.LaunchArgumentError, match="takes 9 parameters but 8 arguments"):
        tc.pack_args([0x1000, 4, 1] * 2 + [0x1000, 4], VEC_ADD[:8], expected=layout)


def test_argument_sizes_are_checked_against_the_kernel() -> None:
    layout = tc.param_layout(VEC_ADD)
    wrong = ("ptr", "i64", "i32", *VEC_ADD[3:])
    with pytest.raises(tc.LaunchArgumentError, match=r"argument 1 is i64 \(8 bytes\) but .* has 4"):
        tc.pack_args([0x1000, 4, 1] * 3, wrong, expected=layout)


def test_signature_problems_are_reported() -> None:
    with pytest.raises(tc.LaunchArgumentError, match="unknown argument kind"):
        tc.pack_args([1], ["u128"])
    with pytest.raises(tc.LaunchArgumentError, match="2 kinds but 1 arguments"):
        tc.pack_args([1], ["i32", "i32"])


def test_kernel_params_point_at_each_value_in_its_c_layout() -> None:
    kinds = ("ptr", "i32", "i64", "f16", "bf16", "f32", "f64")
    values = [0x7F0000001000, -7, -(2**40), 1.5, 1.0 / 3.0, 0.25, 0.1]
    keep, address = kernel_params(tc.pack_args(values, kinds, unchecked=True))
    cells = (ctypes.c_void_p * len(kinds)).from_address(address)
    read: list[Any] = [
        ctypes.c_uint64,
        ctypes.c_int32,
        ctypes.c_int64,
        ctypes.c_uint16,
        ctypes.c_uint16,
        ctypes.c_float,
    ]
    got = [kind.from_address(cell).value for kind, cell in zip(read, cells, strict=False)]
    assert got[:3] == values[:3]
    assert got[3] == int(np.float16(1.5).view(np.uint16))
    assert got[4] == int(np.array(1.0 / 3.0, ml_dtypes.bfloat16).view(np.uint16))
    assert got[5] == 0.25
    assert ctypes.c_double.from_address(int(cells[6] or 0)).value == 0.1
    assert keep is not None
    assert kernel_params(tc.pack_args([], []))[1] != 0  # no parameters: still a valid (empty) array


_UNSIGNED = {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}


@pytest.mark.parametrize(("kind", "bits"), [("u8", 8), ("u16", 16), ("u32", 32), ("u64", 64)])
def test_unsigned_kinds_take_their_whole_range_as_the_same_bits(kind: str, bits: int) -> None:
    """A uN parameter is N bits wide and takes 0 .. 2**N - 1 (tile.frontend's unsigned scalars pack as these; the
    signed kinds refuse the upper half) and nothing outside it."""
    assert tc.KINDS[kind].size == bits // 8
    top = 2**bits - 1
    keep, address = kernel_params(tc.pack_args([0, top, np.uint64(7)], [kind] * 3))
    cells = (ctypes.c_void_p * 3).from_address(address)
    carrier = _UNSIGNED[bits]
    assert [carrier.from_address(cells[i] or 0).value for i in range(3)] == [0, top, 7]
    for bad in (-1, top + 1):
        with pytest.raises(tc.LaunchArgumentError, match=rf"does not fit a u{bits} parameter"):
            tc.pack_args([bad], [kind])
    with pytest.raises(tc.LaunchArgumentError, match=rf"expected an integer for a u{bits} parameter"):
        tc.pack_args([True], [kind])
    del keep


@pytest.mark.parametrize(("kind", "carrier"), [("i8", ctypes.c_int8), ("i16", ctypes.c_int16)])
def test_narrow_signed_kinds_are_as_wide_as_their_bits(kind: str, carrier: Any) -> None:
    """tileiras gives an i8 (i16) kernel parameter 1 (2) bytes: the kinds have that size, take their whole range and
    refuse one past either end (a 4-byte cell failed the launch's layout check on the GPU)."""
    bits = 8 * ctypes.sizeof(carrier)
    assert tc.KINDS[kind].size == bits // 8
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    keep, address = kernel_params(tc.pack_args([lo, hi, np.int8(-3)], [kind] * 3))
    cells = (ctypes.c_void_p * 3).from_address(address)
    assert [carrier.from_address(cells[i] or 0).value for i in range(3)] == [lo, hi, -3]
    for bad in (lo - 1, hi + 1):
        with pytest.raises(tc.LaunchArgumentError, match=rf"does not fit an i{bits} parameter"):
            tc.pack_args([bad], [kind])
    del keep


def test_float_kinds_take_any_int_a_float_holds() -> None:
    """The frontend's scalar check passes ints up to the largest a float holds for float parameters; bf16's carrier
    (ml_dtypes) takes no int of 2**63 or more directly, so every float kind converts ints through float first, and an
    int no float holds is refused with the typed error."""
    for name in ("bf16", "f32", "f64"):  # (f16's range ends at 65504: numpy rounds larger values to inf)
        KINDS[name].convert(2**63)
    assert float(KINDS["f64"].convert(2**63)) == 2.0**63
    assert KINDS["bf16"].convert(2**64) == KINDS["bf16"].convert(2.0**64)
    with pytest.raises(tc.LaunchArgumentError, match="integer of 1101 bits fits no float"):
        KINDS["bf16"].convert(2**1100)


_EVERY_KIND = ("ptr", "i8", "i16", "u8", "u16", "i32", "i64", "u32", "u64", "f16", "bf16", "f32", "f64")
_CASES: list[tuple[list[Any], tuple[str, ...]]] = [
    (
        [0x7F0000001000, -128, -(2**15), 255, 2**16 - 1, -7, -(2**63), 2**32 - 1, 2**64 - 1, 1.5, 1 / 3, 0.25, 0.1],
        _EVERY_KIND,
    ),
    ([0x1000, 127, 2**15 - 1, 0, 0, 2**31 - 1, 2**63 - 1, 0, 0, 2, 3, 2**63, -4], _EVERY_KIND),  # ints for floats
    (
        [np.int64(0x2000), np.int8(-3), np.int16(9), np.uint8(7), np.uint16(8), np.int32(5), np.int64(6)],
        _EVERY_KIND[:7],
    ),
    ([0x1000, 128], ("ptr", "i8")),  # out of range
    ([0x1000, -1], ("ptr", "u32")),
    ([0x1000, 2**63], ("ptr", "i64")),
    ([0x1000, True], ("ptr", "i32")),  # a bool is no integer here
    ([0x1000, 1.0], ("ptr", "i32")),
    ([0, 1], ("ptr", "i32")),  # a null pointer
    (["x", 1], ("ptr", "i32")),
    ([0x1000, "1"], ("ptr", "f32")),
    ([0x1000], ("ptr", "i32")),  # count mismatch
    ([0x1000, 1], ("ptr", "i33")),  # unknown kind
]


@pytest.mark.parametrize(("values", "kinds"), _CASES)
def test_pack_launch_packs_and_refuses_exactly_as_pack_args(values: list[Any], kinds: tuple[str, ...]) -> None:
    """`tile.core.launch`'s packer (no PackedArgs, in-range ints kept as ints) puts the same bytes in the parameter
    block as `pack_args` + `kernel_params`, and refuses the same values with the same typed error and message."""
    from tile.core._args import pack_launch
    from tile.core._params import param_block

    expected: tc.TileError | None = None
    try:
        packed = tc.pack_args(values, kinds)
    except tc.TileError as error:
        expected = error
    if expected is not None:
        with pytest.raises(type(expected), match=re.escape(str(expected))):
            pack_launch(values, kinds, device=None, expected=None)
        return
    fast_kinds, fast_values, buffers, views = pack_launch(values, kinds, device=None, expected=None)
    assert fast_kinds == packed.kinds
    assert (buffers, views) == ([], [])
    n = len(kinds)
    want, want_address = kernel_params(packed)
    got, got_address = param_block(fast_kinds, fast_values)
    assert bytes((ctypes.c_uint64 * n).from_address(got_address - 8 * n)) == bytes(
        (ctypes.c_uint64 * n).from_address(want_address - 8 * n)
    )
    del want, got
