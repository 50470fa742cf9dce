"""The library's prefill attention (``fmha_rows`` of ``_attention_kernels.tilepy``) in SASS, without a GPU: compiled
for sm_90 at each prefill config `tile.kernels._attention` tunes over (``_PREFILL``: BM x BN), causal, as Qwen3-4B's
prefill launches it (rows ``(T, 32 * 128)`` bf16, caches ``(8, T, 128)``, 256-byte aligned), once with the kernel's
causal mask ``where(keep, s, -1e38)`` and once with the additive form ``s + where(keep, 0, -1e38)`` (the form
``examples/attention.py`` takes for 64-row tiles; see docs/compiler/performance.md, "FMHA vs cuTile"), the second
compiled from a copy of the source with that one line changed. Reported per kernel: registers, spills
(``STL``/``LDL``), shared memory, SASS lines, and the masked key loop's instruction mix (the last of the loops
holding ``HGMMA`` and ``MUFU.EX2``, `fmha_sass.innermost_mma_loops`).

    python benchmarks/fmha_rows_sass.py [--tokens=2048] [--nvdisasm=PATH]

``nvdisasm`` comes from ``--nvdisasm``, ``$NVDISASM`` or the PATH (the ``nvidia-cuda-nvdisasm`` wheel has one).
Writes ``benchmarks/results/fmha_rows_sass.json``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fmha_sass  # type: ignore[import-not-found]  # beside this script

from tile.compiler import ArraySpec, Specialization, compile_kernel
from tile.kernels import _attention
from tile.kernels._source import kernels

RESULTS = Path(__file__).resolve().parent / "results" / "fmha_rows_sass.json"
ARGS = {a[2:].partition("=")[0]: a.partition("=")[2] or "1" for a in sys.argv[1:] if a.startswith("--")}
HEADS, KV, D = 32, 8, 128
ADDRESS = 1 << 40  # a 256-byte aligned base, as the CUDA allocator gives
WHERE = "s = tile.where(keep, s, -1.0e38)"
ADDITIVE = "s = s + tile.where(keep, 0.0, -1.0e38)"


def additive_module(folder: Path) -> ModuleType:
    """The attention kernels with the causal mask in its additive form (a copy of the source, one line changed)."""
    source = (Path(_attention.__file__).parent / "_attention_kernels.tilepy").read_text()
    if source.count(WHERE) != 1:
        raise SystemExit(f"_attention_kernels.tilepy: expected one '{WHERE}' (the causal mask) to swap")
    path = folder / "_attention_kernels_additive.tilepy"
    path.write_text(source.replace(WHERE, ADDITIVE))
    loader = importlib.machinery.SourceFileLoader("tile.kernels._attention_kernels_additive", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[loader.name] = module  # the compiler reads the kernel's source through its module
    return module


def _array(shape: tuple[int, ...]) -> ArraySpec:
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return ArraySpec.of("bf16", shape, strides, ADDRESS)


def survey(kernel: Any, tile_shape: tuple[int, int], tokens: int, where: tuple[Path, str, str]) -> dict[str, Any]:
    """Compile ``kernel`` at query/key tiles ``tile_shape`` for ``tokens`` rows; survey it as ``name`` under ``out``."""
    (bm, bn), (out, nvdisasm, name) = tile_shape, where
    params = {
        "o": _array((tokens, HEADS * D)),
        "q": _array((tokens, HEADS * D)),
        "k": _array((KV, tokens, D)),
        "v": _array((KV, tokens, D)),
    }
    consts = {"BM": bm, "BN": bn, "D": D, "GROUP": HEADS // KV, "CAUSAL": True, "EVEN_K": tokens % bn == 0}
    spec = Specialization.make(params=params, consts=consts, dtypes={"T": "bf16"}, options=kernel.options)
    found: dict[str, Any] = fmha_sass.survey(name, compile_kernel(kernel.fn, spec, "sm_90"), out, nvdisasm)
    loops = fmha_sass.innermost_mma_loops(found.pop("loops"))
    found["masked_loop"] = loops[-1] if loops else {}
    return found


def main() -> None:
    nvdisasm = ARGS.get("nvdisasm") or os.environ.get("NVDISASM") or shutil.which("nvdisasm") or ""
    if not nvdisasm:
        raise SystemExit("no nvdisasm: pass --nvdisasm=PATH, set NVDISASM or pip install nvidia-cuda-nvdisasm")
    tokens = int(ARGS.get("tokens", "2048"))
    report: dict[str, Any] = {"tokens": tokens, "heads": HEADS, "kv_heads": KV, "dim": D, "kernels": {}}
    with tempfile.TemporaryDirectory() as folder:
        forms = {"where": kernels("_attention_kernels"), "additive": additive_module(Path(folder))}
        for config in _attention._PREFILL:
            bm, bn = config["BM"], config["BN"]
            for form, module in forms.items():
                name = f"{form}_{bm}_{bn}"
                entry = survey(module.fmha_rows, (bm, bn), tokens, (Path(folder), nvdisasm, name))
                report["kernels"][name] = entry
                loop = entry["masked_loop"]
                print(
                    f"{name:16s} {entry['registers']} registers, {entry['static_shared_bytes']} B shared, spills "
                    f"{entry['spill_stores']}/{entry['spill_loads']}, {entry['whole']['total']} instructions; "
                    f"masked loop {loop.get('total')} (FADD {loop.get('FADD')}, FSEL {loop.get('FSEL')}, "
                    f"ISETP {loop.get('ISETP')}, predicated {loop.get('predicated')})",
                    flush=True,
                )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
