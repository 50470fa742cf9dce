"""The cuTile Python corpus through tile-ir: decode, re-encode, print, assemble, compile.

Every kernel of `cutile_corpus.kernels` is exported by cuTile Python (the peer, a test dependency) at
bytecode 13.3 and 13.5. For each export: our reader decodes it and the verifier accepts it; writing the
decoded module reproduces the bytes; our printer's text equals ``tileirdisasm``'s outright; assembling
``tileirdisasm``'s text gives bytecode that ``tileirdisasm`` prints identically and ``tileiras`` compiles
for sm_90.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

# Test helpers live beside the tests; --import-mode=importlib does not put this folder on sys.path.
sys.path.insert(0, str(Path(__file__).parent))
from cutile_corpus.kernels import CORPUS, V133, V135, cases, export
from helpers_ir_tools import compile_cubin, disassemble
from tile.ir import parse_module, print_module, read_bytecode, read_version, verify, write_bytecode

CASES = cases()
IDS = [f"{k.name}-{v}" for k, v in CASES]


@pytest.fixture(scope="module")
def exported() -> dict[str, bytes]:
    """Bytecode of every corpus case, exported once per module."""
    return {case_id: export(kernel, version) for case_id, (kernel, version) in zip(IDS, CASES, strict=True)}


def _version(case_id: str) -> str:
    return case_id.rsplit("-", 1)[1]


def test_corpus_is_large_and_covers_the_required_families(exported: dict[str, bytes]) -> None:
    assert len(CORPUS) >= 30
    assert {_version(c) for c in exported} == {V133, V135}
    ops: Counter[str] = Counter()
    for data in exported.values():
        for fn in read_bytecode(data).functions:
            ops.update(op.name for op in fn.walk())
    required = {
        "addf", "mulf", "exp", "tanh", "ftof", "ftoi", "itof", "exti", "trunci", "bitcast",  # elementwise, casts
        "reduce", "scan", "mmaf", "mmai",  # reductions, scans, GEMM
        "atomic_rmw_tko", "atomic_cas_tko", "load_ptr_tko", "store_ptr_tko",  # atomics, gather/scatter
        "for", "loop", "if", "break", "print_tko", "assert",  # control flow, print/assert
        "permute", "cat", "extract", "insert", "iota", "select", "cmpf", "cmpi",
    }  # fmt: skip
    assert required <= set(ops), sorted(required - set(ops))


@pytest.mark.parametrize("case_id", IDS)
def test_reader_decodes_and_verifier_accepts(exported: dict[str, bytes], case_id: str) -> None:
    data = exported[case_id]
    module = read_bytecode(data)
    assert str(read_version(data)) == _version(case_id)
    (fn,) = module.functions
    kernel = next(k for k, v in CASES if f"{k.name}-{v}" == case_id)
    assert fn.name.startswith(kernel.function_name + "_K")
    assert fn.body.terminator is not None
    assert fn.body.terminator.name == "return"
    verify(module, read_version(data))


@pytest.mark.parametrize("case_id", IDS)
def test_rewriting_reproduces_the_bytes(exported: dict[str, bytes], case_id: str) -> None:
    data = exported[case_id]
    assert write_bytecode(read_bytecode(data), read_version(data)) == data


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("case_id", IDS)
def test_text_round_trips_through_the_assembler(exported: dict[str, bytes], case_id: str, debug: bool) -> None:
    data = exported[case_id]
    text = print_module(read_bytecode(data), debug=debug)
    module = parse_module(text, case_id)
    assert print_module(module, debug=debug) == text
    rewritten = write_bytecode(module, read_version(data))
    assert print_module(read_bytecode(rewritten), debug=debug) == text


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case_id", IDS)
def test_printer_equals_tileirdisasm(exported: dict[str, bytes], case_id: str) -> None:
    data = exported[case_id]
    proc = disassemble(data)
    assert proc.returncode == 0, proc.stderr
    assert print_module(read_bytecode(data)) == proc.stdout


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case_id", IDS)
def test_debug_text_reassembles_with_every_location(exported: dict[str, bytes], case_id: str) -> None:
    data = exported[case_id]
    text = disassemble(data, "-g").stdout
    assert "loc(#loc" in text
    assert print_module(read_bytecode(data), debug=True) == text
    ours = write_bytecode(parse_module(text, case_id), read_version(data))
    assert disassemble(ours, "-g").stdout == text


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("case_id", IDS)
def test_assembled_tileirdisasm_text_compiles_for_sm90(exported: dict[str, bytes], case_id: str) -> None:
    data = exported[case_id]
    text = disassemble(data).stdout
    ours = write_bytecode(parse_module(text, case_id), read_version(data))
    again = disassemble(ours)
    assert again.returncode == 0, again.stderr
    assert again.stdout == text
    proc, cubin = compile_cubin(ours, "sm_90")
    assert proc.returncode == 0, proc.stderr
    assert cubin.startswith(b"\x7fELF")
