"""Small all-reduces inside a captured graph: the cost per all-reduce of a tensor-parallel decode step (issue 19).

A tp=2 Qwen3-32B decode step all-reduces the ``(1, 5120)`` bf16 residual stream twice per layer, 128 times per token,
all inside one captured graph. This times exactly that: one graph holding a chain of ``--ops`` (128) in-place sum
all-reduces of ``--numel`` (5120) bf16 elements, replayed ``--replays`` times per round (each replay waited for),
``--rounds`` rounds after a warm-up, median round reported as microseconds per all-reduce. Contenders, each also
checked once for the right sum on rank-dependent data before it is timed:

- ``tile_nccl``: `tile.distributed.all_reduce` ``.then()`` chain, ``.graph()`` (NCCL through torch.distributed);
- ``tile_one_shot``: the same after `tile.distributed.enable_one_shot` (torch's symmetric-memory one-shot kernel);
- ``torch_nccl``: ``torch.distributed.all_reduce`` on a torch tensor, captured with ``torch.cuda.graph``;
- ``torch_one_shot``: ``torch.ops.symm_mem.one_shot_all_reduce_copy_out`` captured the same way (the floor of the
  one-shot path: no Tile in it).

``tile_nccl`` against ``torch_nccl`` is Tile's own overhead per captured collective (expected about none: the graph
holds the same NCCL kernel); ``tile_nccl`` times ``--ops`` is the all-reduce share of a decode token; ``tile_one_shot``
what the one-shot path saves. Results go to ``benchmarks/results/allreduce_graph.json`` (rank 0)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 python -m torch.distributed.run --nproc-per-node 2 \\
        benchmarks/bench_allreduce_graph.py

``--smoke`` runs the Tile contender on the CPU (interpreter backend, gloo, a host graph) and writes nothing::

    TILE_INTERPRET=1 python -m torch.distributed.run --nproc-per-node 2 benchmarks/bench_allreduce_graph.py --smoke

Failures say where they happened (issue 19: a run died of SIGABRT with nothing printed). Every rank logs each step
of each contender to stderr as ``[rank R +T s] ...`` (flushed); ``faulthandler`` prints every thread's Python stack
on a fatal signal (a C++ ``std::terminate`` is SIGABRT) and every ``--hang-dump`` seconds (a hung rank shows where);
``TORCH_SHOW_CPP_STACKTRACES=1`` puts a C++ error's frames into its message. A contender that raises logs its
traceback on its rank; after its check and capture, and again after its timing, the ranks compare outcomes over a
separate gloo group (CPU, with a timeout, so it works while NCCL is stuck): a contender that failed on every rank is
reported and the next one runs; one that failed on some ranks only leaves their collectives out of step (the others
wait in a collective the failed rank left), so the failed rank's wait times out (``--agree-timeout``) and the run
stops there with exit status 1 (torchrun then ends the waiting ranks). ``--only`` runs some contenders (bisecting a
crash); ``--fail-on RANK:CONTENDER,...`` makes ranks raise at contenders' starts (tests those paths). After the
results are written and every rank has left the process group, the process ends with ``os._exit``: torch before
pytorch#196003 (2026-09) frees symmetric memory at interpreter exit in a destructor that throws when a CUDA call fails
there (pytorch#195824), a SIGABRT after the work is done that hides the real error; ``--teardown`` exits normally
instead, to see whether teardown itself fails.
"""

from __future__ import annotations

import os

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # before torch/NCCL start: NVLink multicast needs fabric setup
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("TORCH_SHOW_CPP_STACKTRACES", "1")  # a C++ error's frames in its message

import argparse
import datetime
import faulthandler
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.frontend.distributed as dist
from tile import aio

ROOT = Path(__file__).resolve().parent.parent
CONTENDERS = ("tile_nccl", "torch_nccl", "tile_one_shot", "torch_one_shot")
GPU_ONLY = CONTENDERS[1:]
_START = time.perf_counter()

