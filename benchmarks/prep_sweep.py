"""Time the multi-token `prep_qkv` (q/k RMSNorm + RoPE and the KV-cache append of a prefill) at each block shape
`tile.kernels.qwen3._ops` lists as a candidate, to pick `_ops.APPEND_TOKENS`, `_ops.PREP_GROUP` and
`_ops.PREP_OCCUPANCY` on a GPU.

Each config runs as ``profile_prefill.py`` times an op: one graph of 36 launches (a layer each, every layer on its
own inputs and caches, so nothing stays in L2 between them) replayed ``--reps`` times between two timing events; the
median is kept. Qwen3-4B's heads (32 query heads over 8 KV heads of 128), bf16 rows, a cache of the pass's length,
from position 0 (every cache tile whole). ``tables`` is the RoPE tables' dtype: f32 (the model's) or bf16 (no
register-layout conversion in the kernel; see ``_qwen3_kernels.tilepy``). GB/s counts the rows read and the queries,
keys and values written (``profile_prefill.op_work``).

    python benchmarks/prep_sweep.py [--tokens 2048] [--reps 5] [--out FILE] [--smoke]

``--smoke`` runs two tiny configs on the CPU interpreter (the harness only: interpreter times mean nothing).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_prefill  # type: ignore[import-not-found]  # beside this script

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.kernels.qwen3 import _ops

HEADS, KV, HD, LAYERS = 32, 8, 128, 36
TOKENS = (16, 32, 64)
GROUPS = (1, 2, 4)
OCCUPANCIES = (0, 2, 4, 8)
TABLES = ("f32", "bf16")


class Layer:
    """One layer's inputs of a prefill's `prep_qkv`: the fused rows, the norm weights, the RoPE tables' rows."""

    def __init__(self, rng: np.random.Generator, n: int, shape: tuple[int, int, int], tables: str) -> None:
        import ml_dtypes

        bf16 = ml_dtypes.bfloat16
        heads, kv, hd = shape  # query heads, KV heads, head dim
        self.heads, self.kv, self.hd, self.n = heads, kv, hd, n
        self.qkv = tile.from_numpy(rng.standard_normal((n, (heads + 2 * kv) * hd)).astype(bf16))
        self.wq = tile.from_numpy(rng.standard_normal((1, hd)).astype(bf16))
        self.wk = tile.from_numpy(rng.standard_normal((1, hd)).astype(bf16))
        angles = np.arange(n)[:, None] * 1e6 ** (-np.arange(hd // 2) * 2.0 / hd)[None, :]
        dtype = bf16 if tables == "bf16" else np.float32
        self.cos, self.sin = (tile.from_numpy(f(angles).astype(dtype)) for f in (np.cos, np.sin))
        self.pos = tile.from_numpy(np.zeros(1, np.int32))

    def caches(self) -> tuple[tile.Tensor, tile.Tensor]:
        """Fresh caches of the pass's length (a launch moves them in), made before any capture."""
        kc, vc = (tile.zeros(tile.bf16, [self.kv, self.n, self.hd]) for _ in range(2))
        return kc, vc

    def prep(self, caches: tuple[tile.Tensor, tile.Tensor], config: tuple[int, int, int]) -> DeviceOp[Any]:
        """The launch at ``config`` (tokens, group, occupancy) on ``caches``."""
        (kc, vc), (tokens, group, occupancy) = caches, config
        return _ops.prep_qkv(
            kc,
            vc,
            self.qkv,
            self.wq,
            self.wk,
            heads=self.heads,
            cos=self.cos,
            sin=self.sin,
            pos=self.pos,
            eps=1e-6,
            tokens=tokens,
            start=0,
            group=group,
            occupancy=occupancy,
        )


def _next(layer: Layer, caches: tuple[tile.Tensor, tile.Tensor], config: tuple[int, int, int], _: object) -> Any:
    return layer.prep(caches, config)


def timed_ms(layers: list[Layer], tokens: int, group: int, occupancy: int, reps: int) -> float:
    """Median milliseconds of one replay of the layers' launches, captured as one graph."""

    def chained() -> DeviceOp[Any]:
        config = (tokens, group, occupancy)
        caches = [layer.caches() for layer in layers]
        op: DeviceOp[Any] = layers[0].prep(caches[0], config)
        for layer, pair in zip(layers[1:], caches[1:], strict=True):
            op = op.then(functools.partial(_next, layer, pair, config))
        return op

    chained().sync()  # eager first: it compiles
    op = chained()
    times = []
    with op.graph() as graph:
        graph.launch().sync()
        for _ in range(reps):
            times.append(profile_prefill._replay_ms(graph))
        graph.close()
    return float(np.median(times))


def sweep(n: int, reps: int, smoke: bool) -> dict[str, Any]:
    """Every candidate config's time (ms for the layers) and GB/s; configs that do not apply are left out."""
    heads, kv, hd, count = (4, 2, 16, 2) if smoke else (HEADS, KV, HD, LAYERS)
    rng = np.random.default_rng(0)
    moved = 2.0 * 2 * n * (heads + 2 * kv) * hd * count  # bytes: the rows read, as many written
    rows = []
    configs = (
        [(16, 1, 0, "f32"), (16, 2, 4, "bf16")] if smoke else itertools.product(TOKENS, GROUPS, OCCUPANCIES, TABLES)
    )
    made: dict[str, list[Layer]] = {}
    for tokens, group, occupancy, tables in configs:
        if tokens > n or heads % group:
            continue
        if tables not in made:
            made.clear()  # one dtype's layers at a time
            made[tables] = [Layer(rng, n, (heads, kv, hd), tables) for _ in range(count)]
        row: dict[str, Any] = {"tokens": tokens, "group": group, "occupancy": occupancy, "tables": tables}
        try:
            ms = timed_ms(made[tables], tokens, group, occupancy, reps)
        except tile.TileError as e:  # a config tileiras refuses (e.g. too few registers): say so, time the rest
            row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            print(f"tokens={tokens:3d} group={group} occupancy={occupancy} tables={tables:4s} {row['error']}")
            continue
        row["ms"] = ms
        row["gbps"] = moved / ms / 1e6
        rows.append(row)
        print(
            f"tokens={tokens:3d} group={group} occupancy={occupancy} tables={tables:4s} {ms:8.3f} ms "
            f"{row['gbps']:8.1f} GB/s",
            flush=True,
        )
    return {"tokens": n, "layers": count, "reps": reps, "backend": tile.backend(), "configs": rows}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--tokens", type=int, default=2048, help="prompt length (default 2048)")
    p.add_argument("--reps", type=int, default=5, help="timed replays per config (the median is kept)")
    p.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    p.add_argument("--smoke", action="store_true", help="tiny shapes, 2 configs, 32 tokens, on the CPU interpreter")
    args = p.parse_args(argv)
    if args.smoke:
        tile.set_backend("cpu")
        args.tokens, args.reps = 32, 1
    result = sweep(args.tokens, args.reps, args.smoke)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
