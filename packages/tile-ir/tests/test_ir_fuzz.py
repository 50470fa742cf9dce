"""Mutated inputs raise only the documented error: `BytecodeError` from the reader, `AsmSyntaxError` from
the assembler -- never another exception, never a hang.

Seeds are valid files (op samples and cuTile exports). Mutations: bit flips, byte overwrites with varint
extremes, truncation, insertion/deletion, and section-level edits (shuffle, drop, duplicate) that keep the
framing intact so the damage reaches the section parsers. A damaged file that still reads goes on through the
verifier, and, if it verifies, the printer: only the documented errors may escape there too. Examples are
derandomized for CI stability (200 per test); ``TILE_FUZZ_SEED=N`` draws another set and ``TILE_FUZZ_EXAMPLES``
sets the count, so a long run is ``TILE_FUZZ_EXAMPLES=20000 TILE_FUZZ_SEED=7``. A per-example alarm turns a hang
into a failure.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_samples import build_sample
from tile.ir import (
    V13_1,
    V13_3,
    V13_5,
    AsmSyntaxError,
    BytecodeError,
    parse_module,
    print_module,
    read_bytecode,
    read_version,
    verify_problems,
    write_bytecode,
)
from tile.ir._decoding import ByteReader

SEEDS: list[bytes] = [
    write_bytecode(build_sample(name, version), version)
    for name, version in [
        ("reduce", V13_3),
        ("for", V13_1),
        ("load_view_tko", V13_5),
        ("get_global", V13_3),
        ("if", V13_5),
        ("atomic_cas_tko", V13_3),
    ]
]
TEXTS = [print_module(read_bytecode(seed)) for seed in SEEDS]
EXAMPLES = int(os.environ.get("TILE_FUZZ_EXAMPLES", "200"))
SEED = int(os.environ.get("TILE_FUZZ_SEED", "0"))
_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=SEED == 0,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


def FUZZ(test: Callable[..., None]) -> Callable[..., None]:  # noqa: N802 - used as a settings object was
    """The fuzz settings, and the seed when ``TILE_FUZZ_SEED`` names one."""
    return _SETTINGS(hypothesis_seed(SEED)(test) if SEED else test)


@contextmanager
def _no_hang(seconds: float = 5.0) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s: the input made the parser hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _read(data: bytes) -> None:
    """Read `data`: it decodes, or fails with a BytecodeError whose offset lies inside the input (any other
    exception, a hang, or an error pointing past the input fails the test). What decodes is verified (a list of
    problems, never an exception) and, when it verifies, printed to text that parses back to the same text."""
    with _no_hang():
        try:
            module = read_bytecode(data)
        except BytecodeError as err:
            offset, message = err.offset, str(err)
        else:
            if not verify_problems(module, read_version(data)):
                text = print_module(module)
                assert print_module(parse_module(text)) == text
            return
    assert 0 <= offset <= len(data), f"{message} points outside the {len(data)}-byte input"


def _sections(data: bytes) -> list[bytes]:
    """The raw bytes of each section (header, padding, payload) after the 12-byte header."""
    r = ByteReader(data, 12)
    chunks: list[bytes] = []
    while True:
        start = r.pos
        head = r.byte()
        if head == 0:
            return chunks
        size = r.varint()
        if head & 0x80:
            align = r.varint()
            while r.pos % align:
                r.byte()
        r.take(size)
        chunks.append(data[start : r.pos])


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips_raise_only_bytecode_error(seed: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(seed)
    for pos, bit in flips:
        data[pos % len(data)] ^= 1 << bit
    _read(bytes(data))


@FUZZ
@given(st.sampled_from(SEEDS), st.integers(0, 1 << 20), st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
def test_varint_extremes_raise_only_bytecode_error(seed: bytes, pos: int, byte: int) -> None:
    data = bytearray(seed)
    data[12 + pos % (len(data) - 12)] = byte
    _read(bytes(data))


@FUZZ
@given(st.sampled_from(SEEDS), st.integers(0, 1 << 20), st.binary(max_size=6), st.integers(0, 6))
def test_truncation_and_splices_raise_only_bytecode_error(seed: bytes, pos: int, insert: bytes, delete: int) -> None:
    cut = pos % (len(seed) + 1)
    _read(seed[:cut])
    _read(seed[:cut] + insert + seed[cut + delete :])


@FUZZ
@given(st.sampled_from(SEEDS), st.randoms(use_true_random=False), st.sampled_from(["shuffle", "drop", "duplicate"]))
def test_section_edits_raise_only_bytecode_error(seed: bytes, rng: object, edit: str) -> None:
    sections = _sections(seed)
    assert sections, "a seed without sections"
    index = rng.randrange(len(sections))  # type: ignore[attr-defined]  # random.Random
    if edit == "shuffle":
        rng.shuffle(sections)  # type: ignore[attr-defined]  # random.Random
    elif edit == "drop":
        del sections[index]
    else:
        sections.insert(index, sections[index])
    _read(seed[:12] + b"".join(sections) + b"\x00")


TEXT_NOISE = st.text(alphabet='%@<>()[]{}:=,x?0123456789-\n" a', max_size=4)


@FUZZ
@given(st.sampled_from(TEXTS), st.integers(0, 1 << 20), TEXT_NOISE, st.integers(0, 4))
def test_mutated_text_raises_only_asm_syntax_error(text: str, pos: int, insert: str, delete: int) -> None:
    cut = pos % (len(text) + 1)
    mutated = text[:cut] + insert + text[cut + delete :]
    error: AsmSyntaxError | None = None
    with _no_hang():
        try:
            parse_module(mutated)
        except AsmSyntaxError as err:
            error = err
    if error is not None:
        assert 1 <= error.line <= mutated.count("\n") + 1
        assert error.col >= 1


def test_seeds_are_valid() -> None:
    for seed, text in zip(SEEDS, TEXTS, strict=True):
        assert print_module(parse_module(text)) == text
        assert _sections(seed)


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 7)), min_size=1, max_size=3))
def test_damaged_but_valid_modules_print_and_parse_back(seed: bytes, flips: list[tuple[int, int]]) -> None:
    data = bytearray(seed)
    for pos, bit in flips:
        data[12 + pos % (len(data) - 12)] ^= 1 << bit
    with _no_hang():
        try:
            module = read_bytecode(bytes(data))
        except BytecodeError:
            return
        if verify_problems(module, read_version(bytes(data))):
            return
        text = print_module(module)
        assert print_module(parse_module(text)) == text
