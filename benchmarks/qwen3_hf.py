"""Hugging Face transformers' ``Qwen3ForCausalLM`` as decode contenders of ``bench_qwen3.py``.

- ``transformers_eager``: eager, with its dynamic cache (one forward per token);
- ``transformers_compiled``: the decode forward compiled with ``torch.compile(mode="reduce-overhead",
  fullgraph=True)`` (CUDA graphs), over a ``StaticCache`` (fixed shapes, which the graphs need); the prompt is
  run eagerly into the same cache. Compiling runs under a time limit (SIGALRM); a failure to import, compile or run
  (offline, an API that moved) is a skip with its reason, not an error of the benchmark.

Both build the model on the GPU in bf16 (no f32 copy on the host) and load the benchmark's weights, and time greedy
steps the way every contender is timed (`decode_rate`: one host read of the next id per token).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from tile.kernels.qwen3 import Qwen3Config

__all__ = ["bf16_to_torch", "decode_rate", "hf_rates", "hf_series"]


def bf16_to_torch(torch: Any, a: Any) -> Any:
    """A CUDA bf16 torch tensor with the bits of the ml_dtypes bf16 array ``a``."""
    return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).to("cuda").view(torch.bfloat16)


def decode_rate(step: Callable[[int], int], first: int, tokens: int, sync: Callable[[], None]) -> float:
    """Seconds per decode step of ``step(token) -> next token`` over ``tokens`` steps after two warm-up steps."""
    token = step(first)
    token = step(token)
    sync()
    start = time.perf_counter()
    for _ in range(tokens):
        token = step(token)
    sync()
    return (time.perf_counter() - start) / tokens


class TimeLimitError(Exception):
    """The compiled contender ran past its time limit."""


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise `TimeLimitError` in this (main) thread after ``seconds``; off again on exit."""

    def expired(signum: int, frame: object) -> None:
        raise TimeLimitError(f"ran past its limit of {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _model(torch: Any, transformers: Any, c: Qwen3Config, w: Mapping[str, Any]) -> Any:
    cfg = transformers.Qwen3Config(**c.to_hf())
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = transformers.Qwen3ForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(default)
    model.load_state_dict({n: bf16_to_torch(torch, a) for n, a in w.items()}, strict=False)
    return model


def _eager(torch: Any, model: Any, prompt: list[int], tokens: int) -> float:
    out = model(torch.tensor([prompt], device="cuda"), use_cache=True)
    cache = out.past_key_values

    def step(tok: int) -> int:
        nonlocal cache
        o = model(torch.tensor([[tok]], device="cuda"), past_key_values=cache, use_cache=True)
        cache = o.past_key_values
        return int(o.logits[0, -1].argmax())

    return decode_rate(step, int(out.logits[0, -1].argmax()), tokens, torch.cuda.synchronize)


def _static_cache(transformers: Any, model: Any, length: int) -> Any:
    try:  # transformers >= 4.56: the layers are made on first use, on the model's device and dtype
        return transformers.StaticCache(config=model.config, max_cache_len=length)
    except TypeError:  # older: batch size, device and dtype given
        return transformers.StaticCache(
            config=model.config, max_batch_size=1, max_cache_len=length, device="cuda", dtype=model.dtype
        )


_UNTIMED_STEPS = 3 + 2  # the compiled contender's compile/record steps and decode_rate's warm-up steps


def _compiled(torch: Any, transformers: Any, model: Any, prompt: list[int], tokens: int) -> dict[str, float]:
    n = len(prompt)
    # Positions n .. n + tokens + 4: three steps compile and record, decode_rate warms up with two more, then times
    # ``tokens`` (a position past the cache trips a device-side assert that poisons the whole process's context).
    cache = _static_cache(transformers, model, n + tokens + _UNTIMED_STEPS)
    positions = torch.arange(n, device="cuda")
    out = model(torch.tensor([prompt], device="cuda"), past_key_values=cache, cache_position=positions)
    forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    at = n

    def step(tok: int) -> int:
        nonlocal at
        ids = torch.tensor([[tok]], device="cuda")
        where = torch.tensor([at], device="cuda")  # a fresh input each step, as generate() makes it
        o = forward(input_ids=ids, past_key_values=cache, cache_position=where, use_cache=True)
        at += 1
        return int(o.logits[0, -1].argmax())

    start = time.perf_counter()
    token = step(step(step(int(out.logits[0, -1].argmax()))))  # compile, then the CUDA graph's recording
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    return {"s_per_token": decode_rate(step, token, tokens, torch.cuda.synchronize), "compile_s": compile_s}


def hf_rates(
    torch: Any,
    *,
    c: Qwen3Config,
    w: Mapping[str, Any],
    prompt: list[int],
    tokens: int,
    limit_s: int,
    floor: float,
    compiled: bool,
) -> dict[str, Any]:
    """The ``transformers_eager`` row and with ``compiled`` the ``transformers_compiled`` row (tokens/s, roofline
    fraction ``floor / s``), or ``{"skipped": reason}`` for each that cannot run."""
    got = hf_series(
        torch, c=c, w=w, prompts=[prompt], tokens=tokens, limit_s=limit_s, floors=[floor], compiled=compiled
    )
    return got[0]


def hf_series(
    torch: Any,
    *,
    c: Qwen3Config,
    w: Mapping[str, Any],
    prompts: Sequence[list[int]],
    tokens: int,
    limit_s: int,
    floors: Sequence[float],
    compiled: bool,
) -> list[dict[str, Any]]:
    """`hf_rates` after each of ``prompts`` (its roofline time per token in ``floors``), one model built once: each
    prompt gets a fresh cache (the compiled contender a static cache of its length, compiled again within ``limit_s``
    where the shapes changed)."""
    if len(prompts) != len(floors):
        raise ValueError(f"{len(prompts)} prompts but {len(floors)} roofline times")
    try:
        import transformers
    except ImportError as exc:
        reason = {"skipped": f"transformers is not importable ({exc})"}
        return [{"transformers_eager": reason, "transformers_compiled": reason} for _ in prompts]
    rows: list[dict[str, Any]] = []
    model = _model(torch, transformers, c, w)
    with torch.no_grad():
        for prompt, floor in zip(prompts, floors, strict=True):
            sec = _eager(torch, model, prompt, tokens)
            row: dict[str, Any] = {"transformers_eager": {"tokens_per_s": 1 / sec, "roofline_fraction": floor / sec}}
            if compiled:
                got = _compiled_row(torch, transformers, model, prompt, tokens, limit_s=limit_s)
                if "tokens_per_s" in got:
                    got["roofline_fraction"] = floor * got["tokens_per_s"]
                row["transformers_compiled"] = got
            else:
                row["transformers_compiled"] = {"skipped": "not asked for (--peers all runs it)"}
            rows.append(row)
    del model
    torch.cuda.empty_cache()
    return rows


def _compiled_row(
    torch: Any, transformers: Any, model: Any, prompt: list[int], tokens: int, *, limit_s: int
) -> dict[str, Any]:
    try:
        with time_limit(limit_s):
            got = _compiled(torch, transformers, model, prompt, tokens)
    except Exception as exc:  # offline, a moved API, a compile error, the time limit: a skip with its reason
        return {"skipped": f"{type(exc).__name__}: {exc}"[:400]}
    sec = got["s_per_token"]
    return {"tokens_per_s": 1 / sec, "compile_s": got["compile_s"]}
