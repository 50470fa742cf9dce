"""Round trips: every op at every version it exists in, and cuTile Python exports.

build -> write -> read -> write must give identical bytes, and the re-read module must write the same bytes
canonically (without the reader's layout) as the built one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_cutile_kernels import KERNELS, export
from helpers_ir_samples import build_sample
from helpers_ir_tools import disassemble
from tile.ir import (
    SUPPORTED_VERSIONS,
    Block,
    Builder,
    Function,
    FunctionType,
    Module,
    RoundingMode,
    Signedness,
    Value,
    Version,
    f32,
    i32,
    read_bytecode,
    scalar,
    tile,
    verify,
    write_bytecode,
)
from tile.ir.ops import CATALOG, AttrKind

CASES = [(name, v) for name, opdef in sorted(CATALOG.items()) for v in SUPPORTED_VERSIONS if v >= opdef.since]


def _summary(module: Module) -> list[object]:
    """Everything the data model says about a module, with values replaced by their definition order."""
    numbering: dict[Value, int] = {}
    out: list[object] = [module.globals, module.producer]
    for fn in module.functions:
        out.append((fn.name, fn.type, fn.entry, fn.hints, fn.loc))
        _block_summary(fn.body, numbering, out)
    return out


def _block_summary(block: Block, numbering: dict[Value, int], out: list[object]) -> None:
    for arg in block.args:
        numbering[arg] = len(numbering)
    for op in block.ops:
        operands = [numbering[v] for v in op.operands]
        out.append((op.name, operands, op.segments, sorted(op.attributes.items()), [r.type for r in op.results]))
        out.append(op.loc)
        for region in op.regions:
            out.append(("region", len(region.blocks)))
            for inner in region.blocks:
                out.append(("block", [a.type for a in inner.args]))
                _block_summary(inner, numbering, out)
        for r in op.results:
            numbering[r] = len(numbering)


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
    assert _summary(read_bytecode(first)) == _summary(module)


def test_round_trip_covers_every_opcode_at_every_version() -> None:
    covered = {(n, str(v)) for n, v in CASES}
    assert len(covered) == sum(1 for d in CATALOG.values() for v in SUPPORTED_VERSIONS if v >= d.since)
    assert {n for n, _ in covered} == set(CATALOG)


def test_writer_is_deterministic() -> None:
    for version in SUPPORTED_VERSIONS:
        assert write_bytecode(build_sample("for", version), version) == write_bytecode(
            build_sample("for", version), version
        )


@pytest.mark.parametrize("version", ["13.1", "13.2", "13.3", "13.4", "13.5"])
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


_FLOAT_BINARY = ("addf", "subf", "mulf", "divf", "maxf", "minf", "remf", "pow")
_FLOAT_UNARY = ("negf", "absf", "exp", "exp2", "sqrt", "rsqrt", "tanh", "sin", "log", "floor")
_INT_BINARY = ("addi", "subi", "muli", "divi", "remi", "maxi", "mini", "andi", "ori", "xori", "shli", "shri")


def _random_attrs(data: st.DataObject, name: str, version: Version) -> dict[str, object]:
    attrs: dict[str, object] = {}
    for spec in CATALOG[name].attrs:
        if spec.since > version:
            continue
        if spec.kind is AttrKind.UNIT:
            attrs[spec.name] = data.draw(st.booleans())
        elif spec.enum is not None:
            attrs[spec.name] = data.draw(st.sampled_from(list(spec.allowed or spec.enum)))
    if attrs.get("signedness") is Signedness.UNSIGNED and attrs.get("rounding") is RoundingMode.NEGATIVE_INF:
        attrs["rounding"] = RoundingMode.ZERO  # floor division is only defined for signed divi
    return attrs


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(SUPPORTED_VERSIONS), st.integers(min_value=1, max_value=12))
def test_random_programs_round_trip(data: st.DataObject, version: Version, length: int) -> None:
    fn = Function("rand", FunctionType((scalar(i32),)))
    b = Builder(fn.body, version=version)
    floats = [b.constant(data.draw(st.floats(width=32, allow_nan=False)), tile((8,), f32))]
    ints = [b.constant(data.draw(st.integers(-(2**31), 2**31 - 1)), tile((8,), i32))]
    for _ in range(length):
        kind = data.draw(st.sampled_from(["fb", "fu", "ib", "cmp"]))
        pool = {"fb": _FLOAT_BINARY, "fu": _FLOAT_UNARY, "ib": _INT_BINARY, "cmp": ("cmpf",)}[kind]
        name = data.draw(st.sampled_from(pool))
        attrs = _random_attrs(data, name, version)
        src = ints if kind == "ib" else floats
        operands = [data.draw(st.sampled_from(src)) for _ in range(1 if kind == "fu" else 2)]
        value = b.call(name, *operands, **attrs).results[0]
        if kind == "cmp":
            value = b.select(value, operands[0], operands[1])
        src.append(value)
    b.return_()
    module = Module([fn])
    verify(module, version)
    first = write_bytecode(module, version)
    back = read_bytecode(first)
    assert _summary(back) == _summary(module)
    assert write_bytecode(back, version) == first
