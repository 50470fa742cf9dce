"""Where Tile's time goes on add and GEMM: kernel variants timed with CUDA events beside cuTile Python and torch.

For each kernel (``add`` f32 on 2^28 elements, GEMM f16 8192^3 with 128 x 128 x 64 tiles, the kernels of
``bench_frontend.py``) this times, in one process on one GPU:

* ``torch`` and ``cutile`` (``ct.launch``): CUDA events around back-to-back launches;
* ``raw:<variant>``: a cubin launched directly through ``tile.core`` on the same stream, events around it, so only the
  generated code differs: ``tile`` (Tile's kernel as the frontend compiles it), ``tile_unchecked`` (the same source
  marked unchecked: no index guards), ``cutile_ir`` (cuTile Python's exported bytecode through the same tileiras);
* ``frontend_sync``: ``kernel(...).sync_on(s)`` wall time per launch (a wait after every launch);
* ``frontend_chain``: a ``.then`` chain of launches, waited for once (wall time per launch).

``variants`` times GEMM tile shapes, tile orders (``bench_frontend.gemm_grouped``) and hints through the frontend.
Every output is checked against torch. Prints one JSON object per part. Run on the GPU machine from the repository
root: ``python benchmarks/perf_probe.py [add] [gemm] [variants]`` (all three by default).
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PARTS = sys.argv[1:] or ["add", "gemm", "variants"]
sys.argv = sys.argv[:1]  # bench_frontend reads --smoke from argv at import
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_frontend as bf  # noqa: E402
import cuda.tile as ct  # noqa: E402
import torch  # noqa: E402
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel  # noqa: E402
from cutile_peers import ct_add, ct_gemm  # noqa: E402

import tile.core as tc  # noqa: E402
import tile.frontend as tile  # noqa: E402
from tile.compiler import Specialization, compile_bytecode, compile_kernel  # noqa: E402
from tile.frontend import bf16, f16, f32  # noqa: E402

ROUNDS = 5
ADD_N, GEMM_N, TILES = 1 << 28, 8192, (128, 128, 64)
STREAM = torch.cuda.Stream()
CORE_STREAM = tc.Stream.borrow(STREAM)
ARCH = "sm_{}{}".format(*torch.cuda.get_device_capability())


def events(run: Callable[[], None], reps: int) -> float:
    """Median over ROUNDS of the per-launch milliseconds of ``reps`` back-to-back runs on STREAM."""
    with torch.cuda.stream(STREAM):
        for _ in range(3):
            run()
        samples = []
        for _ in range(ROUNDS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / reps)
    return statistics.median(samples)


def wall(run: Callable[[], None], reps: int, per: int = 1) -> float:
    run()
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(reps):
            run()
        samples.append((time.perf_counter() - start) / reps / per * 1e3)
    return statistics.median(samples)


def unchecked(fn: Any) -> Any:
    """A copy of a kernel's function marked ``unchecked`` (the compiler then emits no index guards)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__module__ = fn.__qualname__, fn.__module__
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__tile_unchecked__ = True  # type: ignore[attr-defined]  # the mark tile.entry(unchecked=True) sets
    return copy


def cutile_bytecode(kernel: Any, params: tuple[Any, ...]) -> bytes:
    """cuTile Python's bytecode for ``kernel`` specialized as its JIT does for contiguous 16-aligned tensors."""
    sig = KernelSignature(list(params), CallingConvention.cutile_python_v2())
    buf = io.BytesIO()
    export_kernel(kernel, [sig], buf, output_format="tileir_bytecode")
    return buf.getvalue()


def contiguous(dtype: Any, ndim: int) -> Any:
    return ArrayConstraint(
        dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(), may_alias_internally=False,
        stride_constant=(*[None] * (ndim - 1), 1), stride_divisible_by=(*[16] * (ndim - 1), 1),
        shape_divisible_by=16, base_addr_divisible_by=16,
    )  # fmt: skip


