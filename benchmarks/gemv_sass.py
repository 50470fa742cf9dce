"""What tileiras makes of each decode GEMV candidate, without a GPU: every config `_gemm_configs.decode_candidates`
lists for Qwen3-4B's projections (M = 1 and 16) is compiled for sm_90 with the argument layouts a model passes (the
weight as ``w.T``, 256-byte aligned, bf16), disassembled with ``nvdisasm``, and its instructions counted: register
spills (``STL``/``LDL``), bulk tensor loads (``UTMALDG``: the TMA path), the matrix unit (``HGMMA`` warpgroup MMA,
``HMMA`` warp MMA) or CUDA-core FMAs (``FFMA``: an mma tileiras lowered without the matrix unit). A config that
spills or multiplies on the CUDA cores is suspect before any timing; gemv_sweep.py then times them on a GPU.

    python benchmarks/gemv_sass.py [--nvdisasm=PATH] [--shapes=qkv,o] [--ms=1,16]

``nvdisasm`` comes from ``$NVDISASM``, ``--nvdisasm`` or the PATH (pip's ``nvidia-cuda-nvdisasm`` has one). Writes
``benchmarks/results/gemv_sass.json``.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels import _gemm_configs, _gemv, autotune
from tile.kernels._source import kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemv_decode  # type: ignore[import-not-found]  # beside this script

RESULTS = Path(__file__).resolve().parent / "results" / "gemv_sass.json"
ARGS = {a[2:].partition("=")[0]: a.partition("=")[2] or "1" for a in sys.argv[1:] if a.startswith("--")}
COUNTED = ("HGMMA", "HMMA", "UTMALDG", "LDGSTS", "LDG", "STL", "LDL", "FFMA", "SHFL")
ADDRESS = 1 << 40  # a 256-byte aligned base, as the CUDA allocator gives
SMS = 132  # an H100's SMs: the candidate lists depend on them


def _array(dtype: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> ArraySpec:
    return ArraySpec.of(dtype, shape, strides, ADDRESS)


def specialization(config: autotune.Config, m: int, n: int, k: int) -> tuple[Any, Specialization]:
    """The kernel a config launches first and its specialization for a bf16 (m, n, k) decode matmul, w.T weight."""
    values = config.as_dict()
    form, split = values.get("FORM", 0), values["SPLIT"]
    stem = kernels("_gemm_kernels")
    epilogue = {"ACT": 0, "HAS_BIAS": False, "HAS_RES": False}
    params = {"a": _array("bf16", (m, k), (k, 1)), "b": _array("bf16", (k, n), (1, k))}
    dtypes = {"T": "bf16"}
    consts: dict[str, Any] = {"BM": values["BM"], "BN": values["BN"], "BK": values["BK"]}
    if split > 1 and form in (0, 3):  # the split kernel, writing f32 partials (the reduction is tiny)
        kernel = stem.gemm_split_k if form == 0 else stem.gemv_wx_split_k
        params["z"] = _array("f32", (split, m, n), (m * n, n, 1))
        consts["SPLIT"] = split
        if form == 3:
            consts |= {"LAT": values["LAT"], "TMA": bool(values["TMA"])}
    else:
        kernel = stem.gemm if form == 0 else _gemv._kernel(form, values["OCC"])
        params |= {"z": _array("bf16", (m, n), (n, 1)), "bias": _array("f32", (1,), (1,))}
        params["res"] = _array("f32", (1, 1), (1, 1))
        dtypes |= {"O": "bf16", "BT": "f32", "RT": "f32"}
        consts |= epilogue | ({"GROUP": values["GROUP"]} if form == 0 else {})
        if form != 0:
            consts |= {"LAT": values["LAT"], "TMA": bool(values["TMA"])}
    return kernel, Specialization.make(params=params, consts=consts, dtypes=dtypes, options=kernel.options)


def survey(nvdisasm: str, config: autotune.Config, mnk: tuple[int, int, int], folder: Path) -> dict[str, Any]:
    """Compile one config for an (m, n, k) matmul on sm_90 and count its instructions (see `COUNTED`)."""
    kernel, spec = specialization(config, *mnk)
    start = time.perf_counter()
    compiled = compile_kernel(kernel.fn, spec, "sm_90")
    seconds = time.perf_counter() - start
    cubin = folder / "kernel.cubin"
    if compiled.cubin is None:
        raise SystemExit(f"{config}: tileiras gave no cubin")
    cubin.write_bytes(compiled.cubin)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    ops = collections.Counter(re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass))
    found: dict[str, Any] = {"config": str(config), "compile_s": round(seconds, 2)}
    found |= {name: ops[name] for name in COUNTED}
    found["wide_loads"] = len(re.findall(r"LDG\.E\.(?:128|ENL2\.256)", sass))
    return found


def verdict(entry: dict[str, Any]) -> str:
    notes = []
    if entry["STL"] or entry["LDL"]:
        notes.append("SPILLS")
    if not (entry["HGMMA"] or entry["HMMA"]) and entry["FFMA"]:
        notes.append("cuda-cores")
    notes.append("wgmma" if entry["HGMMA"] else "mma" if entry["HMMA"] else "")
    notes.append("tma" if entry["UTMALDG"] else f"ldg{'128' if entry['wide_loads'] else ''}" if entry["LDG"] else "")
    return " ".join(n for n in notes if n)


def main() -> None:
    nvdisasm = ARGS.get("nvdisasm") or os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not nvdisasm:
        raise SystemExit("no nvdisasm: set NVDISASM, pass --nvdisasm=PATH or pip install nvidia-cuda-nvdisasm")
    wanted = ARGS.get("shapes")
    shapes = {p: nk for p, nk in gemv_decode.projections("4b", False).items() if p != "lm_head"}
    shapes = {p: nk for p, nk in shapes.items() if wanted is None or p in wanted.split(",")}
    report: dict[str, Any] = {"sms": SMS, "shapes": {}}
    with tempfile.TemporaryDirectory() as folder:
        for proj, (n, k) in shapes.items():
            for m in (int(v) for v in ARGS.get("ms", "1,16").split(",")):
                key = f"{proj}_m{m}"
                rows = report["shapes"][key] = []
                for config in _gemv.candidates(m, n, SMS) + _gemm_configs.SKINNY:  # decode_candidates on an H100
                    entry = survey(nvdisasm, config, (m, n, k), Path(folder))
                    entry["verdict"] = verdict(entry)
                    rows.append(entry)
                    print(f"{key:10s} {entry['compile_s']:5.1f}s {entry['verdict']:26s} {config}", flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
