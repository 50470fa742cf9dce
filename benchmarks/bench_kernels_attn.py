"""The attention part of ``bench_kernels.py`` (``--only=attn``; ``attn_prefill`` or ``attn_decode`` for one half):
FMHA prefill and decode attention against torch SDPA and cuTile Python's FMHA sample, on the same inputs (shared
through DLPack), checked against each other first.

1. ``attention`` prefill, f16, 32 heads, head dims 64 and 128, causal and not, sequences 1024 ... 8192 with batch
   ``16384 // seq`` (the same tokens per shape): ``tile`` (tuned), ``torch`` (``scaled_dot_product_attention``, its
   flash backend), ``cutile_python`` (``cutile_peers.ct_fmha``, the sample's algorithm, at two tile shapes; the best
   counts). Plus one grouped-query case (32 query heads over 8 KV heads, bf16, d128, causal) against SDPA's
   ``enable_gqa``. TFLOP/s (causal counts half the work). ``tile``, ``torch`` and ``cutile_python``: every call
   waits for its work, so each call's host time before its launch adds to it (Tile's was 0.25-0.3 ms a call on an
   H100/H200 host, torch's and cuTile's about 10 us); ``... back to back``: CHAIN calls (Tile: ``attention_op``
   chained with ``.then()``) waited for once, the host's work overlapping the kernels, as bench_lang_fmha.py times
   them. ``back_to_back_tile_vs_<peer>`` divides those (below 1: Tile faster).
2. ``decode_attention``, bf16, Qwen3-4B's heads (32 query heads over 8 KV heads, d128), batch 1 and 8, KV lengths
   1k ... 32k: ``tile`` (the waiting call), ``torch`` (SDPA of one query over the cache, waiting), and back to back:
   ``tile back to back`` chains CHAIN decode ops with ``.then()`` (the caches handed on in flight), ``torch back to
   back`` issues CHAIN SDPA calls; each waits once. GB/s of the K and V bytes read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import tile.frontend as tile
import tile.kernels as tk

Run = Callable[[], None]
Step = tuple[str, str, Callable[[], dict[str, Any]]]


def steps(peers: Any, interleaved: Callable[[dict[str, Run]], dict[str, float]], entry: Any, smoke: bool) -> list[Step]:
    """The ``attn_prefill`` and ``attn_decode`` measurements: (group, name, function returning the result entry)."""
    bench = _Bench(peers, interleaved, entry, smoke)
    found: list[Step] = []
    seqs = [64] if smoke else [1024, 2048, 4096, 8192]
    for d in (64, 128):
        for causal in (False, True):
            for s in seqs:
                name = f"fmha_f16_d{d}_{'causal' if causal else 'full'}_s{s}"
                found.append(
                    ("attn_prefill", name, lambda d=d, c=causal, s=s: bench.fmha(d, c, s, heads=(32, 32), dtype="f16"))
                )
    gqa_seq = 64 if smoke else 4096
    gqa = (
        "attn_prefill",
        f"fmha_bf16_gqa32x8_d128_causal_s{gqa_seq}",
        lambda: bench.fmha(128, True, gqa_seq, heads=(32, 8), dtype="bf16"),
    )
    found.append(gqa)
    for batch in (1, 8):
        for kv in [64, 200] if smoke else [1024, 4096, 16384, 32768]:
            found.append(("attn_decode", f"decode_bf16_b{batch}_kv{kv}", lambda b=batch, kv=kv: bench.decode(b, kv)))
    return found


def _void(fn: Callable[[], object]) -> Run:
    def run() -> None:
        fn()

    return run


class _Bench:
    def __init__(self, peers: Any, interleaved: Callable[[dict[str, Run]], dict[str, float]], entry: Any, smoke: bool):
        self.peers, self.interleaved, self.entry, self.smoke = peers, interleaved, entry, smoke
        self.torch = peers.torch
        self.chain = 2 if smoke else 50

    def _pair(self, dtype: str, shape: tuple[int, ...]) -> tuple[Any, tile.Tensor]:
        t, x = self.peers.randn(getattr(tile, dtype), shape)
        return t, x

    def _check(self, got: tile.Tensor, want: Any, what: str) -> None:
        g = np.asarray(got.to_numpy(), np.float64).reshape(-1)
        w = want.float().cpu().numpy().astype(np.float64).reshape(-1)
        err = float(np.abs(g - w).max())
        if err > 2e-2 * max(1.0, float(np.abs(w).max())):
            raise AssertionError(f"{what}: Tile and the peer differ by {err:.3g}")

    def fmha(self, d: int, causal: bool, s: int, *, heads: tuple[int, int], dtype: str) -> dict[str, Any]:
        hq, hkv = heads
        batch = max(1, (256 if self.smoke else 16384) // s)
        tq, q = self._pair(dtype, (batch, hq, s, d))
        tk_, k = self._pair(dtype, (batch, hkv, s, d))
        tv, v = self._pair(dtype, (batch, hkv, s, d))
        out = tk.attention(q, k, v, causal=causal)  # tunes on the first call
        paths: dict[str, Run] = {"tile": _void(lambda: tk.attention(q, k, v, causal=causal))}
        paths["tile back to back"] = self._prefill_chain(q, k, v, causal)
        torch = self.torch
        if torch is not None:
            sdpa = torch.nn.functional.scaled_dot_product_attention
            gqa = {"enable_gqa": True} if hkv != hq else {}
            want = sdpa(tq, tk_, tv, is_causal=causal, **gqa)
            self._check(out, want, "attention vs torch SDPA")
            paths["torch"] = self.peers.sync(lambda: sdpa(tq, tk_, tv, is_causal=causal, **gqa))

            def torch_chain() -> None:
                for _ in range(self.chain):
                    sdpa(tq, tk_, tv, is_causal=causal, **gqa)
                torch.cuda.synchronize()

            paths["torch back to back"] = torch_chain
            if hkv == hq:
                paths |= self._cutile(tq, tk_, tv, causal, want)
        times = self.interleaved(paths)
        for key in [k_ for k_ in times if "back to back" in k_]:
            times[key] /= self.chain
        for family in ("cutile_python", "cutile_python back to back"):  # each form's best tile shape
            tried = {k_: v for k_, v in times.items() if k_.startswith(f"{family} (")}
            times = {k_: v for k_, v in times.items() if k_ not in tried}
            if tried:
                times[family] = min(tried.values())
        work = 4.0 * batch * hq * s * s * d / (2 if causal else 1)
        found: dict[str, Any] = self.entry(times, work, "TFLOP_per_s")
        for peer in ("torch", "cutile_python"):
            if f"{peer} back to back" in times:
                found[f"back_to_back_tile_vs_{peer}"] = times["tile back to back"] / times[f"{peer} back to back"]
        tuned = tk.autotune.tuner("attention", "").remembered()
        return found | {
            "shape": [batch, hq, hkv, s, d],
            "causal": causal,
            "tuned": {k_: str(c) for k_, c in tuned.items()},
        }

    def _cutile(self, q: Any, k: Any, v: Any, causal: bool, want: Any) -> dict[str, Run]:
        try:
            import cuda.tile as ct
            from cutile_peers import ct_fmha
        except ImportError:
            return {}
        torch = self.torch
        batch, heads, s, d = q.shape
        out = torch.empty_like(q)
        stream = torch.cuda.current_stream()
        found: dict[str, Run] = {}
        for bm, bn in ((128, 64), (128, 128)):
            args = (q, k, v, out, 1 / math.sqrt(d), d, heads, bm, bn, causal, s % bn == 0)
            grid = (math.ceil(s / bm), batch * heads, 1)

            def launch(grid: tuple[int, int, int] = grid, args: tuple[Any, ...] = args) -> None:
                ct.launch(stream, grid, ct_fmha, args)
                stream.synchronize()

            def chain(grid: tuple[int, int, int] = grid, args: tuple[Any, ...] = args) -> None:
                for _ in range(self.chain):
                    ct.launch(stream, grid, ct_fmha, args)
                stream.synchronize()

            launch()
            if float((out.float() - want.float()).abs().max()) > 2e-2:
                raise AssertionError(f"cuTile Python's FMHA ({bm}, {bn}) differs from torch SDPA")
            found[f"cutile_python ({bm}, {bn})"] = launch
            found[f"cutile_python back to back ({bm}, {bn})"] = chain
        return found

    def _prefill_chain(self, q: tile.Tensor, k: tile.Tensor, v: tile.Tensor, causal: bool) -> Run:
        """CHAIN ``attention_op`` launches chained with ``.then()`` and waited for once (each makes its own output,
        the previous one is dropped): the host's per-call work overlaps the kernels, as in bench_lang_fmha.py."""

        def run() -> None:
            op = tk.attention_op(q, k, v, causal=causal)
            for _ in range(self.chain - 1):
                op = op.then(lambda _: tk.attention_op(q, k, v, causal=causal))
            op.sync()

        return run

    def decode(self, batch: int, kv: int) -> dict[str, Any]:
        hq, hkv, d = 32, 8, 128
        tq, q = self._pair("bf16", (batch, hq, d))
        tk_, k = self._pair("bf16", (batch, hkv, kv, d))
        tv, v = self._pair("bf16", (batch, hkv, kv, d))
        lengths = [kv] * batch
        out = tk.decode_attention(q, k, v, lengths)
        paths: dict[str, Run] = {"tile": _void(lambda: tk.decode_attention(q, k, v, lengths))}
        paths["tile back to back"] = self._decode_chain(q, k, v, lengths)
        torch = self.torch
        if torch is not None:
            sdpa = torch.nn.functional.scaled_dot_product_attention
            q4 = tq[:, :, None, :]
            want = sdpa(q4, tk_, tv, enable_gqa=True)[:, :, 0]
            self._check(out, want, "decode_attention vs torch SDPA")
            paths["torch"] = self.peers.sync(lambda: sdpa(q4, tk_, tv, enable_gqa=True))

            def torch_chain() -> None:
                for _ in range(self.chain):
                    sdpa(q4, tk_, tv, enable_gqa=True)
                torch.cuda.synchronize()

            paths["torch back to back"] = torch_chain
        times = self.interleaved(paths)
        for key in ("tile back to back", "torch back to back"):
            if key in times:
                times[key] /= self.chain
        found: dict[str, Any] = self.entry(times, 2.0 * 2 * batch * hkv * kv * d, "GB_per_s")
        if "torch back to back" in times:
            found["back_to_back_tile_vs_torch"] = times["tile back to back"] / times["torch back to back"]
        return found | {"shape": [batch, hq, hkv, kv, d], "chain": self.chain}

    def _decode_chain(self, q: tile.Tensor, k: tile.Tensor, v: tile.Tensor, lengths: list[int]) -> Run:
        batch, hkv, kv, d = k.shape
        caches = [k.reshape(batch * hkv, kv, d).copy(), v.reshape(batch * hkv, kv, d).copy()]
        lens = tile.from_numpy(np.array(lengths, np.int32))

        def run() -> None:
            op = tk.decode_attention_op(q, caches[0], caches[1], lens)
            for _ in range(self.chain - 1):
                op = op.then(lambda out: tk.decode_attention_op(q, out[2], out[3], out[4]))
            op.sync()

        return run
