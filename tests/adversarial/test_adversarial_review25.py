"""Review 25: inputs Tile reads from outside the user's program -- Tile IR bytecode and assembly, the compile cache's
entry files, the autotuner's records -- shaped by an attacker or a crash. Each hole's test names it and failed before
its fix.

Holes found and fixed:

- Compile cache, swapped entry: an entry file copied or renamed over another key's entry (a valid checksum) was
  loaded as that key's kernel, its ABI included. `compile_kernel` of an f16 kernel returned an f32 kernel's ABI and
  code, and the launcher packs arguments by the ABI without checking element types: the kernel would have read and
  written twice the bytes of each buffer. An entry's metadata now names its own namespace and key, checked against
  the path it is read from; a foreign entry is evicted and the kernel rebuilt (the key schema is 2 now).
- Compile cache, planted entries with a valid checksum: metadata that is a JSON array raised AttributeError, metadata
  nested thousands deep raised RecursionError (the disk cache must never fail a compile), and negative blob lengths
  sliced blobs out of the metadata. A FIFO at an entry's path hung the compile forever, a file larger than the cap was
  read whole. Only a regular file up to the cap is read now, and malformed metadata is a miss.
- Autotune records nested thousands deep raised RecursionError out of `Autotuner.choose`, and a FIFO in place of the
  records file hung it: they are ignored (and re-tuned) now, as is a file over 16 MiB.
- Tile IR: the reader accepted regions nested 256 deep, but `print_module` ran out of Python stack from about 120
  (RecursionError on a module `read_bytecode` had accepted and the verifier passed), and `parse_module` raised
  RecursionError on nested regions, array attributes or callsite locations. Region nesting is capped at
  ``tile.ir._ir.MAX_NESTING`` (64) by the reader (BytecodeError), the assembler (AsmSyntaxError) and the verifier
  (VerifyError, also from the printer), and any other too-deep text is an AsmSyntaxError.

Tried and found solid: the reader's counts are capped by the bytes left (a huge varint count is a BytecodeError at
once), truncation, wrong magic/version, out-of-range table indices and invalid UTF-8 are BytecodeErrors (and
tile-ir's own fuzz tests cover them); the interpreter on seeded mutations of real compiled kernels that still verify
raised only TileErrors; a cache folder that is a file or is unwritable is a logged miss; the cache key covers the
tile.compiler and tile.ir sources, the kernel's reachable source, the specialization, the target and the bytecode
version policy, the cubin key the bytecode, version, arch, options and tileiras; autotune records of another source or
version, or naming a config that is not a candidate, are ignored and re-tuned.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers_adversarial import fuzz_kernels, time_limit

import tile.compiler as tc
from tile import ir
from tile.compiler import DiskCache, Specialization, Target, cache_stats
from tile.compiler import _cache as cache_module
from tile.errors import TileError
from tile.ir import AsmSyntaxError, BytecodeError, VerifyError, interp
from tile.kernels import autotune

SPEC = Specialization.make(consts={"B": 16})


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    tc.clear_memory_cache()
    return fuzz_kernels("review25_kernels", tmp_path)


# -- hole: a swapped cache entry gave a kernel another kernel's ABI -------------------------------------------------


def test_an_entry_copied_over_another_keys_entry_is_evicted_not_launched(kernels: ModuleType, tmp_path: Path) -> None:
    f32_kernel = tc.compile_kernel(kernels.copy32, SPEC, Target.cpu())
    f16_kernel = tc.compile_kernel(kernels.add16, SPEC, Target.cpu())
    store = DiskCache(tmp_path / "cache")
    shutil.copy(store.path("kernel", f"{f32_kernel.key}-cpu"), store.path("kernel", f"{f16_kernel.key}-cpu"))
    tc.clear_memory_cache()
    cache_stats(reset=True)
    again = tc.compile_kernel(kernels.add16, SPEC, Target.cpu())
    assert again.abi == f16_kernel.abi
    assert again.bytecode == f16_kernel.bytecode
    assert again.origin == "compiled"
    assert cache_stats().corrupt_evicted == 1
    tc.clear_memory_cache()
    assert tc.compile_kernel(kernels.add16, SPEC, Target.cpu()).origin == "disk"  # the rebuilt entry is its own


def _planted(store: DiskCache, namespace: str, key: str, meta_bytes: bytes, body: bytes = b"") -> Path:
    """Write an entry file with a valid header and checksum around arbitrary metadata bytes."""
    path = store.path(namespace, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(meta_bytes + body).digest()
    header = cache_module._HEADER.pack(cache_module._MAGIC, len(meta_bytes), len(body), digest)
    path.write_bytes(header + meta_bytes + body)
    return path


ENTRY = ["cubin", "ab" * 32]  # the namespace and key the planted entries below claim (their own)


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b"[" * 50_000 + b"]" * 50_000, id="nested"),
        pytest.param(json.dumps({"blobs": [["cubin", -4], ["x", 12]], "entry": ENTRY}).encode(), id="negative"),
        pytest.param(json.dumps({"blobs": [["cubin", True], ["x", 7]], "entry": ENTRY}).encode(), id="bool-length"),
    ],
)
def test_a_planted_entry_with_malformed_metadata_is_a_miss(tmp_path: Path, meta: bytes) -> None:
    store = DiskCache(tmp_path / "cache")
    path = _planted(store, "cubin", "ab" * 32, meta, b"\x7fELF" + bytes(4))
    assert store.get("cubin", "ab" * 32) is None
    assert not path.exists()


def test_a_fifo_in_place_of_an_entry_does_not_hang_the_compile(tmp_path: Path) -> None:
    store = DiskCache(tmp_path / "cache")
    path = store.path("cubin", "cd" * 32)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(store.get("cubin", "cd" * 32)), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO entry blocked"
    assert found == [None]


def test_an_entry_larger_than_the_cap_is_not_read(tmp_path: Path) -> None:
    store = DiskCache(tmp_path / "cache", max_bytes=1 << 10)
    meta = json.dumps({"blobs": [["cubin", 4096]], "entry": ["cubin", "ef" * 32]}).encode()
    _planted(store, "cubin", "ef" * 32, meta, bytes(4096))
    assert store.get("cubin", "ef" * 32) is None
    assert DiskCache(tmp_path / "cache").get("cubin", "ef" * 32) is None  # evicted, not kept for a bigger cap


def test_a_cache_folder_that_is_a_file_is_a_miss_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("TILE_CACHE_DIR", str(blocker))
    tc.clear_memory_cache()
    module = fuzz_kernels("review25_blocked", tmp_path)
    kernel = tc.compile_kernel(module.copy32, SPEC, Target.cpu())
    assert kernel.origin == "compiled"
    assert blocker.read_text() == "x"


# -- hole: autotune records file nested too deep or a FIFO ----------------------------------------------------------


def _tuner(tmp_path: Path, timed: list[str]) -> autotune.Autotuner:
    def timer(fn: object) -> float:
        timed.append("timed")
        return 1.0

    return autotune.Autotuner("review25", source="src-1", timer=timer, cache_dir=tmp_path)


CANDIDATES = (autotune.Config.of(BM=16), autotune.Config.of(BM=32))


@pytest.mark.parametrize("damage", ["nested", "fifo", "huge"])
def test_an_unreadable_records_file_is_ignored_and_retuned(tmp_path: Path, damage: str) -> None:
    timed: list[str] = []
    tuner = _tuner(tmp_path, timed)
    assert tuner.path is not None
    tuner.path.parent.mkdir(parents=True)
    if damage == "nested":
        tuner.path.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "fifo":
        os.mkfifo(tuner.path)
    else:
        record = {"config": {"BM": 32}, "seconds": 0.0, "timed": 2, "source": "src-1"}
        padding = " " * (17 << 20)
        tuner.path.write_text(
            json.dumps({"format": autotune.FORMAT, "version": autotune.VERSION, "records": {'{"n": 1}': record}})
            + padding
        )
    chosen: list[object] = []
    worker = threading.Thread(
        target=lambda: chosen.append(tuner.choose({"n": 1}, CANDIDATES, CANDIDATES[0], lambda c: None)), daemon=True
    )
    worker.start()
    worker.join(10)  # a thread: a FIFO's blocking open() is not interrupted by an alarm
    assert not worker.is_alive(), "reading the records file blocked"
    assert chosen == [CANDIDATES[0]]
    assert timed == ["timed", "timed"]


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ({"config": {"BM": 4096}, "source": "src-1"}, "not a candidate"),
        ({"config": {"BM": 32}, "source": "src-0"}, "other source"),
        ({"config": {"BM": "32"}, "source": "src-1"}, "wrong type"),
        ({"config": [["BM", 32]], "source": "src-1"}, "wrong shape"),
    ],
)
def test_a_record_that_is_not_this_kernels_own_candidate_is_never_used(
    tmp_path: Path, record: dict[str, object], why: str
) -> None:
    timed: list[str] = []
    tuner = _tuner(tmp_path, timed)
    assert tuner.path is not None
    tuner.path.parent.mkdir(parents=True)
    records = {'{"n": 1}': record}
    tuner.path.write_text(json.dumps({"format": autotune.FORMAT, "version": autotune.VERSION, "records": records}))
    chosen = tuner.choose({"n": 1}, CANDIDATES, CANDIDATES[1], lambda c: None)
    assert chosen in CANDIDATES, why
    assert timed == ["timed", "timed"], why  # re-tuned, not read


def test_a_record_of_this_source_and_a_candidate_config_is_used(tmp_path: Path) -> None:
    timed: list[str] = []
    tuner = _tuner(tmp_path, timed)
    assert tuner.path is not None
    tuner.path.parent.mkdir(parents=True)
    records = {'{"n": 1}': {"config": {"BM": 32}, "source": "src-1"}}
    tuner.path.write_text(json.dumps({"format": autotune.FORMAT, "version": autotune.VERSION, "records": records}))
    assert tuner.choose({"n": 1}, CANDIDATES, CANDIDATES[0], lambda c: None) is CANDIDATES[1]
    assert timed == []


# -- hole: deep nesting ran the IR tools out of Python stack --------------------------------------------------------


def _nested_text(depth: int) -> str:
    return (
        "entry @deep(%arg0: tile<i32>) {\n  %c = cmpi less_than %arg0, %arg0, signed : tile<i32> -> tile<i1>\n"
        + "  if %c {\n" * depth
        + "  }\n" * depth
        + "  return\n}\n"
    )


def _nested_module(depth: int) -> ir.Module:
    """A module of ``depth`` nested ifs, built with the builder (the assembler refuses past the limit)."""
    fn = ir.Function("deep", ir.FunctionType((ir.scalar(ir.i32),)))
    b = ir.Builder(fn.body, version=ir.V13_5)
    arg = fn.body.args[0]
    cond = b.cmpi(arg, arg, comparison_predicate="less_than", signedness="signed")
    with contextlib.ExitStack() as stack:
        for _ in range(depth):
            stack.enter_context(stack.enter_context(b.if_(cond, [])).then_())
    b.return_()
    return ir.Module([fn])


def test_regions_nested_past_the_limit_are_refused_by_the_reader() -> None:
    deep = ir.write_bytecode(_nested_module(200), ir.V13_5)
    with pytest.raises(BytecodeError, match=r"regions nested more than 64 deep"):
        ir.read_bytecode(deep)


def test_regions_at_the_limit_read_verify_print_parse_and_run() -> None:
    module = ir.read_bytecode(ir.write_bytecode(ir.parse_module(_nested_text(64)), ir.V13_5))
    assert ir.verify_problems(module) == []
    assert ir.print_module(ir.parse_module(ir.print_module(module))) == ir.print_module(module)
    interp.launch(module, 1, [np.int32(1)])


def test_the_verifier_and_printer_refuse_too_deep_regions_with_a_verify_error() -> None:
    module = _nested_module(200)
    assert any("regions nested more than 64 deep" in p for p in ir.verify_problems(module))
    with pytest.raises(VerifyError, match=r"regions nested more than 64 deep"):
        ir.print_module(module)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(_nested_text(300), r"regions nested more than 64 deep", id="regions"),
        pytest.param(
            "entry @k() {\n  %0 = constant <i32: " + "[" * 5000 + "1" + "]" * 5000 + "> : tile<i32>\n  return\n}\n",
            r"nested too deeply to parse",
            id="array-attribute",
        ),
        pytest.param(
            "entry @k() {\n  return loc(" + "callsite(" * 3000 + '"a":1:1' + ")" * 3001 + "\n}\n",
            r"nested too deeply to parse",
            id="callsite-location",
        ),
    ],
)
def test_too_deep_assembly_is_a_syntax_error(text: str, message: str) -> None:
    with pytest.raises(AsmSyntaxError, match=message):
        ir.parse_module(text)


# -- hole (found by the fuzz below): fpowi of a pointer tile verified --------------------------------------------------


def test_fpowi_of_a_pointer_tile_does_not_verify() -> None:
    """A mutated file turned fpowi's operand and result into pointer tiles; the verifier passed it (the element rule
    looks only at scalar elements) and the interpreter then failed with a bare TypeError."""
    fn = ir.Function("k", ir.FunctionType((ir.scalar(ir.ptr(ir.f32)), ir.scalar(ir.i32))))
    b = ir.Builder(fn.body, version=ir.V13_5)
    pointer, exponent = fn.body.args
    b.create("fpowi", [pointer, exponent], {}, [pointer.type])
    b.return_()
    problems = ir.verify_problems(ir.Module([fn]), ir.V13_5)
    assert any("fpowi: expects float tiles" in p for p in problems), problems


# -- fuzz: real compiled bytecode, mutated, through reader, verifier, printer, assembler and interpreter -------------


def test_mutated_compiled_kernels_raise_only_tile_errors(kernels: ModuleType) -> None:
    seeds = [
        tc.compile_kernel(fn, SPEC, Target.cpu(), cache=False).bytecode
        for fn in (kernels.copy32, kernels.add16, kernels.looped)
    ]
    rng = random.Random(25)
    extremes = (0x00, 0x01, 0x7F, 0x80, 0xFF)
    outcomes: dict[str, int] = {}
    for case in range(300):
        data = bytearray(rng.choice(seeds))
        kind = case % 3
        if kind == 0:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.choice(extremes) if rng.random() < 0.5 else rng.randrange(256)
        elif kind == 1:
            del data[rng.randrange(len(data)) :]
        else:
            at = rng.randrange(len(data))
            data[at:at] = bytes([0xFF] * rng.randint(1, 10) + [0x7F])
        with time_limit(2):
            outcome = _exercise(bytes(data))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    # The mutations reach every stage: some files are refused, some verify and run to the end.
    assert outcomes.get("refused", 0) > 0, outcomes
    assert outcomes.get("ran", 0) > 0, outcomes


def _exercise(data: bytes) -> str:
    """Everything a file read from disk may go through; only `TileError`s may escape, and none may hang. Returns
    ``"refused"`` (a TileError), ``"invalid"`` (read, did not verify) or ``"ran"`` (verified, printed, parsed back and
    interpreted)."""
    try:
        module = ir.read_bytecode(data)
        if ir.verify_problems(module):
            return "invalid"
        text = ir.print_module(module)
        ir.parse_module(text)
        fn = module.functions[0]
        args: list[object] = [
            np.zeros(64, np.float32 if "f32" in str(t) else np.float16) if "ptr" in str(t) else 16
            for t in fn.type.inputs
        ]
        interp.launch(module, 1, args, stdout=io.StringIO())
    except TileError:
        return "refused"
    return "ran"