class Raw:
    """A cubin launched through tile.core with torch tensors' addresses, shapes and strides."""

    def __init__(self, compiled: Any, grid: tuple[int, int, int], tensors: list[torch.Tensor]) -> None:
        module = tc.Module.from_cubin(compiled.cubin, device=tc.Device(0))
        self.fn = module.function(compiled.abi.entry if compiled.abi.slots else _entry(compiled))
        self.grid, self.args, self.kinds = grid, [], []
        for t in tensors:  # (base, shapes..., strides...) per array: the ABI both compilers use
            self.args += [t.data_ptr(), *t.shape, *t.stride()]
            self.kinds += ["ptr"] + ["i32"] * (2 * t.dim())

    def __call__(self) -> None:
        # torch's addresses: the probe vouches for them (tile.core's explicit opt-out)
        tc.launch(self.fn, self.grid, (1, 1, 1), self.args, stream=CORE_STREAM, signature=self.kinds, unchecked=True)


def _entry(compiled: Any) -> str:
    import tile.ir

    return str(tile.ir.read_bytecode(compiled.bytecode).functions[0].name)


def spec_of(kernel: Any, args: list[Any], generics: dict[str, int]) -> Specialization:
    bound = kernel._prepare(args, dict(generics))[0]  # _prepare pops the Const keywords it takes
    return kernel._specialize(bound)  # type: ignore[no-any-return]  # frontend internals, probe only


def probe(  # noqa: PLR0917 - a probe script: two call sites, arguments in table order
    name: str,
    kernel: Any,
    frontend_args: list[Any],
    generics: dict[str, int],
    ours: list[torch.Tensor],
    theirs: list[torch.Tensor],
    ct_kernel: Any,
    ct_params: tuple[Any, ...],
    ct_args: tuple[Any, ...],
    grid: tuple[int, int, int],
    check: Callable[[torch.Tensor], None],
    reps: int,
) -> dict[str, Any]:
    spec = spec_of(kernel, frontend_args, generics)
    variants = {
        "tile": compile_kernel(kernel.fn, spec, ARCH),
        "tile_unchecked": compile_kernel(unchecked(kernel.fn), spec, ARCH),
        "cutile_ir": compile_bytecode(cutile_bytecode(ct_kernel, ct_params), ARCH),
    }
    ms: dict[str, float] = {}
    for label, compiled in variants.items():
        order = ours if label != "cutile_ir" else theirs
        out = order[0] if label != "cutile_ir" else order[-1]
        out.fill_(float("nan"))
        raw = Raw(compiled, grid, order)
        raw()
        STREAM.synchronize()
        check(out)
        ms[f"raw:{label}"] = events(raw, reps)
    ms["cutile"] = events(lambda: ct.launch(STREAM, grid, ct_kernel, ct_args), reps)
    loop = bf.TileLoop(kernel, frontend_args, bf.tile_stream(), **generics)
    ms["frontend_sync"] = wall(loop.run, reps)
    ms["frontend_chain"] = wall(lambda: loop.chain(reps), 1, reps)
    return {"kernel": name, "device": torch.cuda.get_device_name(), "ms": ms}


def main() -> None:
    if "add" in PARTS:
        probe_add()
    if "gemm" in PARTS:
        probe_gemm()
    if "variants" in PARTS:
        gemm_variants()


