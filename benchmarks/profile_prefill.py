"""Where a Qwen3 prefill's time goes, op by op: every op of `Qwen3.steps` timed apart, all layers together.

The op list is the model's own (`Qwen3.steps` of a ``--tokens`` prompt from position 0, no LM head): the embedding
and each layer's nine ops (`OPS_UNFUSED`: gate/up and SwiGLU apart, what the model runs: ``Qwen3.PREFILL_GLU`` is
off), or with ``--glu`` its eight (`OPS`: SwiGLU in the gate/up GEMM's epilogue, the model's ``PREFILL_GLU`` form),
for an A/B (``--unfused``: ``Qwen3(..., fuse=False)``, the same nine as the default). Each kind of op is
timed as one graph of that op for every layer in order (each layer's own weights and caches, the ops the prefill
makes), replayed ``--reps`` times between two timing events on the GPU (host time on the CPU interpreter), so the
time is the op's device time for one whole prefill without the host's enqueueing. An op's activation inputs are
scratch tensors of the shapes the prefill passes (made before the capture, one per layer, so no op waits on
another's output); the caches are the model's. The whole prefill is timed the same way (``total``) to compare with
the sum of the ops.

Rates: GEMMs and attention in TFLOP/s (the counts of `qwen3_prefill.prefill_flops`: ``2 * M * N * K``, causal
attention counting only the unmasked half), the other ops in GB/s of the activation bytes they must read and write
(weights of norms are counted; the caches' unchanged positions are not).

Run on the GPU machine from the repository root::

    python benchmarks/profile_prefill.py --model 4B --tokens 2048 --out prefill_profile.json

``--smoke`` runs the tiny config on the CPU interpreter (a 24-token prompt: prompts of up to 16 tokens take the
decode projections, which this does not profile) to test the script itself.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from qwen3_prefill import prefill_flops
from qwen3_weights import SeededWeights

import tile.frontend as tile
from tile import aio
from tile.kernels._fused import MAX_M as _FUSED_ROWS
from tile.kernels.qwen3 import Qwen3, Qwen3Config, config_for
from tile.kernels.qwen3._chain import Chain, Step

__all__ = [
    "OPS",
    "OPS_UNFUSED",
    "ScratchChain",
    "counting_launches",
    "main",
    "op_work",
    "profile",
    "time_kind",
    "timed_ms",
]

OPS = (
    "rmsnorm_attn",
    "qkv_proj",
    "prep_qkv",
    "attention",
    "o_proj_residual",
    "rmsnorm_mlp",
    "gate_up_swiglu",
    "down_proj_residual",
)
"""The names of one prefill layer's ops, in `Qwen3.steps` order (``fuse=True``, more than 16 tokens)."""
OPS_UNFUSED = (*OPS[:6], "gate_up_proj", "swiglu", OPS[7])
"""The same for ``fuse=False``: gate/up's product written, SwiGLU its own kernel."""


def op_work(c: Qwen3Config, n: int, *, unfused: bool = False) -> dict[str, tuple[str, float]]:
    """``{op: (unit, amount)}`` for one layer of an ``n``-token prefill (and the embedding), the ops of `OPS` (or
    `OPS_UNFUSED`): ``"flop"`` for GEMMs and attention, ``"byte"`` (bf16 activations read and written) for the
    rest."""
    h, q, kv, i = c.hidden_size, c.q_size, c.kv_size, c.intermediate_size
    qkv = q + 2 * kv
    attention = prefill_flops(c, n)["attention"] / c.num_hidden_layers
    gate_up = ("flop", 2.0 * n * 2 * i * h)
    mlp = {"gate_up_proj": gate_up, "swiglu": ("byte", 2.0 * 3 * n * i)} if unfused else {"gate_up_swiglu": gate_up}
    return {
        "embedding": ("byte", 2.0 * 2 * n * h),
        "rmsnorm_attn": ("byte", 2.0 * (2 * n * h + h)),
        "qkv_proj": ("flop", 2.0 * n * qkv * h),
        "prep_qkv": ("byte", 2.0 * 2 * n * qkv),
        "attention": ("flop", float(attention)),
        "o_proj_residual": ("flop", 2.0 * n * h * q),
        "rmsnorm_mlp": ("byte", 2.0 * (2 * n * h + h)),
        **mlp,
        "down_proj_residual": ("flop", 2.0 * n * h * i),
    }


