"""The kernel corpus: every kernel lowers to Tile IR that passes tile.ir's verifier and writer; with tileiras, the
bytecode disassembles and compiles to cubins for sm_80, sm_90 and sm_100 through the compiler's pipeline."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.ir
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, Specialization, Target
from tile.compiler._typecheck import typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))

Case = Any  # tc_corpus_case.Case, imported by path (the corpus directory is not a package)
MODULES = sorted(p.stem for p in CORPUS.glob("tc_corpus_*.py") if p.stem not in ("tc_corpus_case", "tc_corpus_lib"))
CASES = [case for m in MODULES for case in importlib.import_module(m).CASES]
IDS = [c.name for c in CASES]


def spec_for(case: Case) -> Specialization:
    """The specialization the corpus compiles with: row-major tensors (unit last stride), 16-divisible extents."""
    resolved = resolve(parse(case.kernel))
    params: dict[str, ArraySpec] = {}
    for p in resolved.params:
        if p.kind in ("tensor", "mut") and p.dtype is not None:
            n = len(p.shape)
            one = tuple(i == n - 1 for i in range(n)) if case.contiguous else ()
            params[p.name] = ArraySpec(p.dtype.name, n, stride_one=one, shape_div=(16,) * n)
    return Specialization.make(params=params, consts=dict(case.consts), options=case.options)


def lowered(case: Case, arch: str = "sm_90") -> tile.ir.Module:
    target = Target(arch)
    return lower(typecheck(resolve(parse(case.kernel)), spec_for(case), target), target).module


def test_corpus_is_large_and_named_uniquely() -> None:
    assert len(CASES) >= 40
    assert len(set(IDS)) == len(IDS)


def test_corpus_families_present() -> None:
    names = set(IDS)
    for required in ("gemm_swizzled", "gemm_persistent", "softmax", "layernorm", "rmsnorm", "flash_attention"):
        assert required in names


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_lowers_and_verifies(case: Case) -> None:
    module = lowered(case)
    (fn,) = module.functions
    assert fn.name == case.name
    assert fn.body.ops[-1].name == "return"
    tile.ir.verify(module)
    data = tile.ir.write_bytecode(module, tile.ir.Version(*case.bytecode))
    assert bytes(data[:8]) == b"\x7fTileIR\x00"


@pytest.mark.parametrize("case", [c for c in CASES if c.reference is not None], ids=lambda c: c.name)
def test_corpus_reference_runs_on_its_inputs(case: Case) -> None:
    assert case.inputs is not None
    args = case.inputs(np.random.default_rng(0))
    expected = case.reference(args)
    resolved = resolve(parse(case.kernel))
    outputs = {p.name for p in resolved.params if p.kind == "mut"}
    assert set(expected) <= outputs | {p.name for p in resolved.params if p.kind == "tensor"}
    for name, value in expected.items():
        assert np.shape(value) == np.shape(args[name]), name


def _tileiras_bin(name: str) -> Path:
    spec = importlib.util.find_spec("nvidia")
    assert spec is not None  # the requires_tileiras marker found the package
    assert spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "cu13" / "bin" / name


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_disassembles(case: Case, tmp_path: Path) -> None:
    path = tmp_path / f"{case.name}.tilebc"
    path.write_bytes(bytes(tile.ir.write_bytecode(lowered(case), tile.ir.Version(*case.bytecode))))
    out = subprocess.run([str(_tileiras_bin("tileirdisasm")), str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert f"entry @{case.name}(" in out.stdout


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_compiles_to_cubin(case: Case, arch: str) -> None:
    if arch not in case.archs:
        pytest.skip(f"{case.name} needs one of {case.archs}")
    from tile.compiler import compile_kernel

    compiled = compile_kernel(case.kernel, spec_for(case), Target(arch), cache=False)
    assert compiled.cubin is not None
    assert compiled.cubin[:4] == b"\x7fELF"


def test_every_kernel_language_function_appears_in_the_corpus() -> None:
    import re

    from tile.compiler.lang import METHODS, OPS

    source = "".join(p.read_text() for p in CORPUS.glob("tc_corpus_*.py"))
    unused = [n for n in OPS if not re.search(rf"(\btile|\w)\.{n}\(", source)]
    assert unused == []
    methods = {m for table in METHODS.values() for m in table}
    assert [m for m in sorted(methods) if not re.search(rf"\.{m}\(", source)] == []