def probe_add() -> None:
    x, y = torch.rand(ADD_N, device="cuda"), torch.rand(ADD_N, device="cuda")
    z = torch.empty_like(x)
    ref = x + y
    ms_torch = events(lambda: torch.add(x, y, out=z), 20)
    fa = [tile.empty(f32, [ADD_N]).partition([1024]), tile.rand(f32, [ADD_N]), tile.rand(f32, [ADD_N])]

    def check_add(out: torch.Tensor) -> None:
        torch.testing.assert_close(out, ref)

    add = probe("add_f32", bf.add, fa, {}, [z, x, y], [x, y, z], ct_add, (contiguous(ct.float32, 1),) * 3 + (1024,),
                (x, y, z, 1024), (ADD_N // 1024, 1, 1), check_add, 20)  # fmt: skip
    add["ms"]["torch"] = ms_torch
    print(json.dumps(add), flush=True)


def probe_gemm() -> None:
    tm, tn, tk = TILES
    a, b = (torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty_like(a)
    ms_torch = events(lambda: torch.matmul(a, b, out=c), 10)
    corner = a[:256].float() @ b[:, :256].float()

    def check_gemm(out: torch.Tensor) -> None:
        torch.testing.assert_close(out[:256, :256].float(), corner, rtol=2e-2, atol=2e-1)

    fg = [
        tile.empty(f16, [GEMM_N] * 2).partition([tm, tn]),
        tile.randn(f16, [GEMM_N] * 2),
        tile.randn(f16, [GEMM_N] * 2),
    ]
    gemm = probe("gemm_f16", bf.gemm, fg, {"BK": tk}, [c, a, b], [a, b, c], ct_gemm,
                 (contiguous(ct.float16, 2),) * 3 + TILES, (a, b, c, *TILES), (GEMM_N // tm, GEMM_N // tn, 1),
                 check_gemm, 10)  # fmt: skip
    gemm["ms"]["torch"] = ms_torch
    print(json.dumps(gemm), flush=True)


def _hinted(fn: Any, **options: Any) -> Any:
    copy = unchecked(fn)
    copy.__tile_unchecked__ = False  # type: ignore[attr-defined]  # checked: only the hints differ
    return tile.entry(**options)(copy)


GROUPED = bf.gemm_grouped.fn
VARIANTS = [  # (label, kernel, dtype, (BM, BN, BK), extra Const keywords); all checked (safe) kernels
    ("plain_128x128x64", bf.gemm, f16, (128, 128, 64), {}),
    ("grouped8_128x128x64", bf.gemm_grouped, f16, (128, 128, 64), {"GROUP": 8}),
    ("grouped4_128x128x64", bf.gemm_grouped, f16, (128, 128, 64), {"GROUP": 4}),
    ("grouped16_128x128x64", bf.gemm_grouped, f16, (128, 128, 64), {"GROUP": 16}),
    ("grouped8_128x256x64_cga2", _hinted(GROUPED, num_cta_in_cga=2), f16, (128, 256, 64), {"GROUP": 8}),
    ("grouped8_128x128x64_cga2", _hinted(GROUPED, num_cta_in_cga=2), f16, (128, 128, 64), {"GROUP": 8}),
    ("bf16_grouped8_128x128x64", bf.gemm_grouped, bf16, (128, 128, 64), {"GROUP": 8}),
]


def gemm_variants() -> None:
    """GEMM tile shapes and tile orders through the frontend (``.then`` chains), checked on a corner."""
    stream = bf.tile_stream()
    found: dict[str, float] = {}
    for label, kernel, dtype, (tm, tn, tk), extra in VARIANTS:
        x, y = tile.randn(dtype, [GEMM_N] * 2), tile.randn(dtype, [GEMM_N] * 2)
        loop = bf.TileLoop(kernel, [tile.empty(dtype, [GEMM_N] * 2).partition([tm, tn]), x, y], stream, BK=tk, **extra)
        try:
            found[label] = wall(lambda: loop.chain(10), 1, 10)  # noqa: B023 - called before the next iteration
            z, x, y = loop.args  # checked after timing: a DLPack export may pin the tensors
            got = torch.from_dlpack(z.unpartition())[:256, :256].float()
            want = torch.from_dlpack(x)[:256].float() @ torch.from_dlpack(y)[:, :256].float()
            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-1)
            del got, want
        except Exception as exc:  # one failing variant must not cost the others
            found[label] = float("nan")
            print(f"{label}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    print(json.dumps({"kernel": "gemm_variants", "device": torch.cuda.get_device_name(), "ms_chain": found}))


if __name__ == "__main__":
    main()
