"""Tile's FMHA against cuTile Python's FMHA sample in SASS, without a GPU.

Both kernels of ``bench_lang_fmha.py`` are compiled for sm_90 at one of its configurations, specialised as a launch
does (the benchmark's (batch*heads, seq, D) / (B, H, S, D) f16 tensors, contiguous, 256-byte aligned): Tile's forms
``tile`` (``examples/attention.py``: the ``o.tiles()`` walk on its own grid) and ``tile_qmajor`` (the benchmark's
(seq, batch*heads, D) output view), and cuTile Python's ``ct_fmha`` (``benchmarks/cutile_peers.py``), exported as
Tile IR bytecode by ``cuda.tile.compilation.export_kernel`` (no GPU needed) and compiled by the same tileiras.
Each cubin is disassembled with ``nvdisasm`` and reported: registers, spills (``STL``/``LDL``), shared memory, SASS
lines, and the instruction mix of every loop (a backward branch's span; the hot ones hold ``HGMMA`` or ``UTMALDG``):
``HGMMA``, ``MUFU.EX2``, ``FMUL``/``FFMA``/``FADD``/``FMNMX``, ``UTMALDG`` against ``LDG``/``LDGSTS``, barriers
(``BAR``, ``SYNCS``), predicated instructions; then the differences from cuTile's counts.

    python benchmarks/fmha_sass.py [--config=64,64,4] [--dim=64] [--causal] [--even=0] [--nvdisasm=PATH] [--out=DIR]
                                   [--time]

``--time`` (on a GPU, with torch and cuda.tile) also launches the three cubins the same way, through ``tile.core``
on one torch stream timed with CUDA events (``raw:`` rows), beside cuTile's own ``ct.launch``, each output checked
against torch SDPA first: equal ``raw:`` times say the kernels are equal and a gap in ``bench_lang_fmha.py`` lies in
how the launches are made and timed. The same run times both as ``bench_lang_fmha.py`` does (wall clock of its REPS
launches and one wait: ``frontend:`` rows for Tile's forms, ``wall:ct.launch``), so the two gaps are side by side.

``--out`` (default ``$TMPDIR/fmha_sass``) receives per kernel the Tile IR text (``.tileir``), the bytecode, the
cubin and the SASS (``.sass``); the counts go to ``benchmarks/results/fmha_sass_d<D>_<BM>_<BN>_<OCC>[_causal].json``
(with ``--time``, the timings to ``fmha_time_...json``; without an ``nvdisasm`` then, only the timings are made).
``nvdisasm`` comes from ``--nvdisasm``, ``$NVDISASM`` or the PATH (the ``nvidia-cuda-nvdisasm`` wheel has one).
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "benchmarks")]
RESULTS = ROOT / "benchmarks" / "results"
ARGS = {a[2:].partition("=")[0]: a.partition("=")[2] or "1" for a in sys.argv[1:] if a.startswith("--")}
BATCH, HEADS, SEQ = 4, 32, 4096
ROUNDS, REPS = 7, 10  # --time: median of ROUNDS rounds of REPS back-to-back launches, CUDA events
FAMILIES: tuple[str, ...] = ("HGMMA", "MUFU.EX2", "MUFU.RCP", "FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP")
FAMILIES += ("F2FP", "UTMALDG", "UTMASTG", "LDG", "LDGSTS", "LDS", "STS", "STG", "STL", "LDL", "BAR", "SYNCS")
FAMILIES += ("WARPSYNC", "ISETP", "IMAD", "BRA", "SHFL")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)([^;]*);")


def _elf_sections(cubin: bytes) -> dict[str, tuple[int, int, bytes]]:
    """Section name -> (size, sh_info, contents) of an ELF64 cubin."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize) for i in range(count)]
    strtab = headers[names][4]
    found = {}
    for h in headers:
        end = cubin.index(b"\0", strtab + h[0])
        found[cubin[strtab + h[0] : end].decode()] = (h[5], h[7], cubin[h[4] : h[4] + h[5]])
    return found


def _attributes(data: bytes) -> dict[int, bytes]:
    """An ``.nv.info`` section's attributes (EIATTR code -> value bytes; the last of each code)."""
    found, at = {}, 0
    while at + 2 <= len(data):
        form, code = data[at], data[at + 1]
        if form == 4:  # EIFMT_SVAL: a 16-bit size, then the value
            size = struct.unpack_from("<H", data, at + 2)[0]
            found[code], at = data[at + 4 : at + 4 + size], at + 4 + size
        elif form == 3:  # EIFMT_HVAL: a 16-bit value
            found[code], at = data[at + 2 : at + 4], at + 4
        else:
            at += 2
    return found


