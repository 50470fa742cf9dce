"""tile-ir throughput on a 10,000-op module: build, write, read, print, assemble -- and cuTile Python's writer.

The module is one entry kernel: a ``constant`` of ``tile<128xf32>``, then a chain of 9,998 ops cycling through
``addf``, ``mulf``, ``maxf``, ``subf``, ``exp``, ``negf`` (each consuming the previous result), then ``return``:
10,000 ops, written at bytecode 13.3.

Rows (ops per second, median of ROUNDS runs, after one warm-up):
- ``tile.ir build``: the public builder creating the 10,000 `Operation`s;
- ``tile.ir write``: ``write_bytecode`` of the built module;
- ``tile.ir build+write``: both, the work comparable to cuTile Python's writer;
- ``cuTile Python build+write``: cuTile's internal bytecode writer (``cuda.tile._bytecode``: one ``encode_*Op``
  call per op, writing as it goes) producing the same module; it has no separate data model, so only this row
  compares. Both outputs are checked to decode to the same op sequence;
- ``tile.ir read``: ``read_bytecode`` of the bytes;
- ``tile.ir print`` / ``tile.ir assemble``: the text printer and the assembler (no cuTile counterpart).

CPU only. Run from the repository root: ``python benchmarks/bench_ir.py``; prints a table and writes
``benchmarks/results/ir_throughput.json`` (numbers, versions, machine).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tile.ir import V13_3, Builder, Function, FunctionType, Module, f32, read_bytecode, tile, write_bytecode
from tile.ir._asm import parse_module
from tile.ir._printer import print_module

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "ir_throughput.json"
N_OPS, ROUNDS = 10_000, 7
CHAIN = ("addf", "mulf", "maxf", "subf", "exp", "negf")
T = tile((128,), f32)


def build_tile_ir() -> Module:
    """The benchmark module, built with tile.ir's builder."""
    fn = Function("chain", FunctionType(()))
    b = Builder(fn.body)
    x = b.constant(1.5, T)
    for i in range(N_OPS - 2):
        name = CHAIN[i % len(CHAIN)]
        x = getattr(b, name)(x) if name in ("exp", "negf") else getattr(b, name)(x, x)
    b.return_()
    return Module([fn])


def build_cutile() -> bytes:
    """The same module through cuTile Python's bytecode writer."""
    import struct

    from cuda.tile import _bytecode as bc

    buf = bytearray()
    with bc.write_bytecode(num_functions=1, buf=buf, version=bc.BytecodeVersion.V_13_3) as w:
        tt = w.type_table
        t = tt.tile(tt.F32, [128])
        with w.function("chain", [], [], True, {}, bc.MISSING_DEBUG_ATTR_ID) as (cb, _params):
            x = bc.encode_ConstantOp(cb, t, struct.pack("<f", 1.5))
            ne = bc.RoundingMode.NEAREST_EVEN
            for i in range(N_OPS - 2):
                name = CHAIN[i % len(CHAIN)]
                if name == "addf":
                    x = bc.encode_AddFOp(cb, t, x, x, ne, False)
                elif name == "mulf":
                    x = bc.encode_MulFOp(cb, t, x, x, ne, False)
                elif name == "subf":
                    x = bc.encode_SubFOp(cb, t, x, x, ne, False)
                elif name == "maxf":
                    x = bc.encode_MaxFOp(cb, t, x, x, False, False)
                elif name == "exp":
                    x = bc.encode_ExpOp(cb, t, x, bc.RoundingMode.FULL)
                else:
                    x = bc.encode_NegFOp(cb, t, x)
            bc.encode_ReturnOp(cb, [])
    return bytes(buf)


def _median_rate(fn: Callable[[], object]) -> float:
    fn()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return N_OPS / statistics.median(times)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> int:
    module = build_tile_ir()
    data = write_bytecode(module, V13_3)
    text = print_module(module)
    assert sum(1 for _ in module.functions[0].walk()) == N_OPS
    rows: dict[str, float | None] = {
        "tile.ir build": _median_rate(build_tile_ir),
        "tile.ir write": _median_rate(lambda: write_bytecode(module, V13_3)),
        "tile.ir build+write": _median_rate(lambda: write_bytecode(build_tile_ir(), V13_3)),
        "cuTile Python build+write": None,
        "tile.ir read": _median_rate(lambda: read_bytecode(data)),
        "tile.ir print": _median_rate(lambda: print_module(module)),
        "tile.ir assemble": _median_rate(lambda: parse_module(text)),
    }
    cutile_note = "cuda-tile not installed"
    if _version("cuda-tile"):
        theirs = build_cutile()
        ours = [op.name for op in module.functions[0].walk()]
        assert [op.name for op in read_bytecode(theirs).functions[0].walk()] == ours, "cuTile module differs"
        rows["cuTile Python build+write"] = _median_rate(build_cutile)
        cutile_note = (
            f"same op sequence; cuTile bytes {len(theirs)}, tile.ir bytes {len(data)} (cuTile adds debug info)"
        )
    ratio = None
    if rows["cuTile Python build+write"]:
        ratio = rows["tile.ir build+write"] / rows["cuTile Python build+write"]  # type: ignore[operator]  # both set
    print(f"tile-ir throughput, {N_OPS} ops, bytecode 13.3, median of {ROUNDS} (ops/s), load {os.getloadavg()[0]:.1f}")
    for name, rate in rows.items():
        print(f"  {name:<28} {'n/a' if rate is None else f'{rate:>12,.0f}'}")
    if ratio is not None:
        print(f"  tile.ir / cuTile build+write: {ratio:.2f}x  ({cutile_note})")
    result: dict[str, Any] = {
        "benchmark": "ir_throughput",
        "ops": N_OPS,
        "bytecode_version": "13.3",
        "rounds": ROUNDS,
        "ops_per_second": rows,
        "tile_ir_over_cutile_build_write": ratio,
        "note": cutile_note,
        "versions": {
            "python": platform.python_version(),
            "tile-ir": _version("tile-ir"),
            "cuda-tile": _version("cuda-tile"),
        },
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            # recorded because other work on this 2-core machine slows the rows (compare runs at similar load)
            "load_average_1m": os.getloadavg()[0],
        },
        "bytes": len(data),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
