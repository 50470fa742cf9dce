"""Round trips: every op at every version it exists in, and cuTile Python exports.

build -> write -> read -> write must give identical bytes, and the re-read module must write the same bytes
canonically (without the reader's layout) as the built one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_cutile_kernels import KERNELS, export
from helpers_ir_samples import build_sample
from helpers_ir_tools import disassemble
from tile.ir import SUPPORTED_VERSIONS, Version, read_bytecode, verify, write_bytecode
from tile.ir.ops import CATALOG

CASES = [(name, v) for name, opdef in sorted(CATALOG.items()) for v in SUPPORTED_VERSIONS if v >= opdef.since]


def _ops(data: bytes) -> list[str]:
    return [op.name for fn in read_bytecode(data).functions for op in fn.walk()]


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_op_round_trip(name: str, version: Version) -> None:
    module = build_sample(name, version)
    verify(module, version)
    first = write_bytecode(module, version)
    again = read_bytecode(first)
    assert write_bytecode(again, version) == first
    again.layout = None
    assert write_bytecode(again, version) == first
    assert name in _ops(first)


def test_round_trip_covers_every_opcode_at_every_version() -> None:
    covered = {(n, str(v)) for n, v in CASES}
    assert len(covered) == sum(1 for d in CATALOG.values() for v in SUPPORTED_VERSIONS if v >= d.since)
    assert {n for n, _ in covered} == set(CATALOG)


def test_writer_is_deterministic() -> None:
    for version in SUPPORTED_VERSIONS:
        assert write_bytecode(build_sample("for", version), version) == write_bytecode(
            build_sample("for", version), version
        )


@pytest.mark.parametrize("version", ["13.3", "13.4", "13.5"])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_cutile_export_round_trips_exactly(kernel: str, version: str) -> None:
    data = export(kernel, version)
    module = read_bytecode(data)
    verify(module, version)
    assert write_bytecode(module, version) == data


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_cutile_export_rewritten_canonically_is_accepted(kernel: str) -> None:
    module = read_bytecode(export(kernel, "13.4"))
    module.layout = None
    for version in ("13.3", "13.4", "13.5"):
        proc = disassemble(write_bytecode(module, version))
        assert proc.returncode == 0, proc.stderr