class ScratchChain(Chain):
    """A `Chain` whose activation handles are scratch tensors made beforehand (`fill`): each `take` of an activation
    name hands the next unused one, so one op of every layer runs on its own inputs; a cache name (``k3``) is the
    handle a previous op filed, else the model's cache."""

    def __init__(self, model: Qwen3, n: int) -> None:
        super().__init__()
        c = model.config
        self.model = model
        self.shapes = {
            "x": [n, c.hidden_size],
            "h": [n, c.hidden_size],
            "qkv": [n, c.q_size + 2 * c.kv_size],
            "q": [n, c.q_size],
            "o": [n, c.q_size],
            "gu": [n, 2 * c.intermediate_size],
            "act": [n, c.intermediate_size],
            "logits": [n, c.vocab_size],  # the LM head's f32 output (decode's argmax reads it)
        }
        self.pool: dict[str, list[Any]] = {}
        self.wanted: dict[str, int] = {}

    def fill(self) -> None:
        """Make the scratch tensors the last run's takes asked for (random bf16, so no op runs on all zeros)."""
        rng = np.random.default_rng(0)
        self.pool = {}
        for name, count in self.wanted.items():
            host = rng.standard_normal(self.shapes[name], dtype=np.float32)
            if name != "logits":
                host = host.astype(ml_dtypes.bfloat16)
            self.pool[name] = [tile.from_numpy(host) for _ in range(count)]

    def take(self, name: str) -> Any:
        if name in self.shapes:
            self.wanted[name] = self.wanted.get(name, 0) + 1
            pool = self.pool.get(name)
            if pool:
                return pool.pop()
            dtype = tile.f32 if name == "logits" else tile.bf16
            return tile.zeros(dtype, self.shapes[name])  # a run before `fill` (it compiles and counts)
        if name not in self.handles:
            i = int(name[1:])
            self.handles[name] = (self.model.k_cache if name[0] == "k" else self.model.v_cache)[i]
        return super().take(name)


def _marker(stamps: list[Any]) -> aio.DeviceOp[Any]:
    """An op that records the time in stream order: a timing event on a CUDA stream, the host clock on a host one."""

    def mark(ctx: aio.ExecutionContext) -> None:
        if isinstance(ctx, aio.CudaContext):
            import tile.core as tc

            event = tc.Event(ctx.stream.device, timing=True)
            ctx.stream.record(event)
            stamps.append(event)
        else:
            ctx.enqueue(lambda: stamps.append(time.perf_counter()))

    return aio.with_context(mark)


def _elapsed_ms(stamps: list[Any]) -> float:
    start, end = stamps
    if isinstance(start, float):
        return float(end - start) * 1e3
    return float(end.elapsed_ms(start))


def _replay_ms(graph: aio.Graph[Any], inner: int) -> float:
    stamps: list[Any] = []

    def replays(_: Any) -> aio.DeviceOp[Any]:
        op = graph.launch()
        for _ in range(inner - 1):
            op = op.then(lambda _: graph.launch())
        return op

    _marker(stamps).then(replays).then(lambda _: _marker(stamps)).sync()
    return _elapsed_ms(stamps) / inner


def timed_ms(steps: list[Step], chain: Chain, reps: int, inner: int = 1) -> float:
    """Milliseconds of one replay of ``steps`` (one `Chain`, captured as a graph), timed in stream order: the median
    over ``reps`` timings of ``inner`` back-to-back replays each (more than one for graphs of a few microseconds,
    where the timing events' own cost would count). The chain's handles are filed back when the graph closes."""
    op = chain.build(steps)
    times = []
    with op.graph() as graph:
        graph.launch().sync()
        for _ in range(reps):
            times.append(_replay_ms(graph, inner))
        chain.finish(graph.close())
    return float(np.median(times))


@contextmanager
def counting_launches() -> Iterator[list[int]]:
    """``[count]`` of the kernel launches executed inside (an eager run's, or a capture's: a capture executes each
    launch once on its recording context, a replay none). Meanwhile launches take the pure-Python path, where each
    one is a call of `Launch._execute` or of its alias `Launch._run_in` (the compiled path runs repeated launches in
    C); both and the path are restored after."""
    from tile.frontend import _accel
    from tile.frontend._launch import Launch

    seen = [0]
    real = Launch._execute

    def counted(self: Launch, ctx: aio.ExecutionContext, lend: bool = True) -> tuple[Any, ...]:
        seen[0] += 1
        return real(self, ctx, lend)

    previous = _accel.use("pure")
    Launch._execute = Launch._run_in = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Launch._execute = Launch._run_in = real  # type: ignore[method-assign]
        _accel.use(previous)


def _give_back_caches(model: Qwen3, chain: Chain) -> None:
    for name in list(chain.handles):
        if name[0] in "kv" and name[1:].isdigit():
            (model.k_cache if name[0] == "k" else model.v_cache)[int(name[1:])] = chain.take(name)


def time_kind(model: Qwen3, n: int, steps: list[Step], reps: int, inner: int = 1) -> tuple[float, int]:
    """``(ms, launches)`` of one op kind's ``steps`` (one per layer) of an ``n``-token pass, on scratch inputs
    (`ScratchChain`) and the model's caches: an eager run first (it compiles, counts the launches and the scratch
    tensors each take wants), then `timed_ms` of the graph of the steps on fresh scratch tensors."""
    first = ScratchChain(model, n)
    with counting_launches() as launches:
        first.finish(first.build(steps).sync())
    _give_back_caches(model, first)
    chain = ScratchChain(model, n)
    chain.wanted = first.wanted
    chain.fill()
    ms = timed_ms(steps, chain, reps, inner)
    _give_back_caches(model, chain)
    return ms, launches[0]


