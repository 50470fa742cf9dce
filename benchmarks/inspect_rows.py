"""What tileiras is given for a row kernel, and what it makes of it, without a GPU.

For each variant below, compiles one of tile.kernels' row kernels for sm_90 at the specialization a launch on
contiguous 4096-row tensors computes (extents divisible by 16, last stride 1), then prints a line of SASS counts:
global loads and stores by width (``LDG.E.128`` moves 16 bytes per thread, ``LDG.E.U16`` two), block barriers
(``BAR``), warp shuffles (``SHFL``, the reductions), ``MUFU`` (exp, rsqrt...), branches and spills, the highest
register number and the instruction count. ``--ir NAME`` also prints that variant's Tile IR (tile.ir's printer: the
bytecode tileiras reads, as text). Needs tileiras (``nvidia-cuda-tileiras``) and ``nvdisasm`` (``NVDISASM=path`` or
on PATH; the ``nvidia-cuda-nvdisasm`` wheel has one). ``--triton`` adds Triton's kernels of ``triton_rows.py``
compiled for sm_90 (needs ``triton``, not a GPU). The row length is compiled in (``N`` = the padded length here), as
the kernels' launches do. Run from the repository root:
``python benchmarks/inspect_rows.py [--triton] [--ir softmax_whole_bm1]``. docs/packages/kernels.md discusses the
output.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tile.compiler import ArraySpec, Specialization, Target, compile_kernel
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._typecheck import typecheck
from tile.ir._printer import print_module
from tile.kernels._source import kernels

F16_ROWS = {"O": "f16", "T": "f16"}
# name: (stem, kernel, consts, arrays (name -> rank), dtypes, hints)
VARIANTS: dict[str, tuple[str, str, dict[str, Any], dict[str, int], dict[str, str], dict[str, int]]] = {
    "softmax_whole_bm1": (
        "_row_kernels",
        "softmax",
        {"BM": 1, "NP": 4096, "N": 4096, "LOG": False, "LAT": 0},
        {},
        {},
        {},
    ),
    "softmax_whole_bm4": (
        "_row_kernels",
        "softmax",
        {"BM": 4, "NP": 1024, "N": 1024, "LOG": False, "LAT": 0},
        {},
        {},
        {},
    ),
    "softmax_whole_bm1_w8": (
        "_row_kernels",
        "softmax",
        {"BM": 1, "NP": 4096, "N": 4096, "LOG": False, "LAT": 0},
        {},
        {},
        {"num_worker_warps": 8},
    ),
    "softmax_chunk1024": (
        "_row_chunked",
        "softmax_chunked",
        {"BM": 1, "NP": 4096, "N": 4096, "BN": 1024, "LOG": False, "LAT": 0},
        {},
        {},
        {},
    ),
    "softmax_whole_32768": (
        "_row_kernels",
        "softmax",
        {"BM": 1, "NP": 32768, "N": 32768, "LOG": False, "LAT": 0},
        {},
        {},
        {},
    ),
    "softmax_whole_32768_w8": (
        "_row_kernels",
        "softmax",
        {"BM": 1, "NP": 32768, "N": 32768, "LOG": False, "LAT": 0},
        {},
        {},
        {"num_worker_warps": 8},
    ),
    "softmax_chunk2048_w8": (
        "_row_chunked",
        "softmax_chunked",
        {"BM": 1, "NP": 32768, "N": 32768, "BN": 2048, "LOG": False, "LAT": 0},
        {},
        {},
        {"num_worker_warps": 8},
    ),
    "rmsnorm_whole_32768_w8": (
        "_row_kernels",
        "rmsnorm",
        {"BM": 1, "NP": 32768, "N": 32768, "LAT": 0},
        {"w": 1},
        {"W": "f16"},
        {"num_worker_warps": 8},
    ),
    "rmsnorm_whole_bm1": (
        "_row_kernels",
        "rmsnorm",
        {"BM": 1, "NP": 4096, "N": 4096, "LAT": 0},
        {"w": 1},
        {"W": "f16"},
        {},
    ),
    "rmsnorm_chunk1024": (
        "_row_chunked",
        "rmsnorm_chunked",
        {"BM": 1, "NP": 4096, "N": 4096, "BN": 1024, "LAT": 0},
        {"w": 1},
        {"W": "f16"},
        {},
    ),
    "rmsnorm_chunk1024_lat1": (
        "_row_chunked",
        "rmsnorm_chunked",
        {"BM": 1, "NP": 4096, "N": 4096, "BN": 1024, "LAT": 1},
        {"w": 1},
        {"W": "f16"},
        {},
    ),
    "rmsnorm_chunk2048_w8": (
        "_row_chunked",
        "rmsnorm_chunked",
        {"BM": 1, "NP": 32768, "N": 32768, "BN": 2048, "LAT": 0},
        {"w": 1},
        {"W": "f16"},
        {"num_worker_warps": 8},
    ),
}


def _spec(name: str) -> tuple[Any, Specialization]:
    stem, entry, consts, extra, dtypes, hints = VARIANTS[name]
    kernel = getattr(kernels(stem), entry)
    ranks = {"z": 2, "x": 2} | extra
    arrays = {
        p: ArraySpec("f16", n, stride_one=last, shape_div=(16,) * n, stride_div=tuple(1 if o else 16 for o in last))
        for p, n in ranks.items()
        for last in [tuple(i == n - 1 for i in range(n))]
    }
    options = kernel.options
    if hints:
        import dataclasses

        options = dataclasses.replace(options, **hints)
    return kernel, Specialization.make(params=arrays, consts=consts, dtypes=F16_ROWS | dtypes, options=options)


def ir_text(name: str) -> str:
    """The Tile IR of a variant (what the bytecode writer encodes for tileiras)."""
    kernel, spec = _spec(name)
    target = Target("sm_90")
    module = lower(typecheck(resolve(parse(kernel.fn)), spec, target), target).module
    return print_module(module)


def sass_counts(sass: str) -> dict[str, int]:
    """Instruction counts of interest in nvdisasm's output."""
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
    counts: Counter[str] = Counter()
    for op in ops:
        base = op.split(".")[0]
        if base in ("LDG", "STG"):
            counts[op.replace(".E", "").replace(".CONSTANT", "")] += 1
        elif base in ("BAR", "SHFL", "MUFU", "BRA", "LDL", "STL", "LDS", "STS", "UTMALDG", "UTMASTG"):
            counts[base] += 1
    registers = [int(r) for r in re.findall(r"\bR(\d+)\b", sass)]
    counts["max R"] = max(registers, default=0)
    counts["instructions"] = len(ops)
    return dict(counts)


