"""One rank of the tensor-parallel Qwen3 checks: ``python helpers_tp.py cpu|gpu CONFIG`` with torchrun's environment
(`run_ranks` sets it). Prints ``rank R ok`` and exits 0 only when every check passed (an assertion exits 1).

Each rank builds the TP model from its own shard of the seeded random weights and, on its own device, the one-device
model from the full weights (the tp=1 reference); both run the same prompt and 8 decoded tokens.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tile.frontend as tile
import tile.frontend.distributed as dist
from tile.frontend import bf16
from tile.kernels.qwen3 import CONFIGS, TINY, DecodeGraph, Qwen3, Qwen3Config, TPQwen3, random_weights, shard_slices

U_BF16 = 2.0**-8
PROMPT = [3, 141, 59, 26, 5, 35, 89]
DECODE = 8


def config(name: str) -> Qwen3Config:
    """``tiny``, or ``0.6B-2`` (two layers of Qwen3-0.6B's widths and vocabulary, for the GPU)."""
    if name == "tiny":
        return TINY
    return Qwen3Config(**{**CONFIGS["0.6B"].__dict__, "num_hidden_layers": 2})


def _greedy(model: Qwen3, first: int) -> tuple[list[int], list[np.ndarray[Any, Any]]]:
    tokens, rows = [first], []
    for _ in range(DECODE):
        rows.append(model.forward([tokens[-1]]))
        tokens.append(int(np.argmax(rows[-1])))
    return tokens, rows


def _checks(c: Qwen3Config, *, one_shot: bool = False) -> None:
    g = dist.init()
    r, n = g.rank, g.world_size
    if one_shot:  # the decode step's all-reduces (a few KB) on torch's one-shot path, the larger prompt ones on NCCL
        dist.enable_one_shot(1 << 16, unchecked=True)
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    full = random_weights(c, seed=11)
    mine = random_weights(c, seed=11, select=shard_slices(c, r, n))
    for name, sl in shard_slices(c, r, n).items():  # the shard is that part of the same full model
        np.testing.assert_array_equal(mine[name], full[name][sl])
    one = Qwen3(c, full, max_seq=32)
    tp = TPQwen3(c, mine, rank=r, world=n, max_seq=32)
    assert tp.embed.device == one.embed.device == g.device

    # tp=N against tp=1: the prompt's logits and 8 greedy steps. The TP all-reduce adds one bf16 rounding per
    # sublayer to the one-device error budget of test_qwen3 ((2 * layers + 2) u max|logit|), so twice that budget.
    want = one.forward(PROMPT, all_logits=True)
    got = tp.forward(PROMPT, all_logits=True)
    scale = np.abs(want).max(axis=-1, keepdims=True)
    budget = 2 * (2 * c.num_hidden_layers + 2) * U_BF16 * scale
    assert np.all(np.abs(got - want) <= budget), float((np.abs(got - want) / budget).max())
    first = int(np.argmax(want[-1]))
    assert int(np.argmax(got[-1])) == first
    # The TP model decodes the one-device model's greedy tokens (teacher forcing, so a near tie cannot fork the two
    # sequences and every position is compared): logits within the budget at each.
    want_tokens, want_rows = _greedy(one, first)
    got_rows = [tp.forward([t]) for t in want_tokens[:-1]]
    budgets = [2 * (2 * c.num_hidden_layers + 2) * U_BF16 * np.abs(a).max() for a in want_rows]
    for a, b, bound in zip(want_rows, got_rows, budgets, strict=True):
        assert np.all(np.abs(a - b) <= bound), float(np.abs(a - b).max() / bound)
    # Greedy decoding on its own (free running) picks tp=1's tokens for as long as tp=1's top-2 gaps exceed twice the
    # logit difference measured above (past a closer call the two may fork legitimately: the full vocabulary has near
    # ties); with the tiny config that is all 8 tokens.
    clear = 0
    while (
        clear < DECODE
        and np.diff(np.sort(want_rows[clear])[-2:])[0] > 2 * np.abs(want_rows[clear] - got_rows[clear]).max()
    ):
        clear += 1
    assert clear == DECODE or c is not TINY, clear
    tp.reset()
    tp.forward(PROMPT)
    got_tokens, _ = _greedy(tp, first)
    assert got_tokens[: clear + 1] == want_tokens[: clear + 1], (got_tokens, want_tokens, clear)
    got_tokens = want_tokens

    # The decode step captured with its all-reduces and all-gather replays the eager chain bit for bit (two ranks
    # add two numbers: the sum does not depend on NCCL's algorithm), and the on-device argmax agrees.
    tp.reset()
    tp.forward(PROMPT)
    with DecodeGraph(tp) as graph:
        replayed = [graph.step(t) for t in got_tokens[:-1]]
        on_device = graph.greedy(got_tokens[-1])
    tp.length -= 1  # the eager chain at the same position: the same logits, so the host argmax is the device's
    assert on_device == int(np.argmax(tp.forward(got_tokens[-1:])))
    for a, b in zip(got_rows, replayed, strict=True):
        np.testing.assert_array_equal(a, b)

    _ownership(c, tp)
    dist.barrier()
    dist.destroy()
    print(f"rank {r} ok", flush=True)


def _ownership(c: Qwen3Config, tp: TPQwen3) -> None:
    """Misuse around the decode step's collectives raises the usual ownership errors, on every rank alike."""
    # While a decode graph is open its all-reduces own the caches and activations: the eager path refuses.
    with DecodeGraph(tp) as graph:
        with pytest.raises(tile.ArgumentError, match="a decode graph holds the KV cache"):
            tp.forward([1])
        graph.step(1)
    # The residual stream an all-reduce writes in place: a view kept of it is a BorrowError (it needs exclusive
    # memory), and the tensor moved into it is a MovedError until the op hands it back.
    x = tile.zeros(bf16, [1, c.hidden_size])
    view = x[0:1]
    with pytest.raises(tile.BorrowError):
        dist.all_reduce(x)
    del view
    op = dist.all_reduce(x)
    with pytest.raises(tile.MovedError, match="moved into the all_reduce"):
        x.to_numpy()
    # In the step chain, the all-reduce's output is in flight: only a launch may take it; a host read in a .then()
    # function is an InFlightError, raised on every rank after its all-reduce was enqueued (so the ranks stay paired).
    with pytest.raises(tile.InFlightError):
        op.then(lambda y: (y.to_numpy(), dist.all_reduce(y))[1]).sync()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(args: list[str], world: int, timeout: float = 600, env: dict[str, str] | None = None) -> list[str]:
    """Run ``python args`` as ``world`` ranks (torchrun's environment plus ``env``, this host); each rank's output.
    An AssertionError names the rank that failed and its output."""
    env = dict(os.environ, **(env or {}), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    env["WORLD_SIZE"] = str(world)
    env |= {"NCCL_NVLS_ENABLE": "0", "LOCAL_WORLD_SIZE": str(world)}
    procs = [
        subprocess.Popen(
            [sys.executable, *args],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world)
    ]
    outputs = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"rank {r} timed out") from None
        assert p.returncode == 0, f"rank {r} failed (exit {p.returncode}):\n{out}"
        outputs.append(out)
    return outputs


WORKER = Path(__file__).resolve()

if __name__ == "__main__":
    tile.set_backend(sys.argv[1])
    _checks(config(sys.argv[2]), one_shot=sys.argv[3:] == ["one-shot"])