def profile(
    c: Qwen3Config, weights: Any, n: int, reps: int = 5, *, unfused: bool = False, glu: bool = False
) -> dict[str, Any]:
    """Time every op kind of an ``n``-token prefill of ``c`` (see the module docstring; ``unfused``: the
    ``fuse=False`` model's ops; ``glu``: the model with ``PREFILL_GLU`` on); the result rows are ``{op, launches, ms,
    share, tflops | gbps}`` and the totals. `ValueError` for ``n`` <= 16 (the decode projections' sizes, not a
    prefill's ops)."""
    if n <= _FUSED_ROWS:
        raise ValueError(f"profile_prefill: --tokens {n}; give more than {_FUSED_ROWS} (shorter passes are decode's)")
    model = Qwen3(c, weights, max_seq=n, fuse=not unfused)
    if glu:
        model.PREFILL_GLU = True
    in_epilogue = model.fuse and model.PREFILL_GLU
    unfused = not in_epilogue
    ops = OPS if in_epilogue else OPS_UNFUSED
    model.tune(n)
    inputs = tile.from_numpy(np.array([*range(n), 0], dtype=np.int32) % c.vocab_size)
    all_steps = model.steps(inputs, n, head=False, start=0)
    if len(all_steps) != 1 + len(ops) * c.num_hidden_layers:
        raise RuntimeError(f"profile_prefill: the model made {len(all_steps)} steps, expected 1 + {len(ops)} a layer")
    kinds: dict[str, list[Step]] = {"embedding": all_steps[:1]}
    for k, name in enumerate(ops):
        kinds[name] = all_steps[1 + k :: len(ops)]
    work = op_work(c, n, unfused=unfused)
    rows = []
    for name, steps in kinds.items():
        ms, launches = time_kind(model, n, steps, reps)
        unit, amount = work[name]
        amount *= len(steps)
        row: dict[str, Any] = {"op": name, "launches": launches, "ms": ms}
        if unit == "flop":
            row["tflops"] = amount / ms / 1e9
        else:
            row["gbps"] = amount / ms / 1e6
        rows.append(row)
    whole = Chain()
    try:
        total = timed_ms(model.steps(inputs, n, head=False, start=0), whole, reps)
    finally:
        model.adopt_caches(whole)
    summed = sum(r["ms"] for r in rows)
    for r in rows:
        r["share"] = r["ms"] / summed
    flops = prefill_flops(c, n)
    return {
        "model": c.name,
        "tokens": n,
        "reps": reps,
        "fused": in_epilogue,
        "timing": "gpu events around a graph replay" if tile.backend() == "gpu" else "host clock (cpu interpreter)",
        "ops": rows,
        "sum_ms": summed,
        "total_ms": total,
        "total_tflops": (flops["gemm"] + flops["attention"]) / total / 1e9,
    }


def table(result: dict[str, Any]) -> str:
    """The result as a text table."""
    lines = [f"{'op':<20} {'launches':>8} {'ms':>10} {'share':>7} {'rate':>16}"]
    for r in result["ops"]:
        rate = f"{r['tflops']:.4g} TFLOP/s" if "tflops" in r else f"{r['gbps']:.4g} GB/s"
        lines.append(f"{r['op']:<20} {r['launches']:>8} {r['ms']:>10.3f} {r['share']:>7.1%} {rate:>16}")
    lines.append(f"{'sum of ops':<20} {'':>8} {result['sum_ms']:>10.3f}")
    lines.append(
        f"{'whole prefill':<20} {'':>8} {result['total_ms']:>10.3f} {'':>7} {result['total_tflops']:.4g} TFLOP/s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", default="4B", help="Qwen3 size (0.6B ... 32B, or tiny); default 4B")
    p.add_argument("--tokens", type=int, default=2048, help="prompt length (default 2048)")
    p.add_argument("--reps", type=int, default=5, help="timed replays per op (the median is kept)")
    p.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    p.add_argument("--unfused", action="store_true", help="the fuse=False model's ops (gate/up and SwiGLU apart)")
    p.add_argument("--glu", action="store_true", help="the model with PREFILL_GLU on (SwiGLU in gate/up's epilogue)")
    p.add_argument("--smoke", action="store_true", help="tiny config, 24 tokens, 2 reps, on the CPU interpreter")
    args = p.parse_args(argv)
    if args.smoke:
        tile.set_backend("cpu")
        args.model, args.tokens, args.reps = "tiny", 24, 2
    if args.tokens <= _FUSED_ROWS:
        p.error(f"--tokens {args.tokens}: give more than {_FUSED_ROWS} (shorter passes take the decode projections)")
    c = config_for(args.model)
    result = profile(c, SeededWeights(c, seed=0), args.tokens, args.reps, unfused=args.unfused, glu=args.glu)
    result["backend"] = tile.backend()
    print(table(result), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
