"""The reader decodes what the writer and cuTile write, and rejects malformed input with `BytecodeError`
(offset and reason), never another exception and never a hang."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tile.ir import (
    V13_3,
    V13_4,
    BytecodeError,
    DILoc,
    DISubprogram,
    Module,
    TileError,
    read_bytecode,
    read_version,
    write_bytecode,
)
from tile.ir._encoding import ByteWriter, encode_table

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_kernels import build_family
from helpers_ir_samples import build_sample

VALID = [write_bytecode(build_sample(n, V13_4), V13_4) for n in ("load_view_tko", "for", "reduce", "if", "print_tko")]
VALID.append(write_bytecode(build_family("gemm", V13_3), V13_3))


def _file(body: bytes, *, version: tuple[int, int] = (13, 3), flags: int = 0x02) -> bytes:
    """A one-function file: types [i32, tile<i32>, () -> (), token], strings ["k"], the given body."""
    types = [b"\x03", b"\x0d\x00\x00", b"\x10\x00\x00", b"\x11"]
    func = ByteWriter()
    func.varint(1)
    func.raw(bytes([0, 2, flags, 0]))  # name "k", signature type 2, flags, no location
    func.varint(len(body))
    func.raw(body)
    out = ByteWriter()
    out.raw(b"\x7fTileIR\x00" + bytes([*version, 0, 0]))
    for sid, entries, width in ((5, types, 4), (1, [b"k"], 4)):
        payload = ByteWriter()
        encode_table(payload, entries, width)
        out.section(sid, payload.buf, width)
    out.section(2, func.buf, 8)
    out.byte(0)
    return bytes(out.buf)


RETURN = b"\x5c\x00\x00"


def test_minimal_handmade_file_reads() -> None:
    module = read_bytecode(_file(RETURN))
    assert [f.name for f in module.functions] == ["k"]
    assert [op.name for op in module.functions[0].walk()] == ["return"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x7fTileIX\x00\x0d\x03\x00\x00\x00", "does not correspond to Tile IR bytecode"),
        (b"\x7fTileIR\x00\x0d\x09\x00\x00\x00", "unsupported Tile IR bytecode version 13.9"),
        (b"\x7fTileIR\x00\x0d\x03\x01\x00\x00", "public-preview"),
        (_file(RETURN)[:-1], "unexpected end of data"),
        (_file(RETURN) + b"\x00", "end section is not the last section"),
        (_file(RETURN)[:-1] + b"\x09\x00\x00", "unknown section ID: 9"),
        (_file(RETURN, flags=0), "not an entry"),
        (_file(b"\x6e\x01\x00\x00" + RETURN, version=(13, 1)), "unsupported opcode 110 for bytecode version 13.1"),
        (_file(b"\x79\x01\x00\x00" + RETURN), "unsupported opcode 121 for bytecode version 13.3"),
        (_file(b"\xf0\x0f" + RETURN), "unsupported opcode 2032"),
        (_file(b"\x02\x01\x00\x00\x05\x05" + RETURN), "operand index 5 out of bounds (size=0)"),
        (_file(b"\x44\x03\x02\x01\x00\x09\x00\x00" + RETURN), "invalid integer value for enum type: 9"),
        (_file(b"\x44\xc8\x01" + RETURN), "type index 200 out of range"),
        (_file(b"\x44\x03\x5c\x00\x01\x01"), "operand index 1 out of bounds (size=1)"),
        (_file(b"\x44\x03\x5c\x00\x05"), "exceeds"),
        (_file(b"\x5c\x00\x00\x00"), "unexpected end of data"),
    ],
    ids=[
        "magic", "version", "preview", "truncated", "trailing", "section-id", "non-entry", "atan2-13.1",
        "fpowi-13.3", "opcode", "operand", "enum", "type-index", "return-operand", "count", "short-op",
    ],
)  # fmt: skip
def test_malformed_input_raises_bytecode_error(data: bytes, reason: str) -> None:
    with pytest.raises(BytecodeError) as info:
        read_bytecode(data)
    assert reason in info.value.reason
    assert 0 <= info.value.offset <= len(data)
    assert f"offset {info.value.offset}" in str(info.value)


def test_func_section_without_alignment_is_rejected() -> None:
    data = bytearray(_file(RETURN))
    out = ByteWriter()
    out.raw(data[:12])
    out.section(2, b"\x00", None)
    out.section(1, b"\x00", 4)
    out.byte(0)
    with pytest.raises(BytecodeError, match="must have alignment that is a multiple of 8"):
        read_bytecode(bytes(out.buf))


def test_bytecode_error_is_a_value_error_and_pickles() -> None:
    with pytest.raises(BytecodeError, match="magic") as info:
        read_bytecode(b"not bytecode at all")
    err = info.value
    assert isinstance(err, TileError)
    assert isinstance(err, ValueError)
    clone = pickle.loads(pickle.dumps(err))
    assert (clone.offset, clone.reason) == (err.offset, err.reason)


def test_read_version() -> None:
    assert read_version(VALID[0]) == V13_4
    with pytest.raises(BytecodeError, match=r"at offset 0: .*bad magic number"):
        read_version(b"\x7fTileIR")


def test_locations_are_read_back() -> None:
    module = build_sample("addf", V13_4)
    fn = module.functions[0]
    scope = _scope()
    for i, op in enumerate(fn.walk()):
        op.loc = DILoc(scope, "/src/k.py", 10 + i, 4)
    fn.loc = DILoc(scope, "/src/k.py", 1, 0)
    data = write_bytecode(module, V13_4)
    back = read_bytecode(data).functions[0]
    assert back.loc == fn.loc
    assert [op.loc for op in back.walk()] == [op.loc for op in fn.walk()]
    assert write_bytecode(read_bytecode(data), V13_4) == data


def _scope() -> DISubprogram:
    from tile.ir import DICompileUnit, DIFile

    file = DIFile("k.py", "/src")
    return DISubprogram(file, 1, "k", "k", DICompileUnit(file), 1)


def _outcome(data: bytes) -> Module | None:
    """Read `data`; a failure must be a BytecodeError pointing inside the input."""
    error: BytecodeError | None = None
    try:
        return read_bytecode(data)
    except BytecodeError as err:
        error = err
    assert 0 <= error.offset <= len(data)
    return None


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=4),
)
def test_mutated_bytes_never_escape_bytecode_error(data: bytes, edits: list[tuple[int, int]]) -> None:
    mutated = bytearray(data)
    for pos, value in edits:
        mutated[pos % len(mutated)] = value
    _outcome(bytes(mutated))


@settings(max_examples=200, deadline=2000)
@given(st.sampled_from(VALID), st.integers(min_value=0), st.binary(max_size=8))
def test_truncated_or_spliced_input_never_escapes_bytecode_error(data: bytes, cut: int, junk: bytes) -> None:
    cut %= len(data)
    assert _outcome(data[:cut]) is None
    _outcome(data[:cut] + junk + data[cut:])


@settings(max_examples=200, deadline=2000)
@given(st.binary(max_size=64))
def test_random_bytes_after_a_valid_header(tail: bytes) -> None:
    _outcome(VALID[0][:12] + tail)