Made = tuple[Callable[[], None], Callable[[], None]]
"""A contender once built and checked: (replay its graph and wait, close it)."""


def log(msg: str) -> None:
    """One progress line of this rank on stderr, flushed at once (the last one says where a crash happened)."""
    rank = os.environ.get("RANK", "?")
    sys.stderr.write(
        f"[rank {rank} +{time.perf_counter() - _START:.2f}s] {msg}\n"
    )  # one write: ranks' lines stay whole
    sys.stderr.flush()


def tile_graph(ops: int, numel: int) -> Made:
    """A Tile graph of ``ops`` chained all-reduces of zeros."""
    op: aio.DeviceOp[Any] = dist.all_reduce(tile.zeros(tile.bf16, [numel]))
    for _ in range(ops - 1):
        op = op.then(dist.all_reduce)
    graph = op.graph()

    def replay() -> None:
        graph.launch().sync_on(graph.context)

    return replay, graph.close


def tile_check(numel: int, g: dist.Group) -> None:
    """One Tile all-reduce of rank-dependent values gives the sum (on the path the process has selected)."""
    got = dist.all_reduce(tile.full(tile.bf16, [numel], float(g.rank + 1))).sync().to_numpy().astype(np.float32)
    want = g.world_size * (g.world_size + 1) / 2
    if not np.all(got == want):
        raise AssertionError(f"rank {g.rank}: all-reduce gave {np.unique(got)[:4]}, not {want}")


def torch_graph(torch: Any, ops: int, numel: int, g: dist.Group, one_shot: bool) -> Made:
    """A torch.cuda.graph of ``ops`` all-reduces (NCCL, or the symmetric-memory one-shot kernel), checked first.

    The tensors the graph reads and writes stay referenced until it is closed: every replay uses their addresses."""
    device = torch.device("cuda", torch.cuda.current_device())  # (symm_mem keys its memory pools by this device)
    x = torch.full((numel,), float(g.rank + 1), dtype=torch.bfloat16, device=device)
    keep = [x]
    if one_shot:
        import torch.distributed._symmetric_memory as symm

        name = torch.distributed.group.WORLD.group_name
        buf = symm.empty(numel, dtype=torch.bfloat16, device=device)
        symm.rendezvous(buf, name)
        keep.append(buf)

        def one() -> None:
            torch.ops.symm_mem.one_shot_all_reduce_copy_out(buf, x, "sum", name, x)
    else:

        def one() -> None:
            torch.distributed.all_reduce(x)

    one()
    torch.cuda.synchronize()
    if not bool((x == g.world_size * (g.world_size + 1) / 2).all()):
        raise AssertionError(f"rank {g.rank}: torch's all-reduce gave {x[:4].tolist()}")
    x.zero_()
    side = torch.cuda.Stream()  # warm up off the default stream, as torch.cuda.graph wants
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        one()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    # Thread-local capture, as Tile's: other threads of the process (NCCL's watchdog polling its events) may call
    # CUDA while this thread captures; in global mode such a call would invalidate the capture or fail on them.
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        for _ in range(ops):
            one()

    def replay() -> None:
        graph.replay()
        torch.cuda.synchronize()

    def close() -> None:
        torch.cuda.synchronize()
        graph.reset()
        keep.clear()

    return replay, close


def timed(replay: Callable[[], None], barrier: Callable[[], None], replays: int, rounds: int) -> list[float]:
    """Seconds per replay of each round (round 0, the warm-up, dropped)."""
    out = []
    for r in range(rounds + 1):
        barrier()
        start = time.perf_counter()
        for _ in range(replays):
            replay()
        if r:
            out.append((time.perf_counter() - start) / replays)
    return out


