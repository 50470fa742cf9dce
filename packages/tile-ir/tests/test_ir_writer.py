"""The writer: primitive encodings, header and sections, version-specific layouts, and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tile.ir import (
    V13_1,
    V13_2,
    V13_3,
    V13_4,
    V13_5,
    Builder,
    DenseElementsAttr,
    FloatAttr,
    Function,
    FunctionType,
    Global,
    MemoryScope,
    Module,
    PartitionViewType,
    PointerAttr,
    PointerType,
    SymbolVisibility,
    TensorViewType,
    UnsupportedVersionError,
    VerifyError,
    f16,
    f32,
    f64,
    i32,
    ptr,
    read_bytecode,
    scalar,
    tile,
    write_bytecode,
)
from tile.ir._decoding import ByteReader
from tile.ir._encoding import ByteWriter
from tile.ir._tables import TableSet

T = tile((16,), f32)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_varint_round_trip(value: int) -> None:
    out = ByteWriter()
    out.varint(value)
    assert len(out.buf) == max(1, (value.bit_length() + 6) // 7)
    assert ByteReader(bytes(out.buf)).varint() == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_svarint_round_trip(value: int) -> None:
    out = ByteWriter()
    out.svarint(value)
    assert ByteReader(bytes(out.buf)).svarint() == value


def test_known_encodings() -> None:
    out = ByteWriter()
    out.apint(0x3C00, 16)  # f16 1.0
    assert bytes(out.buf) == b"\x80\xf0\x01"
    tables = TableSet(V13_3)
    attr = ByteWriter()
    tables.attr(FloatAttr.of(f64, -1.5), attr)
    value = ByteReader(bytes(attr.buf), 2).svarint() & (2**64 - 1)
    assert value == FloatAttr.of(f64, -1.5).bits  # the sign survives (two's-complement zigzag)


def _kernel(version: object = V13_3) -> Module:
    fn = Function("k", FunctionType((scalar(ptr(f32)),)))
    b = Builder(fn.body, version=version)  # type: ignore[arg-type]  # tests pass Versions
    b.addf(b.constant(1.0, T), b.constant(2.0, T))
    b.return_()
    return Module([fn])


@pytest.mark.parametrize("version", [V13_1, V13_2, V13_3, V13_4, V13_5])
def test_header_and_end(version: object) -> None:
    data = write_bytecode(_kernel(version), version)  # type: ignore[arg-type]  # tests pass Versions
    assert data[:8] == b"\x7fTileIR\x00"
    assert data[8:12] == bytes([13, version.minor, 0, 0])  # type: ignore[attr-defined]  # a Version
    assert data[-1] == 0


def test_addf_body_bytes() -> None:
    data = write_bytecode(_kernel(), V13_3)
    # constant, constant, then addf: opcode 0x02, result type, flags 0, rounding nearest_even, operands 1 and 2
    assert bytes([0x02, 0x01, 0x00, 0x00, 0x01, 0x02]) in data


def test_type_layout_changes_with_version() -> None:
    tv = TensorViewType(f32, (None,), (1,))
    pv = PartitionViewType((16,), tv, (0,))
    old, unified, flagged = TableSet(V13_2), TableSet(V13_3), TableSet(V13_4)
    for t in (old, unified, flagged):
        t.type(pv)
    assert old.types.entries()[-1] == b"\x0f\x01\x10\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00"
    assert unified.types.entries()[-1] == b"\x0f\x00\x01\x10\x00\x00\x00\x01\x01\x00\x00\x00\x00"
    assert flagged.types.entries()[1][:2] == b"\x0e\x00"  # 13.4 tensor_view starts with a flags varint


def test_version_refusals() -> None:
    fn = Function("k", FunctionType((scalar(PointerType(f32, PointerAttr.MULTICAST)),)))
    Builder(fn.body).return_()
    with pytest.raises(UnsupportedVersionError, match=r"13\.4"):
        write_bytecode(Module([fn]), V13_3)
    module = _kernel()
    module.producer = "tile"
    with pytest.raises(UnsupportedVersionError, match="producer"):
        write_bytecode(module, V13_2)
    module = _kernel(V13_1)
    x = module.functions[0].body.ops[0].result
    module.functions[0].body.ops.insert(2, Builder(module.functions[0].body).exp(x, rounding_mode="approx").defining_op)  # type: ignore[arg-type]  # a result has its op
    module.functions[0].body.ops.pop()
    with pytest.raises(UnsupportedVersionError, match="rounding_mode"):
        write_bytecode(module, V13_1)


def test_globals_and_producer_round_trip() -> None:
    module = _kernel()
    module.producer = "tile-ir test"
    module.globals.append(
        Global("lut", DenseElementsAttr.splat(tile((8,), f16), 0.5), 16, True, SymbolVisibility.PRIVATE)
    )
    data = write_bytecode(module, V13_3)
    back = read_bytecode(data)
    assert back.producer == "tile-ir test"
    assert back.globals == module.globals
    with pytest.raises(UnsupportedVersionError, match=r"13\.3"):
        write_bytecode(_with_private_global(), V13_1)


def _with_private_global() -> Module:
    module = _kernel()
    module.globals.append(
        Global("lut", DenseElementsAttr.splat(tile((8,), f16), 0.5), visibility=SymbolVisibility.PRIVATE)
    )
    return module


def test_duplicate_function_names_are_refused() -> None:
    module = _kernel()
    module.functions.append(module.functions[0])
    with pytest.raises(VerifyError, match="function names must be unique and non-empty; got 'k' twice"):
        write_bytecode(module, V13_3)


def test_version_strings_are_accepted_and_checked() -> None:
    assert write_bytecode(_kernel(), "13.3") == write_bytecode(_kernel(), V13_3)
    with pytest.raises(UnsupportedVersionError, match=r"13\.9"):
        write_bytecode(_kernel(), "13.9")


def test_optional_operand_without_flags_is_refused() -> None:
    fn = Function("k", FunctionType(()))
    b = Builder(fn.body, version=V13_1)
    b.print_tko("x", [], b.make_token())  # print_tko has no token operand before 13.2
    b.return_()
    with pytest.raises(UnsupportedVersionError, match=r"token needs bytecode 13\.2"):
        write_bytecode(Module([fn]), V13_1)


def test_saturating_ftoi_round_trips_from_13_4() -> None:
    fn = Function("k", FunctionType(()))
    b = Builder(fn.body, version=V13_4)
    b.ftoi(b.constant(1.5, T), signedness="signed", saturating=True, result_type=tile((16,), i32))
    b.return_()
    data = write_bytecode(Module([fn]), V13_4)
    op = read_bytecode(data).functions[0].body.ops[1]
    assert op.attributes["saturating"] is True
    with pytest.raises(UnsupportedVersionError, match="saturating"):
        write_bytecode(Module([fn]), V13_3)


def test_enum_code_zero_in_an_optional_attribute_sets_its_flag() -> None:
    fn = Function("k", FunctionType((scalar(ptr(f32)), scalar(i32))))
    b = Builder(fn.body)
    tv_type = TensorViewType(f32, (None,), (1,))
    tv = b.make_tensor_view(fn.params[0], [fn.params[1]], [], result_type=tv_type)
    view = b.make_partition_view(tv, result_type=PartitionViewType((16,), tv_type, (0,)))
    ordering = {"memory_ordering_semantics": "relaxed", "memory_scope": "tl_blk"}  # tl_blk has code 0
    b.store_view_tko(b.constant(0.0, T), view, [fn.params[1]], **ordering)
    b.return_()
    data = write_bytecode(Module([fn]), V13_5)
    store = read_bytecode(data).functions[0].body.ops[-2]
    assert store.attributes["memory_scope"] is MemoryScope.TL_BLK


def test_a_zero_coded_enum_is_not_mistaken_for_a_default() -> None:
    fn = Function("k", FunctionType(()))
    b = Builder(fn.body, version=V13_1)
    b.exp(b.constant(1.0, T), rounding_mode="nearest_even")  # exp has rounding only from 13.3 (default full)
    b.return_()
    with pytest.raises(UnsupportedVersionError, match="rounding_mode"):
        write_bytecode(Module([fn]), V13_1)
