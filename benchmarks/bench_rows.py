"""Row kernels: Tile against torch and Triton's one-program-per-row kernels, and the knobs that decide Tile's speed.

Imported by ``bench_kernels.py``, which runs these steps under ``--only=rows`` and ``--only=rows_knobs`` and writes
``benchmarks/results/kernels.json``.

``rows``: softmax, log_softmax, rmsnorm, layernorm, add_rmsnorm (fused residual add) and rmsnorm_heads (head dim 128)
on ROWS = 4096 rows of 1024, 4096, 8192 and 32768 elements, f16 and bf16. Contenders: ``tile`` (the config the
autotuner picks; the first call tunes), ``tile default`` (the untuned config), ``torch`` (``torch.softmax``,
``F.rms_norm`` (a composed version before torch 2.4), ``F.layer_norm``; the add and the per-head norm composed of
those), ``triton`` (``triton_rows.py``: whole row in registers, one program per row; skipped with a note in
``errors`` when ``import triton`` fails).

Every contender is timed as CHAIN launches captured once as a graph and replayed (Tile's ``op.graph``, torch's
``torch.cuda.CUDAGraph`` for torch and Triton), waited for once per sample, so the numbers are the kernels', not the
host's (one Tile launch costs about 20 us of host time, more than the 1024-column kernels). Samples interleave over
ROUNDS. GB/s counts what a perfect kernel moves: every input element read once and every output written once (for
add_rmsnorm two inputs and two outputs; the weight vectors are ignored). ``tile_vs`` is Tile's time over each peer's
(below 1: Tile is faster); ``plans`` records the form, tile and hints each Tile contender ran.

``rows_knobs`` answers "why are whole-row kernels slower than Triton's": softmax and rmsnorm in f16 at each length,
one Tile contender per knob setting, next to torch and Triton in the same rounds: whole rows with BM = 1..16 rows per
block; chunked with chunk widths 512..8192; and, on the default config, ``num_worker_warps`` 4 / 8, ``occupancy``
1 / 2 / 4 and the latency hint 1 / 4. Read it as: which setting closes the gap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.kernels import _rowforms
from tile.kernels._rowforms import Plan

KERNELS = ("softmax", "log_softmax", "rmsnorm", "layernorm", "add_rmsnorm", "rmsnorm_heads")
HEAD_DIM = 128
Run = Callable[[], None]


@contextlib.contextmanager
def plans_seen() -> Iterator[list[Plan]]:
    """The plans the row functions run while inside (the autotuner's choice of a call, read back)."""
    seen: list[Plan] = []
    real = _rowforms.plan

    def spy(config: Any, np_: int, op: str, *, unit: int = 1) -> Plan:
        seen.append(real(config, np_, op, unit=unit))
        return seen[-1]

    _rowforms.plan = spy  # a read-only spy, restored below
    try:
        yield seen
    finally:
        _rowforms.plan = real


class Case:
    """One kernel at one shape and dtype: the tensors (shared with torch through DLPack on the GPU) and the launches.

    ``smoke`` shapes: head dim 16 instead of 128."""

    def __init__(self, name: str, dtype: Any, rows: int, n: int, torch: Any) -> None:
        self.name, self.dtype, self.m, self.n, self.torch = name, dtype, rows, n, torch
        self.d = HEAD_DIM if n % HEAD_DIM == 0 and n >= HEAD_DIM else 16
        rng = np.random.default_rng(n)
        self.host = {
            "x": rng.standard_normal((rows, n)).astype(np.float32) * 2,
            "r": rng.standard_normal((rows, n)).astype(np.float32),
            "w": rng.random(self.d if name == "rmsnorm_heads" else n).astype(np.float32) + 0.5,
            "b": rng.standard_normal(n).astype(np.float32),
        }
        self.t = {k: self._tensor(v) for k, v in self.host.items()}  # (torch or None, tile)

    def _tensor(self, values: np.ndarray[Any, Any]) -> tuple[Any, tile.Tensor]:
        if self.torch is None:
            import ml_dtypes

            np_dtype = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[self.dtype.name]
            return None, tile.from_numpy(values.astype(np_dtype))
        tdt = {"f16": self.torch.float16, "bf16": self.torch.bfloat16}[self.dtype.name]
        t = self.torch.from_numpy(values).to(device="cuda", dtype=tdt)
        return t, tile.from_dlpack(t)

    @property
    def bytes_moved(self) -> float:
        per = float(self.m * self.n * self.dtype.itemsize)
        return 4.0 * per if self.name == "add_rmsnorm" else 2.0 * per

    def call(self, config: Any = None) -> list[tile.Tensor]:
        """The public function's result (tuned when ``config`` is None)."""
        x, w, b, r = (self.t[k][1] for k in "xwbr")
        if self.name in ("softmax", "log_softmax"):
            return [getattr(tk, self.name)(x, config=config)]
        if self.name == "rmsnorm":
            return [tk.rmsnorm(x, w, config=config)]
        if self.name == "layernorm":
            return [tk.layernorm(x, w, b, config=config)]
        if self.name == "add_rmsnorm":
            return list(tk.add_rmsnorm(x, r, w, config=config))
        return [tk.rmsnorm_heads(x, w, config=config)]

    def plan_of(self, config: Any = None) -> Plan:
        with plans_seen() as seen:
            self.call(config)
        return seen[-1]

    def launch(self, plan: Plan) -> tuple[Any, list[Any], dict[str, Any]]:
        """(kernel, arguments, const generics) of one Tile launch with ``plan``, on fresh outputs."""
        x, w, b, r = (self.t[k][1][()] for k in "xwbr")
        z = tile.empty(self.dtype, [self.m, self.n]).partition(plan.tile)
        gen = plan.generics()
        if self.name in ("softmax", "log_softmax"):
            return plan.kernel("softmax"), [z, x], gen | {"LOG": self.name == "log_softmax"}
        if self.name == "rmsnorm":
            return plan.kernel("rmsnorm"), [z, x, w, 1e-6], gen
        if self.name == "layernorm":
            return plan.kernel("layernorm"), [z, x, w, b, 1e-5], gen | {"HAS_W": True, "HAS_B": True}
        if self.name == "add_rmsnorm":
            s = tile.empty(self.dtype, [self.m, self.n]).partition(plan.tile)
            return plan.kernel("add_rmsnorm"), [z, s, x, r, w, 1e-6], gen
        return plan.kernel("rmsnorm_heads"), [z, x, w, 1e-6], {"D": self.d, "BN": plan.bn, "LAT": plan.lat}

    def tile_graph(self, plan: Plan, chain: int, stream: Any) -> tuple[Run, tile.Tensor]:
        """CHAIN launches with ``plan`` captured as one graph: (replay and wait, the output after one replay)."""
        kernel, args, generics = self.launch(plan)
        count = len(args)
        op = kernel(*args, **generics)
        for _ in range(chain - 1):
            op = op.then(lambda out: kernel(*out[:count], **generics))
        graph = op.graph(stream)

        def run() -> None:
            graph.launch().sync_on(stream)

        run()
        return run, graph

    def torch_fn(self) -> Callable[[], Any]:
        torch, f = self.torch, self.torch.nn.functional
        x, w, b, r = (self.t[k][0] for k in "xwbr")
        n = self.n

        def rms(v: Any, g: Any, size: int) -> Any:
            if hasattr(f, "rms_norm"):
                return f.rms_norm(v, (size,), g, eps=1e-6)
            vf = v.float()
            return (vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + 1e-6) * g.float()).to(v.dtype)

        def add() -> Any:
            s = x + r
            return rms(s, w, n), s

        return {
            "softmax": lambda: torch.softmax(x, dim=-1),
            "log_softmax": lambda: torch.log_softmax(x, dim=-1),
            "rmsnorm": lambda: rms(x, w, n),
            "layernorm": lambda: f.layer_norm(x, (n,), w, b, eps=1e-5),
            "add_rmsnorm": add,
            "rmsnorm_heads": lambda: rms(x.view(self.m, n // self.d, self.d), w, self.d).view(self.m, n),
        }[self.name]

    def triton_fn(self, triton_rows: Any) -> Callable[[], Any]:
        x, w, b, r = (self.t[k][0] for k in "xwbr")
        out, summed = self.torch.empty_like(x), self.torch.empty_like(x)
        launch = partial(triton_rows.launch, self.name, out, x, w=w, b=b, r=r, summed=summed)
        return lambda: (launch(), (out, summed) if self.name == "add_rmsnorm" else out)[1]


def torch_graph(torch: Any, fn: Callable[[], Any], chain: int) -> tuple[Run, Any]:
    """``chain`` calls of ``fn`` captured as a CUDA graph: (replay and wait, the output of the captured calls)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(chain):
            got = fn()

    def run() -> None:
        graph.replay()
        torch.cuda.synchronize()

    run()
    return run, got


def outputs_of_graph(graph: Any, count: int) -> list[tile.Tensor]:
    """The output tensors a replayed Tile graph hands back when closed."""
    handed = graph.close()
    return [handed[i].unpartition() for i in range(count)]


def check(name: str, got: list[Any], want: list[Any]) -> None:
    """Outputs agree to 2% of the output's range (f16/bf16 rounding, different reduction orders)."""
    for g, w in zip(got, want, strict=True):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(float(np.abs(w64).max()), 1e-30)
        err = float(np.abs(g64 - w64).max()) / scale
        if not err <= 2e-2:
            raise AssertionError(f"{name}: outputs differ by {err:.2e} of the range")


def to_numpy(value: Any) -> Any:
    if isinstance(value, tile.Tensor):
        return value.to_numpy().astype(np.float64)
    return value.float().cpu().numpy()


def knob_configs(n: int) -> dict[str, Any]:
    """The Tile variants of the knob study at row length ``n``: label -> config."""
    np_ = 1 << (n - 1).bit_length()
    found: dict[str, Any] = {}
    for bm in (1, 2, 4, 8, 16):
        if bm * np_ <= _rowforms.WHOLE_MAX:
            found[f"whole BM={bm}"] = tk.Config.of(BM=bm)
    for bn in (512, 1024, 2048, 4096, 8192):
        if bn < np_:
            found[f"chunked BN={bn}"] = tk.Config.of(BM=1, BN=bn)
    base = _rowforms.default(np_).as_dict()
    for label, extra in (
        ("WARPS=4", {"WARPS": 4}),
        ("WARPS=8", {"WARPS": 8}),
        ("OCC=1", {"OCC": 1}),
        ("OCC=2", {"OCC": 2}),
        ("OCC=4", {"OCC": 4}),
        ("LAT=1", {"LAT": 1}),
        ("LAT=4", {"LAT": 4}),
    ):
        found[f"default + {label}"] = tk.Config.of(**(base | extra))
    return found


class Env:
    """What every row step shares: the peers (None where absent), the stream Tile's graphs replay on, sizes, timing."""

    def __init__(self, torch: Any, errors: dict[str, str], *, rows: int, chain: int, timer: Any) -> None:
        self.torch, self.rows, self.chain, self.timer = torch, rows, chain, timer
        self.triton: Any = None
        if torch is not None:
            try:
                import triton_rows  # type: ignore[import-untyped]  # a script beside this one, not a package

                self.triton = triton_rows
            except ImportError as exc:  # triton missing: the Triton contender is skipped with this note
                errors["triton"] = f"Triton peer skipped: {exc}"
        if tile.backend() == "cpu":
            from tile.aio import HostStream

            self.stream: Any = HostStream()
        else:
            import tile.core as tc

            self.stream = tc.Device(0).create_stream()


def _peers(env: Env, case: Case) -> tuple[dict[str, Run], list[Any] | None]:
    """torch's and Triton's graphs, checked against each other; torch's outputs (None without torch)."""
    if env.torch is None:
        return {}, None
    paths: dict[str, Run] = {}
    run, got = torch_graph(env.torch, case.torch_fn(), env.chain)
    paths["torch"] = run
    want = [to_numpy(g) for g in (got if isinstance(got, tuple) else (got,))]
    if env.triton is not None:
        run, got = torch_graph(env.torch, case.triton_fn(env.triton), env.chain)
        check("triton", [to_numpy(g) for g in (got if isinstance(got, tuple) else (got,))], want)
        paths["triton"] = run
    return paths, want


def _tile_paths(
    env: Env, case: Case, configs: dict[str, Any], want: list[Any] | None
) -> tuple[dict[str, Run], dict[str, str]]:
    """One graph-replay contender per config (None: the tuned one), each checked; and the plan each ran."""
    outputs = 2 if case.name == "add_rmsnorm" else 1
    reference = want if want is not None else [to_numpy(t) for t in case.call(tk.Config.of(BM=1))]
    paths: dict[str, Run] = {}
    plans: dict[str, str] = {}
    for label, config in configs.items():
        plan = case.plan_of(config)
        run, graph = case.tile_graph(plan, env.chain, env.stream)
        check(label, [to_numpy(t) for t in outputs_of_graph(graph, outputs)], reference)
        run, _ = case.tile_graph(plan, env.chain, env.stream)  # closing handed the outputs back: capture again
        paths[label] = run
        plans[label] = str(plan)
    return paths, plans


def _entry(env: Env, case: Case, paths: dict[str, Run], plans: dict[str, str]) -> dict[str, Any]:
    times = env.timer({k: (run, env.chain, 1) for k, run in paths.items()}, warmup=2)
    first = next(iter(plans))
    return {
        "rows": case.m,
        "n": case.n,
        "chain": env.chain,
        "ms": {k: v * 1e3 for k, v in times.items()},
        "GB_per_s": {k: case.bytes_moved / v / 1e9 for k, v in times.items()},
        "tile_vs": {k: times[first] / v for k, v in times.items() if k != first},
        "plans": plans,
    }


def bench_case(env: Env, name: str, dtype: Any, n: int) -> dict[str, Any]:
    """Tile tuned and default against torch and Triton, one kernel, shape and dtype."""
    case = Case(name, dtype, env.rows, n, env.torch)
    peers, want = _peers(env, case)
    tiles, plans = _tile_paths(env, case, {"tile": None, "tile default": _default(case)}, want)
    return _entry(env, case, tiles | peers, plans)


def _default(case: Case) -> Any:
    np_ = 1 << (case.n - 1).bit_length()
    return _rowforms.heads_default(np_, case.d) if case.name == "rmsnorm_heads" else _rowforms.default(np_)


def bench_knobs(env: Env, name: str, n: int) -> dict[str, Any]:
    """Every knob setting of one kernel at one length (f16), with torch and Triton in the same rounds."""
    case = Case(name, tile.f16, env.rows, n, env.torch)
    peers, want = _peers(env, case)
    tiles, plans = _tile_paths(env, case, {"tile": None} | knob_configs(n), want)
    return _entry(env, case, tiles | peers, plans)


def steps(env: Env, lengths: list[int]) -> list[tuple[str, str, Callable[[], dict[str, Any]]]]:
    """(group, result name, measurement) for ``--only=rows`` and ``--only=rows_knobs``."""
    found: list[tuple[str, str, Callable[[], dict[str, Any]]]] = []
    for name in KERNELS:
        for dtype in (tile.f16, tile.bf16):
            for n in lengths:
                found.append(("rows", f"{name}_{dtype.name}_{n}", partial(bench_case, env, name, dtype, n)))
    for name in ("softmax", "rmsnorm"):
        for n in lengths:
            found.append(("rows_knobs", f"knobs_{name}_f16_{n}", partial(bench_knobs, env, name, n)))
    return found