class Agreement:
    """The ranks' outcomes of one step, compared over a gloo group of their own (host memory, with a timeout): it
    answers while NCCL's communicator is stuck or broken, where a collective on it would hang."""

    def __init__(self, torch: Any, timeout_s: float) -> None:
        self.torch, self.timeout_s = torch, timeout_s
        self.group = torch.distributed.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))

    def __call__(self, error: str | None) -> list[str | None]:
        """Every rank's error for this step (``None``: it succeeded), in rank order."""
        dist_ = self.torch.distributed
        out: list[Any] = [None] * dist_.get_world_size()
        try:
            dist_.all_gather_object(out, error, group=self.group)
        except Exception as exc:  # (a timeout, or a rank that died: the run cannot go on in step)
            raise SystemExit(
                f"the ranks did not all report within {self.timeout_s:g} s (this rank: {error or 'ok'}): one is "
                f"stuck in a collective another left, or has died ({type(exc).__name__}: {str(exc)[:200]})"
            ) from None
        return out


def attempt(step: str, fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """``fn()``'s result, or its error (logged with its traceback on this rank)."""
    try:
        return fn(), None
    except Exception as exc:
        log(f"{step} failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return None, f"{type(exc).__name__}: {exc}"[:400]


def summary(errors: list[str | None]) -> str:
    return "; ".join(f"rank {r}: {e}" for r, e in enumerate(errors) if e is not None)


def run(name: str, make: Callable[[], Made], args: Any, agree: Agreement, sync: Callable[[], None]) -> dict[str, Any]:
    """Build, check and time one contender on every rank. A failure on every rank is reported in the row; one on
    some ranks only raises `SystemExit` (their collectives are out of step: nothing after it can be trusted)."""

    def build() -> Made:
        if f"{os.environ.get('RANK')}:{name}" in args.fail_on.split(","):
            raise RuntimeError(f"--fail-on {args.fail_on}")
        made = make()
        sync()  # an asynchronous CUDA error of the check or capture shows here, under this contender's name
        return made

    log(f"{name}: check and capture")
    made, error = attempt(f"{name}: check and capture", build)
    errors = agree(error)
    if any(errors):
        if made is not None:
            attempt(f"{name}: close", made[1])
        if not all(errors):
            raise SystemExit(f"{name} failed on some ranks only ({summary(errors)}); stopping")
        return {"contender": name, "error": summary(errors)}
    replay, close = made

    def measure() -> list[float]:
        try:
            log(f"{name}: timing {args.rounds + 1} rounds of {args.replays} replays")
            return timed(replay, dist.barrier, args.replays, args.rounds)
        finally:
            log(f"{name}: close")
            close()
            sync()

    secs, error = attempt(f"{name}: timing", measure)
    errors = agree(error)
    if any(errors):
        if not all(errors):
            raise SystemExit(f"{name} failed on some ranks only ({summary(errors)}); stopping")
        return {"contender": name, "error": summary(errors)}
    med = float(np.median(secs))
    log(f"{name}: done, {med / args.ops * 1e6:.2f} us per all-reduce")
    return {
        "contender": name,
        "us_per_all_reduce": round(med / args.ops * 1e6, 2),
        "us_per_replay": round(med * 1e6, 1),
        "min_us_per_all_reduce": round(min(secs) / args.ops * 1e6, 2),
    }


def parse() -> Any:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--ops", type=int, default=128, help="all-reduces in the graph (a 64-layer model's decode step)")
    p.add_argument("--numel", type=int, default=5120, help="bf16 elements each (Qwen3-32B's hidden size)")
    p.add_argument("--replays", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--smoke", action="store_true", help="CPU interpreter + gloo, Tile only, 8 ops, no results file")
    p.add_argument("--only", default=",".join(CONTENDERS), help="contenders to run, comma-separated, in this order")
    p.add_argument(
        "--fail-on",
        default="",
        metavar="RANK:CONTENDER",
        help="those ranks raise at those contenders' start (comma-separated)",
    )
    p.add_argument("--agree-timeout", type=float, default=60.0, help="seconds the ranks wait for each other")
    p.add_argument("--hang-dump", type=float, default=180.0, help="seconds between stack dumps while stuck")
    p.add_argument("--teardown", action="store_true", help="exit through interpreter teardown, not os._exit")
    args = p.parse_args()
    unknown = sorted(set(args.only.split(",")) - set(CONTENDERS))
    if unknown:
        p.error(f"--only: unknown contenders {unknown}; known: {', '.join(CONTENDERS)}")
    return args


def main() -> None:
    faulthandler.enable(all_threads=True)  # before torch loads: a fatal signal prints every thread's Python stack
    args = parse()
    if "RANK" not in os.environ:
        raise SystemExit("run under torchrun: see this script's docstring")
    faulthandler.dump_traceback_later(args.hang_dump, repeat=True)  # stuck ranks say where, every --hang-dump s
    log(f"start: {' '.join(sys.argv[1:])}")
    import torch

    if args.smoke:
        tile.set_backend("cpu")
        args.ops, args.numel, args.replays, args.rounds = 8, 256, 2, 2
    g = dist.init()
    on_gpu = g.backend == "nccl"
    log(f"joined: rank {g.rank} of {g.world_size} on {g.backend}, device {g.device}")
    agree = Agreement(torch, args.agree_timeout)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)

    def tile_nccl() -> Made:
        dist.disable_one_shot()
        tile_check(args.numel, g)
        return tile_graph(args.ops, args.numel)

    def tile_one_shot() -> Made:
        dist.enable_one_shot(2 * args.numel, unchecked=True)
        if (why := dist.one_shot_reason(tile.zeros(tile.bf16, [args.numel]))) is not None:
            raise RuntimeError(f"not on the one-shot path: {why}")
        tile_check(args.numel, g)
        return tile_graph(args.ops, args.numel)

    makers: dict[str, Callable[[], Made]] = {
        "tile_nccl": tile_nccl,
        "torch_nccl": lambda: torch_graph(torch, args.ops, args.numel, g, one_shot=False),
        "tile_one_shot": tile_one_shot,
        "torch_one_shot": lambda: torch_graph(torch, args.ops, args.numel, g, one_shot=True),
    }
    chosen = [c for c in args.only.split(",") if on_gpu or c not in GPU_ONLY]
    rows: list[dict[str, Any]] = []
    stopped: str | None = None
    for name in chosen:
        try:
            row = run(name, makers[name], args, agree, sync)
        except SystemExit as stop:
            stopped = str(stop)
            row = {"contender": name, "error": stopped}
        rows.append(row)
        if g.rank == 0:
            print(json.dumps(row), flush=True)
        if stopped:
            break
    info: dict[str, Any] = {"backend": g.backend, "world_size": g.world_size, "ops": args.ops, "numel": args.numel}
    info |= {"python": platform.python_version(), "torch": torch.__version__}
    info |= {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "NCCL_PROTO", "NCCL_ALGO", "NCCL_MAX_NCHANNELS")}
    if on_gpu:
        info |= {"device": torch.cuda.get_device_name(), "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    if g.rank == 0:
        print(json.dumps(info), flush=True)
        if not args.smoke and stopped is None:
            out = ROOT / "benchmarks" / "results" / "allreduce_graph.json"
            out.write_text(json.dumps({"info": info, "rows": rows}, indent=2) + "\n")
    finish(g, args, sync, any("error" in row for row in rows), stopped)


def finish(g: dist.Group, args: Any, sync: Callable[[], None], failed: bool, stopped: str | None) -> None:
    """Leave the group once every rank's work is done, then end the process (see the docstring on ``os._exit``).

    The exit status is 1 when a contender failed (its row says how), else 0."""
    if stopped is None:
        log("leaving the process group")
        _, error = attempt("final synchronize", sync)
        if error is None:
            dist.barrier()
        dist.disable_one_shot()
        dist.destroy()
        failed = failed or error is not None
    else:
        log(f"stopped: {stopped}")  # (no barrier or destroy: the ranks' collectives are out of step, they would hang)
    code = 1 if failed or stopped else 0
    faulthandler.cancel_dump_traceback_later()
    log(f"exit {code}")
    sys.stdout.flush()
    sys.stderr.flush()
    if args.teardown:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    main()