def resources(cubin: bytes) -> dict[str, int]:
    """Registers per thread (EIATTR_REGCOUNT), stack frame bytes (EIATTR_FRAME_SIZE), static shared memory bytes."""
    sections = _elf_sections(cubin)
    info = _attributes(sections[".nv.info"][2])
    shared = sum(size for n, (size, _, _) in sections.items() if n.startswith(".nv.shared."))
    registers = struct.unpack_from("<I", info.get(0x2F, bytes(8)), 4)[0]
    frame = struct.unpack_from("<I", info.get(0x11, bytes(8)), 4)[0]
    return {"registers": registers, "frame_bytes": frame, "static_shared_bytes": shared}


def instructions(sass: str) -> list[tuple[int, str, str, bool]]:
    """(address, opcode with modifiers, operands, predicated) of every SASS instruction; branch labels
    (`` `(.L_x_3) ``) are replaced by the address they label."""
    labels: dict[str, int] = {}
    pending: list[str] = []
    found: list[tuple[int, str, str, bool]] = []
    for line in sass.splitlines():
        if label := re.match(r"(\.L\w+):", line):
            pending.append(label[1])
        elif insn := INSN.search(line):
            address, pred, op, rest = insn.groups()
            labels |= dict.fromkeys(pending, int(address, 16))
            pending = []
            found.append((int(address, 16), op, rest.strip(), bool(pred)))
    return [(a, op, re.sub(r"`\((\.L\w+)\)", lambda m: hex(labels.get(m[1], -1)), rest), p) for a, op, rest, p in found]


def family(op: str) -> str:
    """The counted family of an opcode: ``MUFU.EX2`` keeps its function, others their stem."""
    stem = op.split(".", maxsplit=1)[0]
    return op[:8] if stem == "MUFU" else stem


def mix(insns: list[tuple[int, str, str, bool]]) -> dict[str, int]:
    counts = collections.Counter(family(op) for _, op, _, _ in insns)
    found = {name: counts[name] for name in FAMILIES if counts[name]}
    found["predicated"] = sum(pred for *_, pred in insns)
    found["total"] = len(insns)
    return found


def loops(insns: list[tuple[int, str, str, bool]]) -> list[dict[str, Any]]:
    """Every backward branch's span (a loop body), innermost first, with its mix; hot: holds HGMMA or UTMALDG."""
    spans = []
    for addr, op, rest, _ in insns:
        target = re.fullmatch(r"0x([0-9a-f]+)", rest)
        if op.startswith("BRA") and target and int(target[1], 16) < addr:
            spans.append((int(target[1], 16), addr))
    found = []
    for start, end in sorted(set(spans), key=lambda s: s[1] - s[0]):
        body = [i for i in insns if start <= i[0] <= end]
        counts = mix(body)
        found.append({"span": f"{start:#x}-{end:#x}", "hot": bool(counts.get("HGMMA") or counts.get("UTMALDG"))})
        found[-1] |= counts
    return found


def survey(name: str, kernel: Any, out: Path, nvdisasm: str) -> dict[str, Any]:
    """Write ``kernel``'s IR text, bytecode, cubin and SASS under ``out``; count what the SASS holds."""
    from tile.ir import print_module, read_bytecode

    if kernel.cubin is None:
        raise SystemExit(f"{name}: tileiras gave no cubin")
    (out / f"{name}.tileir").write_text(print_module(read_bytecode(kernel.bytecode)))
    (out / f"{name}.tilebc").write_bytes(kernel.bytecode)
    cubin = out / f"{name}.cubin"
    cubin.write_bytes(kernel.cubin)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    (out / f"{name}.sass").write_text(sass)
    insns = instructions(sass)
    found: dict[str, Any] = resources(kernel.cubin)
    found["spill_stores"] = sum(family(op) == "STL" for _, op, _, _ in insns)
    found["spill_loads"] = sum(family(op) == "LDL" for _, op, _, _ in insns)
    found["whole"] = mix(insns)
    found["loops"] = [lp for lp in loops(insns) if lp["hot"]]
    return found