def sass(name: str, nvdisasm: str) -> str:
    kernel, spec = _spec(name)
    compiled = compile_kernel(kernel.fn, spec, "sm_90", cache=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.cubin"
        assert compiled.cubin is not None
        path.write_bytes(compiled.cubin)
        return subprocess.run([nvdisasm, "-c", str(path)], check=True, capture_output=True, text=True).stdout


def triton_sass(nvdisasm: str) -> dict[str, str]:
    """SASS of triton_rows.py's softmax and rmsnorm for sm_90 (no GPU needed), with the divisibility Triton's
    launcher specializes for contiguous f16 rows (pointers, row stride and N by 16) and the warps its launch picks."""
    import triton  # type: ignore[import-not-found]  # optional: only for --triton
    import triton_rows  # type: ignore[import-untyped]  # the script beside this one
    from triton.backends.compiler import GPUTarget  # type: ignore[import-not-found]
    from triton.compiler import ASTSource  # type: ignore[import-not-found]

    rows = {"z": "*fp16", "x": "*fp16", "stride_z": "i32", "stride_x": "i32", "N": "i32"}
    soft, norm = rows | {"BLOCK": "constexpr", "LOG": "constexpr"}, rows | {"w": "*fp16", "eps": "fp32"}
    norm = {k: norm[k] for k in ("z", "x", "w", "stride_z", "stride_x", "N", "eps")} | {"BLOCK": "constexpr"}
    found = {}
    for label, fn, sig, consts in (
        ("triton_softmax_4096", triton_rows._softmax, soft, {"BLOCK": 4096, "LOG": False}),
        ("triton_softmax_32768", triton_rows._softmax, soft, {"BLOCK": 32768, "LOG": False}),
        ("triton_rmsnorm_4096", triton_rows._rmsnorm, norm, {"BLOCK": 4096}),
        ("triton_rmsnorm_32768", triton_rows._rmsnorm, norm, {"BLOCK": 32768}),
    ):
        names = list(sig)
        wide = [a for a in names if sig[a].startswith("*") or a.startswith("stride") or a == "N"]
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in wide}
        source = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
        warps = triton_rows._warps(consts["BLOCK"])
        compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.cubin"
            path.write_bytes(compiled.asm["cubin"])
            found[label] = subprocess.run(
                [nvdisasm, "-c", str(path)], check=True, capture_output=True, text=True
            ).stdout
    return found


def main() -> None:
    if "--ir" in sys.argv:
        print(ir_text(sys.argv[sys.argv.index("--ir") + 1]))
        return
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if nvdisasm is None:
        sys.exit("nvdisasm not found: set NVDISASM=/path/to/nvdisasm (the nvidia-cuda-nvdisasm wheel has one)")
    found = {name: sass(name, nvdisasm) for name in VARIANTS}
    if "--triton" in sys.argv:
        found |= triton_sass(nvdisasm)
    for name, text in found.items():
        counts = sass_counts(text)
        print(f"{name:>22}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
