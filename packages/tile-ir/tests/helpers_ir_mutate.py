"""A seeded mutation fuzzer for read -> verify -> print, over a corpus of real bytecode files.

`corpus()` gathers the files: every cuTile Python export of `cutile_corpus` (13.3 and 13.5, the peer's own
bytecode), every builder op sample at each supported version (written by our writer) and tile-core's
checked-in ``vec_add.tileirbc``. `mutate` applies one to three random edits (bit flips, byte overwrites with
varint extremes, truncation, insertion, deletion) drawn from a `random.Random`; `run_one` pushes the result
through ``read_bytecode`` -> ``verify`` -> ``print_module`` (printing whether or not it verified) and returns
the typed error met (None when it verified and printed). Anything else propagates: that is the crash the
fuzzer exists to find. `mutate_ir` damages a read module the way builder code can (wrong result types,
attribute values, operands, a missing block) for `fuzz_ir`.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_samples import SAMPLES, build_sample
from tile.ir import (
    SUPPORTED_VERSIONS,
    BytecodeError,
    FunctionType,
    Module,
    Type,
    VerifyError,
    print_module,
    read_bytecode,
    read_version,
    verify,
    write_bytecode,
)

VEC_ADD = Path(__file__).parents[2] / "tile-core" / "tests" / "fixtures" / "vec_add.tileirbc"
EXTREMES = (0x00, 0x01, 0x7F, 0x80, 0xFF)


def corpus(*, peer: bool = True) -> list[bytes]:
    """Every seed file: builder samples at each version, vec_add, and (with `peer`) cuTile Python exports."""
    seeds = [VEC_ADD.read_bytes()]
    for version in SUPPORTED_VERSIONS:
        for name in sorted(SAMPLES):
            try:
                seeds.append(write_bytecode(build_sample(name, version), version))
            except VerifyError:  # the op does not exist at this version
                continue
    if peer:
        from cutile_corpus.kernels import cases, export

        seeds.extend(export(kernel, version) for kernel, version in cases())
    return seeds


def mutate(rng: random.Random, seed: bytes) -> bytes:
    """Return `seed` with one to four random edits; the 12-byte header is edited too, but rarely."""
    data = bytearray(seed)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        low = 0 if rng.random() < 0.05 else min(12, len(data))
        pos = rng.randint(low, max(low, len(data) - 1)) if data else 0
        kind = rng.randrange(5)
        if kind == 0 and data:
            data[pos % len(data)] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:
            data[pos % len(data)] = rng.choice(EXTREMES)
        elif kind == 2:
            del data[rng.randint(low, len(data)) if len(data) >= low else len(data) :]
        elif kind == 3:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            del data[pos : pos + rng.randint(1, 8)]
    return bytes(data)


def run_one(data: bytes) -> type[Exception] | None:
    """Read, verify and print `data` (printing even what fails to verify, as ``tile-ir dis`` does); return the
    first typed error met (`BytecodeError` stops at the reader), or None when it verified and printed."""
    try:
        module = read_bytecode(data)
        version = read_version(data)
    except BytecodeError:
        return BytecodeError
    outcome: type[Exception] | None = None
    try:
        verify(module, version)
    except VerifyError:
        outcome = VerifyError
    try:
        print_module(module)
        print_module(module, debug=True)
    except VerifyError:
        outcome = VerifyError
    return outcome


@dataclass
class Report:
    """What a fuzzing run saw: outcome counts and the slowest input."""

    outcomes: dict[str, int] = field(default_factory=dict)
    slowest: float = 0.0

    def add(self, outcome: type[Exception] | None, seconds: float) -> None:
        key = "printed" if outcome is None else outcome.__name__
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        self.slowest = max(self.slowest, seconds)


def fuzz(seeds: list[bytes], count: int, seed: int) -> Report:
    """Run `count` mutations of `seeds` from RNG seed `seed`; an untyped failure propagates with its input."""
    rng = random.Random(seed)
    report = Report()
    for i in range(count):
        data = mutate(rng, rng.choice(seeds))
        start = time.perf_counter()
        try:
            outcome = run_one(data)
        except Exception as exc:
            raise AssertionError(f"mutation {i} (seed {seed}) escaped as {type(exc).__name__}: {data.hex()}") from exc
        report.add(outcome, time.perf_counter() - start)
    return report


def mutate_ir(rng: random.Random, module: Module, donor: Module) -> None:
    """Damage `module` in place the way builder code can: a result gets a type, an attribute a value, an operand a
    value, taken from anywhere in `module` or `donor` (a function type included), or a region loses its block."""
    ops = [op for fn in module.functions for op in fn.walk()]
    donors = [op for fn in donor.functions for op in fn.walk()]
    op = rng.choice(ops)
    kind = rng.randrange(4)
    if kind == 0 and op.results:
        types: list[Type] = [r.type for d in donors for r in d.results] + [FunctionType(())]
        rng.choice(op.results).type = rng.choice(types)
    elif kind == 1 and op.attributes:
        values = [v for d in donors for v in d.attributes.values()]
        op.attributes[rng.choice(sorted(op.attributes))] = rng.choice(values) if values else None
    elif kind == 2 and op.operands:
        op.operands[rng.randrange(len(op.operands))] = rng.choice([v for o in ops for v in o.results] or op.operands)
    elif kind == 3 and op.regions:
        rng.choice(op.regions).blocks.clear()


def fuzz_ir(seeds: list[bytes], count: int, seed: int) -> Report:
    """Mutate `count` read modules with `mutate_ir`; verify and print each. Only `VerifyError` may escape."""
    rng = random.Random(seed)
    report = Report()
    for i in range(count):
        module, donor = read_bytecode(rng.choice(seeds)), read_bytecode(rng.choice(seeds))
        mutate_ir(rng, module, donor)
        start = time.perf_counter()
        outcome: type[Exception] | None = None
        for debug in (None, False, True):
            try:
                verify(module) if debug is None else print_module(module, debug=debug)
            except VerifyError:
                outcome = VerifyError
            except Exception as exc:
                raise AssertionError(f"IR mutation {i} (seed {seed}) escaped as {type(exc).__name__}") from exc
        report.add(outcome, time.perf_counter() - start)
    return report