def tile_kernels(config: tuple[int, int, int], dim: int, causal: bool, even: bool) -> dict[str, Any]:
    """Tile's two forms compiled for sm_90 as the benchmark launches them (own-tile grid)."""
    import attention as example  # type: ignore[import-not-found]  # examples/attention.py, on the path above
    import bench_lang_fmha as bench  # type: ignore[import-not-found]  # beside this script

    import tile.frontend as tile
    from tile.compiler import compile_kernel, specialize

    bm, bn, occupancy = config
    seq = SEQ if even else SEQ - 1
    qkv = (BATCH * HEADS, seq, dim)
    found = {}
    forms: dict[str, tuple[Any, tuple[int, ...], dict[str, tuple[int, ...]] | None]] = {
        "tile": (example.attention.fn, qkv, None),
        "tile_qmajor": (bench.attention_qmajor.fn, (seq, BATCH * HEADS, dim), {"o": (dim, seq * dim, 1)}),
    }
    for name, (fn, o_shape, strides) in forms.items():
        kernel = tile.entry(occupancy=occupancy)(fn)
        shapes = {"o": o_shape, "q": qkv, "k": qkv, "v": qkv}
        consts = {"BM": bm, "D": dim, "BN": bn, "CAUSAL": causal, "EVEN_K": seq % bn == 0}
        spec = specialize(fn, shapes, strides=strides, consts=consts, options=kernel.options)
        found[name] = compile_kernel(fn, spec, "sm_90")
    return found


def cutile_kernel(config: tuple[int, int, int], dim: int, causal: bool, even: bool, folder: Path) -> Any:
    """cuTile Python's ``ct_fmha`` exported as bytecode (as its launcher specialises torch tensors), then tileiras."""
    import cuda.tile as ct
    from cuda.tile.compilation import (
        ArrayConstraint,
        CallingConvention,
        KernelSignature,
        ScalarConstraint,
        export_kernel,
    )
    from cutile_peers import ct_fmha  # type: ignore[import-not-found]  # beside this script

    from tile.compiler import compile_bytecode

    bm, bn, occupancy = config
    seq = SEQ if even else SEQ - 1
    shape = (BATCH, HEADS, seq, dim)
    strides = [math.prod(shape[i + 1 :]) for i in range(4)]

    def array() -> Any:  # contiguous f16: shapes divisible by 16, strides by 8 elements (16 bytes), as cuTile infers
        return ArrayConstraint(
            ct.float16,
            4,
            index_dtype=ct.int32,
            stride_lower_bound_incl=0,
            alias_groups=(),
            may_alias_internally=False,
            stride_constant=tuple(1 if s == 1 else None for s in strides),
            shape_constant=tuple(1 if d == 1 else None for d in shape),
            stride_divisible_by=tuple(8 if s % 8 == 0 else 1 for s in strides),
            shape_divisible_by=tuple(16 if d % 16 == 0 else 1 for d in shape),
            base_addr_divisible_by=16,
        )

    # qk_scale is a runtime f32 as ct.launch passes a Python float (a value here would make it a constant)
    params = [array() for _ in range(4)] + [ScalarConstraint(ct.float32), dim, HEADS, bm, bn, causal, seq % bn == 0]
    signature = KernelSignature(params, CallingConvention.cutile_python_v2(), symbol="ct_fmha")
    path = folder / "ct_fmha.tilebc"
    kernel = ct_fmha.replace_hints(occupancy=occupancy)
    export_kernel(kernel, [signature], str(path), output_format="tileir_bytecode", bytecode_version="13.3")
    return compile_bytecode(path.read_bytes(), "sm_90", name="cutile_python", cache=False)


def _span(loop: dict[str, Any]) -> tuple[int, int]:
    start, end = loop["span"].split("-")
    return int(start, 16), int(end, 16)


