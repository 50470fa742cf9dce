"""NVIDIA's tools accept what we write: every op sample through tileirdisasm at every version, and kernels of
each family (elementwise, math, casts, reductions, scans, GEMM, softmax, atomics, control flow,
print/assert, gather/scatter) compiled by tileiras for sm_80, sm_90 and sm_100."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# helpers_ir_* modules live beside the tests; --import-mode=importlib does not put this folder on sys.path
sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_kernels import FAMILIES, build_family
from helpers_ir_samples import build_sample
from helpers_ir_tools import compile_cubin, disassemble
from helpers_ir_verify_gaps import mutants
from tile.ir import (
    SUPPORTED_VERSIONS,
    V13_1,
    V13_2,
    V13_3,
    V13_4,
    V13_5,
    TileError,
    Version,
    f16,
    f32,
    i1,
    i32,
    read_bytecode,
    scalar,
    tile,
    verify,
    verify_problems,
    write_bytecode,
)
from tile.ir.ops import CATALOG

pytestmark = pytest.mark.requires_tileiras

CASES = [(name, v) for name, opdef in sorted(CATALOG.items()) for v in SUPPORTED_VERSIONS if v >= opdef.since]


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_tileirdisasm_accepts_op_sample(name: str, version: Version) -> None:
    proc = disassemble(write_bytecode(build_sample(name, version), version))
    assert proc.returncode == 0, proc.stderr
    assert f"@k_{name}" in proc.stdout


ARCH_VERSIONS = [("sm_80", V13_1), ("sm_80", V13_3), ("sm_90", V13_2), ("sm_90", V13_4), ("sm_100", V13_5)]


@pytest.mark.parametrize(("arch", "version"), ARCH_VERSIONS, ids=[f"{a}-{v}" for a, v in ARCH_VERSIONS])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tileiras_compiles_family_kernel(family: str, arch: str, version: Version) -> None:
    module = build_family(family, version)
    verify(module, version)
    proc, cubin = compile_cubin(write_bytecode(module, version), arch)
    assert proc.returncode == 0, proc.stderr
    assert cubin.startswith(b"\x7fELF")
    assert f"{family}_kernel".encode() in cubin


def test_debug_locations_are_accepted_and_printed() -> None:
    from tile.ir import CallSite, DICompileUnit, DIFile, DILoc, DISubprogram

    module = build_family("softmax", V13_3)
    fn = module.functions[0]
    file = DIFile("softmax.py", "/src")
    scope = DISubprogram(file, 10, fn.name, fn.name, DICompileUnit(file), 10)
    fn.loc = DILoc(scope, "/src/softmax.py", 10, 1)
    for line, op in enumerate(fn.walk(), start=11):
        op.loc = DILoc(scope, "/src/softmax.py", line, 5)
    helper = DISubprogram(file, 3, "helper", "helper", DICompileUnit(file), 3)
    first = next(iter(fn.walk()))
    first.loc = CallSite(DILoc(helper, "/src/softmax.py", 4, 9), DILoc(scope, "/src/softmax.py", 11, 5))
    data = write_bytecode(module, V13_3)
    proc, cubin = compile_cubin(data, "sm_90")
    assert proc.returncode == 0, proc.stderr
    assert cubin.startswith(b"\x7fELF")
    listing = disassemble(data, "-g")
    assert listing.returncode == 0, listing.stderr
    assert '"/src/softmax.py":12:5' in listing.stdout
    assert '"/src/softmax.py":4:9' in listing.stdout
    assert read_bytecode(data).functions[0].walk().__next__().loc == first.loc


_RESTRICTED = [
    (name, spec.name, value)
    for name, opdef in sorted(CATALOG.items())
    for spec in opdef.attrs
    if spec.allowed is not None and spec.enum is not None
    for value in spec.enum
]


@pytest.mark.parametrize(("name", "attr", "value"), _RESTRICTED, ids=[f"{n}-{a}-{v}" for n, a, v in _RESTRICTED])
def test_restricted_enum_values_agree_with_tileirdisasm(name: str, attr: str, value: object) -> None:
    module = build_sample(name, V13_5)
    for op in module.functions[0].walk():
        if op.name == name and attr in op.attributes:
            op.attributes[attr] = value
    ours = not any(attr in p for p in verify_problems(module, V13_5))
    theirs = disassemble(write_bytecode(module, V13_5)).returncode == 0
    assert ours == theirs


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_tileiras_compiles_every_op_sample_for_sm100(name: str) -> None:
    proc, cubin = compile_cubin(write_bytecode(build_sample(name, V13_5), V13_5), "sm_100")
    assert proc.returncode == 0, proc.stderr
    assert cubin.startswith(b"\x7fELF")


# The corruptions' result types: the common element types (the verifier-gap tests add the rarer ones).
_POOL = [tile((16,), f32), tile((16,), i32), tile((16,), f16), tile((8,), f32), tile((16,), i1), scalar(i32)]


def test_verifier_never_rejects_what_tileirdisasm_accepts() -> None:
    rejected_valid = []
    for name, module in mutants(150, 1234, _POOL):
        problems = verify_problems(module, V13_5)
        try:
            data = write_bytecode(module, V13_5)
        except TileError:
            continue
        if problems and disassemble(data).returncode == 0:
            rejected_valid.append((name, problems[:1]))
    assert rejected_valid == []
