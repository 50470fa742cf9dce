"""The multi-token `prep_qkv` kernel (``qkv_prep_rows`` of ``_qwen3_kernels.tilepy``) in SASS, without a GPU: each
candidate block shape of ``benchmarks/prep_sweep.py`` (tokens, query heads a block, occupancy hint, RoPE tables'
dtype) compiled for sm_90 as Qwen3-4B's prefill launches it (rows ``(T, 48 * 128)`` bf16, caches ``(8, T, 128)``,
256-byte aligned), disassembled with ``nvdisasm`` and reported: registers, shared memory, spills, TMA
(``UTMALDG``/``UTMASTG``) against register loads and stores (``LDG``/``STG``), shared-memory traffic (``LDS``/``STS``:
layout conversions), barriers, and the blocks an SM holds by registers and shared memory (128 threads a block).

    python benchmarks/prep_sass.py [--tokens=2048] [--nvdisasm=PATH]

``nvdisasm`` comes from ``--nvdisasm``, ``$NVDISASM`` or the PATH (the ``nvidia-cuda-nvdisasm`` wheel has one).
Writes ``benchmarks/results/prep_sass.json``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fmha_sass  # type: ignore[import-not-found]  # beside this script

import tile.frontend as tile
from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels.qwen3 import _ops

RESULTS = Path(__file__).resolve().parent / "results" / "prep_sass.json"
ARGS = {a[2:].partition("=")[0]: a.partition("=")[2] or "1" for a in sys.argv[1:] if a.startswith("--")}
HEADS, KV, HD = 32, 8, 128
ADDRESS = 1 << 40  # a 256-byte aligned base, as the CUDA allocator gives
SM_REGISTERS, SM_SHARED, BLOCK_RESERVED, THREADS = 65536, 233472, 1024, 128  # sm_90
CONFIGS = [  # (tokens, group, occupancy, tables)
    (tokens, group, occupancy, tables)
    for tables in ("f32", "bf16")
    for tokens, group in ((16, 1), (32, 1), (64, 1), (32, 2), (32, 4), (16, 4))
    for occupancy in (0, 2, 4)
]


def _array(dtype: str, shape: tuple[int, ...]) -> ArraySpec:
    return ArraySpec.of(dtype, shape, tuple(math.prod(shape[i + 1 :]) for i in range(len(shape))), ADDRESS)


def specialization(kernel: Any, n: int, tokens: int, group: int, tables: str) -> Specialization:
    params = {
        "z": _array("bf16", (n, HEADS * HD)),
        "zk": _array("bf16", (KV, n, HD)),
        "zv": _array("bf16", (KV, n, HD)),
        "x": _array("bf16", (n, (HEADS + 2 * KV) * HD)),
        "wq": _array("bf16", (1, HD)),
        "wk": _array("bf16", (1, HD)),
        "cos": _array(tables, (n, HD // 2)),
        "sin": _array(tables, (n, HD // 2)),
        "pos": _array("i32", (1,)),
    }
    consts = {"R": tokens, "G": group, "GHD": group * HD, "HD": HD, "HALF": HD // 2, "NX": (HEADS + 2 * KV) * HD}
    consts |= {"OFF": HEADS, "KV": KV, "ALIGNED": True}
    dtypes = {"O": "bf16", "C": "bf16", "D": "bf16", "W": "bf16", "RT": tables}
    return Specialization.make(params=params, consts=consts, dtypes=dtypes, options=kernel.options)


def blocks_per_sm(registers: int, shared: int) -> int:
    """Blocks of THREADS threads an SM holds by its registers (allocated in 8s a thread) and shared memory."""
    by_registers = SM_REGISTERS // (math.ceil(registers / 8) * 8 * THREADS)
    by_shared = SM_SHARED // (shared + BLOCK_RESERVED)
    return min(by_registers, by_shared, 32)


def main() -> None:
    nvdisasm = ARGS.get("nvdisasm") or os.environ.get("NVDISASM") or shutil.which("nvdisasm") or ""
    if not nvdisasm:
        raise SystemExit("no nvdisasm: pass --nvdisasm=PATH, set NVDISASM or pip install nvidia-cuda-nvdisasm")
    n = int(ARGS.get("tokens", "2048"))
    report: dict[str, Any] = {"tokens": n, "heads": HEADS, "kv_heads": KV, "head_dim": HD, "kernels": []}
    with tempfile.TemporaryDirectory() as folder:
        for tokens, group, occupancy, tables in CONFIGS:
            kernel = _ops._rows_kernel(occupancy)
            compiled = compile_kernel(kernel.fn, specialization(kernel, n, tokens, group, tables), "sm_90")
            name = f"t{tokens}_g{group}_o{occupancy}_{tables}"
            found = fmha_sass.survey(name, compiled, Path(folder), nvdisasm)
            whole = found.pop("whole")
            found.pop("loops")
            counts = {k: whole.get(k, 0) for k in ("UTMALDG", "UTMASTG", "LDG", "STG", "LDS", "STS", "BAR", "total")}
            sm = blocks_per_sm(found["registers"], found["static_shared_bytes"])
            entry = {"tokens": tokens, "group": group, "occupancy": occupancy, "tables": tables, **found, **counts}
            entry["blocks_per_sm"] = sm
            report["kernels"].append(entry)
            print(
                f"{name:16s} {found['registers']:3d} registers {found['static_shared_bytes']:6d} B shared "
                f"spills {found['spill_stores']}/{found['spill_loads']} -> {sm} blocks/SM; "
                + " ".join(f"{k}={v}" for k, v in counts.items()),
                flush=True,
            )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    tile.set_backend("cpu")  # compiling only: no device is touched
    main()
