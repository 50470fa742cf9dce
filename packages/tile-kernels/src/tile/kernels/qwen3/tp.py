"""Tensor-parallel Qwen3: `TPQwen3`, one process per GPU (``torchrun --nproc-per-node N``), each holding its shard.

Megatron-style: in every layer the q/k/v and gate/up projections are column-parallel (rank ``r`` of ``N`` computes
attention heads ``r * H/N ..`` and its slice of the MLP's inner width) and the output and down projections are
row-parallel (each rank multiplies its slice of the inner dimension, giving a partial sum of the full output), so a
layer needs two all-reduces of the ``(T, hidden)`` residual stream, one after attention and one after the MLP, and
nothing else: q/k RMSNorm is per head, attention is per head, SwiGLU is per column, all local.

- The residual add stays fused into the row-parallel matmul on rank 0 only (the others add nothing), so the
  all-reduce's sum is ``x + sum of the partials`` with no extra launch. The all-reduce runs on the bf16 stream, as
  the activations do between launches: one more bf16 rounding per sublayer than one GPU (the tests budget it).
- KV heads: a rank holds ``KV/N`` of them when ``N`` divides ``KV``; with fewer KV heads than ranks (``N`` a multiple
  of ``KV``) each KV head is replicated on the ``N/KV`` ranks whose query heads use it (every rank computes and
  caches its one KV head; the q heads of a rank are a contiguous block inside one GQA group). Other counts are
  refused (`ArgumentError`).
- The embedding is replicated: a lookup reads only the token's row, so sharding the table would save memory but add
  an all-reduce per step. The LM head is vocabulary-parallel: it is the largest single matrix read per token (1.6 GB
  for 32B, 10% of 4B's weights), so each rank multiplies its ``vocab/N`` rows and an all-gather (``N x vocab/N`` f32
  values, 0.6 MB) assembles the logits; the greedy id is found on the gathered rows (`argmax_rows`). A tied model's
  LM head shard is a view of the replicated embedding (no extra memory).
- Weights: each rank makes or reads only its shard (`shard_slices` says which part of each checkpoint tensor;
  `random_weights(..., select=)` and `load_checkpoint(..., select=)` take it), so a 32B model never exists whole in
  one process.

The decode step, all-reduces and all-gather included, is captured as one graph by `DecodeGraph` like the one-GPU
model (NCCL >= 2.9 allows capturing collectives on one stream; gloo's run as recorded host work on the CPU).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import numpy as np

import tile.frontend as tile
from tile.frontend import ArgumentError, BackendError, Tensor, f32
from tile.kernels import _args, _elementwise
from tile.kernels.qwen3 import _ops
from tile.kernels.qwen3._chain import Step
from tile.kernels.qwen3.config import Qwen3Config
from tile.kernels.qwen3.model import Qwen3, X

__all__ = ["TPQwen3", "argmax_rows", "local_config", "shard_slices", "sliced_shape", "torchrun_world"]

Slices = tuple[slice, ...]


def _check(config: Qwen3Config, world: int) -> None:
    c, n = config, world
    if n < 1:
        raise ArgumentError(f"tensor parallelism needs at least one rank, got {n}")
    bad = [
        f"{what} ({value})"
        for what, value in (
            ("attention heads", c.num_attention_heads),
            ("MLP width", c.intermediate_size),
            ("vocabulary", c.vocab_size),
        )
        if value % n
    ]
    kv = c.num_key_value_heads
    if kv % n and n % kv:
        bad.append(f"KV heads ({kv}: neither a multiple nor a divisor of the rank count)")
    if bad:
        raise ArgumentError(f"Qwen3-{c.name} does not split over {n} ranks: {', '.join(bad)}; choose another --tp")


def local_config(config: Qwen3Config, world: int) -> Qwen3Config:
    """The shape one of ``world`` ranks computes: ``heads/N`` query heads, ``max(1, KV/N)`` KV heads, ``MLP/N`` inner
    width; hidden size and vocabulary unchanged. `ArgumentError` when the model does not split over ``world``."""
    _check(config, world)
    c = config
    return replace(
        c,
        name=f"{c.name}-tp{world}",
        num_attention_heads=c.num_attention_heads // world,
        num_key_value_heads=max(1, c.num_key_value_heads // world),
        intermediate_size=c.intermediate_size // world,
    )


def shard_slices(config: Qwen3Config, rank: int, world: int) -> dict[str, Slices]:
    """The part of every checkpoint tensor rank ``rank`` of ``world`` holds, as index slices (``()``: all of it).

    Column-parallel q/k/v/gate/up: rows; row-parallel o/down: columns; LM head: rows (the vocabulary); the rest whole.
    """
    if not 0 <= rank < world:
        raise ArgumentError(f"rank {rank} is not one of {world} ranks")
    c, loc = config, local_config(config, world)
    hd, q, i, v = c.head_dim, loc.q_size, loc.intermediate_size, c.vocab_size // world
    kv0 = rank * c.num_key_value_heads // world  # this rank's first KV head (shared by N/KV ranks when KV < N)
    kv = slice(kv0 * hd, kv0 * hd + loc.kv_size)
    out: dict[str, Slices] = {}
    for name in c.weight_shapes():
        part = name.rsplit(".", 2)[-2]
        out[name] = {
            "q_proj": (slice(rank * q, (rank + 1) * q),),
            "k_proj": (kv,),
            "v_proj": (kv,),
            "o_proj": (slice(None), slice(rank * q, (rank + 1) * q)),
            "gate_proj": (slice(rank * i, (rank + 1) * i),),
            "up_proj": (slice(rank * i, (rank + 1) * i),),
            "down_proj": (slice(None), slice(rank * i, (rank + 1) * i)),
            "lm_head": (slice(rank * v, (rank + 1) * v),),
        }.get(part, ())
    return out


def sliced_shape(shape: tuple[int, ...], part: Slices) -> tuple[int, ...]:
    """The shape of ``array[part]`` for an array of ``shape`` (``part``: slices of step 1, as `shard_slices` gives)."""
    out = list(shape)
    for axis, sl in enumerate(part):
        lo, hi, _ = sl.indices(shape[axis])
        out[axis] = max(0, hi - lo)
    return tuple(out)


def torchrun_world(tp: int) -> tuple[int, int]:
    """``(rank, world)`` from torchrun's environment, checked against ``--tp tp``; `BackendError` saying how to launch
    otherwise (a missing or different ``WORLD_SIZE``, a ``RANK`` that is not one of its ranks)."""
    world, rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if world is None or rank is None:
        raise BackendError(
            f"--tp {tp} runs one process per GPU: launch it with "
            f"`torchrun --nproc-per-node {tp} -m tile.kernels.qwen3 --tp {tp} ...` (WORLD_SIZE and RANK are not set)"
        )
    if not (world.isdecimal() and rank.isdecimal() and int(rank) < int(world)):
        raise BackendError(
            f"WORLD_SIZE={world!r} and RANK={rank!r} are not a rank of a world of processes (ints, 0 <= RANK < "
            f"WORLD_SIZE); launch with `torchrun --nproc-per-node {tp} ...`, which sets them"
        )
    if int(world) != tp:
        raise BackendError(f"--tp {tp} but torchrun started {world} processes: use --nproc-per-node {tp}")
    return int(rank), int(world)


def argmax_rows(logits: Tensor) -> _ops.Op:
    """The index into ``logits.reshape(-1)`` of the largest of the f32 ``(R, n)`` logits (first on ties, NaN
    skipped), into a new i32 ``(1,)``: the greedy id of vocabulary-parallel logits gathered as ``(ranks, vocab /
    ranks)``. The library argmax's two launches, reading the rows as one vector; the op's output is ``(z, logits)``."""
    x = _args.operand(logits, "logits", "argmax_rows")
    _args.check_dtype(x, "logits", "argmax_rows", ("f32",))
    _args.ensure_rank(x, "logits", "argmax_rows", 2)
    return _elementwise._argmax(x, flat=True)


class TPQwen3(Qwen3):
    """Rank ``rank``'s part of a ``world``-way tensor-parallel Qwen3 (see the module docstring).

    Parameters
    ----------
    config
        The full model's shape.
    weights
        This rank's shard: each checkpoint tensor ``full[shard_slices(config, rank, world)[name]]`` (what
        ``random_weights(config, seed, select=...)`` or ``load_checkpoint(dir, config, select=...)`` return).
    rank, world
        This process's place; collectives run through `tile.distributed` (``init()`` first, with ``world`` ranks).
    max_seq
        Positions the KV cache holds.
    decode_attention
        As `Qwen3`'s (one decode attention kernel or split + combine, on this rank's heads).
    fuse
        As `Qwen3`'s (the norms and SwiGLU fused into this rank's column-parallel projections; its gate/up shard is
        its gate rows then its up rows, as the fused form wants).
    pdl
        As `Qwen3`'s, but off by default here: PDL kernels next to NCCL's collective kernels are not measured yet.

    Every rank must run the same calls with the same tokens (the collectives pair up); each returns the full
    logits.
    """

    def __init__(
        self,
        config: Qwen3Config,
        weights: dict[str, np.ndarray[Any, Any]],
        *,
        rank: int,
        world: int,
        max_seq: int = 1024,
        decode_attention: str = "auto",
        fuse: bool = True,
        pdl: bool = False,
    ) -> None:
        import tile.frontend.distributed as dist

        shapes = config.weight_shapes()
        for name, sl in shard_slices(config, rank, world).items():
            want = sliced_shape(shapes[name], sl)
            if name in weights and tuple(weights[name].shape) != want:
                raise ArgumentError(
                    f"TPQwen3: {name} has shape {list(weights[name].shape)}, rank {rank} of {world} holds {list(want)}"
                    " (pass the rank's shard: select=shard_slices(config, rank, world))"
                )
        g = dist.group()
        if g.world_size != world or g.rank != rank:
            raise ArgumentError(f"TPQwen3: rank {rank} of {world}, but this process is rank {g.rank} of {g.world_size}")
        self.full_config, self.rank, self.world = config, rank, world
        self._dist = dist
        super().__init__(
            local_config(config, world), weights, max_seq, decode_attention=decode_attention, fuse=fuse, pdl=pdl
        )
        if config.tie_word_embeddings:  # the LM head's vocabulary shard is a view of the replicated embedding
            v = config.vocab_size // world
            self.lm_head = self.embed[rank * v : (rank + 1) * v]
        dist.barrier()  # every rank is here, and NCCL's communicator exists before a graph capture could need it

    def weight_bytes(self) -> int:
        """Bytes of weights this rank reads per token: its layer shards, its LM head shard, the final norm (the
        embedding lookup reads one row)."""
        c, loc = self.full_config, self.config
        per_layer = sum(int(np.prod(s)) for n, s in loc.weight_shapes().items() if n.startswith("model.layers.0."))
        return 2 * (c.num_hidden_layers * per_layer + (c.vocab_size // self.world + 1) * c.hidden_size)

    def tune(self, n: int) -> None:
        """The one-GPU tuning, plus what only the other ranks run: the row-parallel projections without the residual
        (rank 0 adds it), a matmul key of its own."""
        first = tile.backend() == "gpu" and n not in self._tuned
        super().tune(n)
        if first and self.rank != 0:
            import tile.kernels as tk

            c, layer = self.config, self.layers[0]
            tk.matmul(tile.zeros(tile.bf16, [n, c.q_size]), layer.wo.T)
            tk.matmul(tile.zeros(tile.bf16, [n, c.intermediate_size]), layer.wd.T)

    def residual_steps(self, name: str, w: Tensor) -> list[Step]:
        """The row-parallel projection: a partial sum on every rank (rank 0 adds the residual), then the all-reduce."""
        dist = self._dist
        # The other ranks drop their copies of the residual stream: the sum brings rank 0's back.
        wt = self.transposed(w)
        steps = super().residual_steps(name, w) if self.rank == 0 else [lambda ch: (_matmul(ch.take(name), wt), X)]
        steps.append(lambda ch: (dist.all_reduce(ch.take("x")).map(_one), X))
        return steps

    def logits_steps(self, n: int) -> list[Step]:
        """This rank's vocabulary slice of the logits, then the all-gather into ``(world * n, vocab / world)``."""
        dist, rows = self._dist, [self.world * n, self.full_config.vocab_size // self.world]
        gather: Step = lambda ch: (dist.all_gather(tile.empty(f32, rows), ch.take("logits")), {"logits": 0})  # noqa: E731
        return [*super().logits_steps(n), gather]

    def logits_rows(self, logits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Rank-major gathered rows ``(world * n, vocab / world)`` back to ``(n, vocab)``."""
        w = self.world
        rows: np.ndarray[Any, Any] = logits.reshape(w, -1, logits.shape[-1]).transpose(1, 0, 2)
        return rows.reshape(-1, w * logits.shape[-1])

    def argmax_op(self, logits: Tensor) -> _ops.Op:
        """The greedy id over the gathered rows (one token: they are the vocabulary in order)."""
        return argmax_rows(logits)


def _matmul(x: Tensor, wt: Tensor) -> _ops.Op:
    import tile.kernels as tk

    made: _ops.Op = tk.matmul_op(x, wt)
    return made


def _one(t: Tensor) -> tuple[Tensor]:
    return (t,)
