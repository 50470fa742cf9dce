"""The op catalog: complete for 13.1-13.5, consistent entries, version limits as tileiras enforces them."""

from __future__ import annotations

import pytest

from tile.ir import SUPPORTED_VERSIONS, V13_1, V13_2, V13_3, V13_4, V13_5, VerifyError, Version
from tile.ir.ops import BY_OPCODE, CATALOG, AttrKind, OperandKind, OperandLayout, lookup

# opcodes NVIDIA assigns to module/entry/global: encoded as sections, not ops
SECTION_OPCODES = {0x16, 0x31, 0x4B}
UNASSIGNED = set(range(0x19, 0x25)) | set(range(0x34, 0x3A))


def test_every_public_opcode_is_cataloged() -> None:
    assert set(BY_OPCODE) == set(range(0x7E)) - SECTION_OPCODES - UNASSIGNED
    assert len(CATALOG) == 105


@pytest.mark.parametrize(
    ("version", "max_opcode"), [(V13_1, 0x6D), (V13_2, 0x6E), (V13_3, 0x75), (V13_4, 0x7A), (V13_5, 0x7D)]
)
def test_max_opcode_per_version(version: Version, max_opcode: int) -> None:
    available = [d.opcode for d in CATALOG.values() if d.since <= version]
    assert max(available) == max_opcode


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_entry_is_consistent(name: str) -> None:
    d = CATALOG[name]
    attr_names = {a.name for a in d.attrs}
    operand_names = {o.name for o in d.operands}
    assert d.since in SUPPORTED_VERSIONS
    assert len(attr_names) == len(d.attrs)
    assert len(operand_names) == len(d.operands)
    for flag in d.flags:
        assert flag in attr_names | operand_names, f"flag {flag} names nothing"
    for a in d.attrs:
        assert (a.kind is AttrKind.ENUM) == (a.enum is not None)
        if a.optional or a.kind is AttrKind.UNIT:
            assert a.name in d.flags
        if a.since > d.since:
            assert a.default is not None, f"{a.name} is newer than its op and needs a default"
    optional_operands = [o.name for o in d.operands if o.kind is OperandKind.OPTIONAL]
    if d.layout is OperandLayout.SEGMENTED:
        assert all(o in d.flags for o in optional_operands)
    if d.layout is OperandLayout.TOTAL:
        assert sum(o.kind is not OperandKind.SINGLE for o in d.operands) == 1
    if d.flags:
        assert d.flags_since is not None
    if any(o.kind is OperandKind.VARIADIC for o in d.operands) or d.variadic_results:
        assert d.counted_results


def test_lookup_unknown_op() -> None:
    with pytest.raises(VerifyError, match=r"unknown Tile IR op 'frobnicate'; see tile\.ir\.ops\.CATALOG"):
        lookup("frobnicate")


def test_families_split_the_catalog() -> None:
    families = {d.family for d in CATALOG.values()}
    assert families == {"arith", "math", "convert", "shape", "control", "memory", "atomics", "reduce", "misc"}