def innermost_mma_loops(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The key loops' bodies: the smallest spans holding both HGMMA and MUFU.EX2 (the softmax), none overlapping
    another already taken (a pipelined loop's backward branches give overlapping spans; one per key loop is kept)."""
    taken: list[dict[str, Any]] = []
    for lp in sorted(found, key=lambda lp: _span(lp)[1] - _span(lp)[0]):
        a, b = _span(lp)
        if lp.get("HGMMA") and lp.get("MUFU.EX2") and all(b < _span(t)[0] or _span(t)[1] < a for t in taken):
            taken.append(lp)
    return sorted(taken, key=_span)


def differences(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per Tile form: its counts minus cuTile's, for the whole kernel and its innermost MMA loops summed."""

    def hot(entry: dict[str, Any]) -> collections.Counter[str]:
        total: collections.Counter[str] = collections.Counter()
        for lp in innermost_mma_loops(entry["loops"]):
            total.update({k: v for k, v in lp.items() if isinstance(v, int) and not isinstance(v, bool)})
        return total

    peer = report["kernels"]["cutile_python"]
    found = {}
    for name, entry in report["kernels"].items():
        if name == "cutile_python":
            continue
        diff = {k: entry[k] - peer[k] for k in ("registers", "static_shared_bytes", "spill_stores", "spill_loads")}
        whole = collections.Counter(entry["whole"])
        whole.subtract(peer["whole"])
        loop = hot(entry)
        loop.subtract(hot(peer))
        diff |= {f"whole.{k}": v for k, v in sorted(whole.items()) if v}
        diff |= {f"mma_loop.{k}": v for k, v in sorted(loop.items()) if v}
        found[name] = diff
    return found


def time_on_gpu(
    kernels: dict[str, Any], config: tuple[int, int, int], dim: int, causal: bool, even: bool
) -> dict[str, float]:
    """Milliseconds per launch of each cubin launched the same way (tile.core, CUDA events, one torch stream), and of
    cuTile's own ``ct.launch``: equal ``raw:`` times mean equal kernels, whatever the benchmark's launch paths add."""
    import statistics

    import cuda.tile as ct
    import torch
    from cutile_peers import ct_fmha

    import tile.core as tc

    bm, bn, occupancy = config
    seq = SEQ if even else SEQ - 1
    stream = torch.cuda.Stream()
    core = tc.Stream.borrow(stream)
    q, k, v = (torch.randn(BATCH, HEADS, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
    out = torch.empty_like(q)
    scale = 1 / math.sqrt(dim)
    flat = [t.view(BATCH * HEADS, seq, dim) for t in (out, q, k, v)]
    tiles_m = -(-seq // bm)
    layouts = {  # the output view, the tensors in ABI order, the grid
        "tile": ([flat[0], *flat[1:]], (BATCH * HEADS, tiles_m, 1)),
        "tile_qmajor": ([flat[0].permute(1, 0, 2), *flat[1:]], (tiles_m, BATCH * HEADS, 1)),
        "cutile_python": ([q, k, v, out], (tiles_m, BATCH * HEADS, 1)),
    }
    runs: dict[str, Callable[[], None]] = {}
    for name, compiled in kernels.items():
        tensors, grid = layouts[name]
        function = tc.Module.from_cubin(compiled.cubin, device=tc.Device(0)).function(compiled.abi.entry)
        args: list[Any] = [scale]
        kinds = ["f32"]
        for t in reversed(tensors):  # (view, shape..., strides...) per array, then the scale: the ABI of both
            args[:0] = [tc.borrow(t, stream=core), *t.shape, *t.stride()]  # tile.core vouches for a view
            kinds[:0] = ["ptr"] + ["i32"] * (2 * t.dim())

        def launch(function: Any = function, grid: Any = grid, args: Any = args, kinds: Any = kinds) -> None:
            tc.launch(function, grid, (1, 1, 1), args, stream=core, signature=kinds)

        runs[f"raw:{name}"] = launch
    peer = ct_fmha.replace_hints(occupancy=occupancy)
    ct_args = (q, k, v, out, scale, dim, HEADS, bm, bn, causal, even and seq % bn == 0)

    def peer_launch() -> None:
        ct.launch(stream, layouts["cutile_python"][1], peer, ct_args)

    runs["ct.launch"] = peer_launch
    for name, run in runs.items():  # each output checked against torch SDPA first
        out.fill_(float("nan"))
        run()
        stream.synchronize()
        torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2, msg=name)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with torch.cuda.stream(stream):
        for _ in range(ROUNDS + 1):  # the first round warms up; rounds interleave the contenders
            for name, run in runs.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(REPS):
                    run()
                end.record()
                end.synchronize()
                samples[name].append(start.elapsed_time(end) / REPS)
    found = {name: statistics.median(ms[1:]) for name, ms in samples.items()}
    return found | (wall_times(core, config, dim, causal, peer_launch) if even else {})


def wall_times(
    core: Any, config: tuple[int, int, int], dim: int, causal: bool, peer_launch: Callable[[], None]
) -> dict[str, float]:
    """Milliseconds per launch as ``bench_lang_fmha.py`` times them (wall clock of its REPS launches and one wait,
    interleaved): Tile's forms through the frontend (``frontend:`` rows) and cuTile's ``ct.launch`` (``wall:``)."""
    import bench_lang_fmha as bench
    from bench_frontend import interleaved  # type: ignore[import-not-found]  # beside this script

    import tile.frontend as tile

    tensors = [tile.randn(tile.f16, [bench.BATCH * bench.HEADS, bench.SEQ, dim]) for _ in range(3)]
    qkv = [t.share() for t in tensors]
    paths: dict[str, tuple[Callable[[], None], int, int]] = {}
    for family, fn, qmajor in bench.FORMS:
        if family != "tile_grid":  # the forms compiled above
            fmha = bench.TileFMHA(core, qkv, dim, causal, config, fn, qmajor)
            paths[f"frontend:{family}"] = (fmha.run, bench.REPS, 1)

    def peer() -> None:
        for _ in range(bench.REPS):
            peer_launch()
        core.synchronize()

    paths["wall:ct.launch"] = (peer, bench.REPS, 1)
    return {name: seconds * 1e3 for name, seconds in interleaved(paths, warmup=2).items()}


def main() -> None:
    nvdisasm = ARGS.get("nvdisasm") or os.environ.get("NVDISASM") or shutil.which("nvdisasm") or ""
    if not nvdisasm and "time" not in ARGS:  # --time alone runs without it (the GPU machine has none)
        raise SystemExit("no nvdisasm: pass --nvdisasm=PATH, set NVDISASM or pip install nvidia-cuda-nvdisasm")
    values = [int(v) for v in ARGS.get("config", "64,64,4").split(",")]
    if len(values) != 3:
        raise SystemExit("--config takes BM,BN,OCCUPANCY such as 64,64,4")
    config = (values[0], values[1], values[2])
    dim, causal, even = int(ARGS.get("dim", "64")), "causal" in ARGS, ARGS.get("even", "1") != "0"
    out = Path(ARGS.get("out", Path(tempfile.gettempdir()) / "fmha_sass"))
    out.mkdir(parents=True, exist_ok=True)
    kernels = tile_kernels(config, dim, causal, even)
    with tempfile.TemporaryDirectory() as folder:
        kernels["cutile_python"] = cutile_kernel(config, dim, causal, even, Path(folder))
    report: dict[str, Any] = {"config": list(config), "dim": dim, "causal": causal, "even": even, "kernels": {}}
    for name, kernel in kernels.items() if nvdisasm else ():
        entry = report["kernels"][name] = survey(name, kernel, out, nvdisasm)
        print(
            f"{name}: {entry['registers']} registers, {entry['frame_bytes']} B stack frame, "
            f"{entry['static_shared_bytes']} B shared, spills {entry['spill_stores']} stores "
            f"{entry['spill_loads']} loads, {entry['whole']['total']} instructions"
        )
        print("  whole:    " + " ".join(f"{k}={v}" for k, v in entry["whole"].items()))
        for lp in innermost_mma_loops(entry["loops"]):
            print("  mma loop: " + " ".join(f"{k}={v}" for k, v in lp.items() if k != "hot"))
    report["tile_minus_cutile"] = differences(report) if nvdisasm else {}
    if "time" in ARGS:
        ms = report["ms_per_launch"] = time_on_gpu(kernels, config, dim, causal, even)
        flops = 4 * BATCH * HEADS * SEQ * SEQ * dim / (2 if causal else 1)
        for name, value in ms.items():
            print(f"{name:20s} {value:.4f} ms  {flops / value / 1e9:.1f} TFLOP/s")
    for name, diff in report["tile_minus_cutile"].items():
        print(f"{name} - cutile_python: " + " ".join(f"{k}={v:+d}" for k, v in diff.items()))
    # The SASS counts (no GPU needed) and the GPU timings go to files of their own: a GPU run without nvdisasm
    # leaves the committed counts alone.
    stem = f"d{dim}_{'_'.join(map(str, config))}{'_causal' if causal else ''}{'' if even else '_odd'}.json"
    RESULTS.mkdir(exist_ok=True)
    for prefix, wanted in (("fmha_sass_", bool(nvdisasm)), ("fmha_time_", "time" in ARGS)):
        if wanted:
            (RESULTS / (prefix + stem)).write_text(json.dumps(report, indent=1) + "\n")
            print(f"wrote {RESULTS / (prefix + stem)}")
    if nvdisasm:
        print(f"IR text, bytecode, cubins and SASS in {out}")


if __name__ == "__main__":
    main()
