"""The Qwen3 forward pass on Tile: `Qwen3` holds the weights and the KV cache, runs prefill and decode.

One layer is eleven launches: RMSNorm (`tk.rmsnorm`), the fused q/k/v projection (`tk.matmul` on the concatenated
weight), q RMSNorm+RoPE, k RMSNorm+RoPE into the cache, v into the cache, attention, the output projection with the
residual add fused (`tk.matmul(..., residual=x)`), RMSNorm, the fused gate/up projection, the SiLU-gated product and
the down projection with the residual fused. Activations are bf16 between launches, every kernel computes in f32.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

import tile.frontend as tile
import tile.kernels as tk
from tile.frontend import ArgumentError, Tensor, bf16, f32
from tile.kernels import _args
from tile.kernels.qwen3 import _ops
from tile.kernels.qwen3.config import Qwen3Config

__all__ = ["Qwen3", "rope_tables"]


def rope_tables(config: Qwen3Config, positions: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``cos`` and ``sin`` of RoPE angles ``p * theta ** (-2i / head_dim)``, ``(positions, head_dim // 2)`` f32,
    computed in float64."""
    half = config.head_dim // 2
    inv = config.rope_theta ** (-np.arange(half, dtype=np.float64) * 2.0 / config.head_dim)
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@dataclass
class _Layer:
    ln1: Tensor
    wqkv: Tensor
    q_norm: Tensor
    k_norm: Tensor
    wo: Tensor
    ln2: Tensor
    wgu: Tensor
    wd: Tensor


class Qwen3:
    """A Qwen3 model on the current Tile backend, with a KV cache of ``max_seq`` positions (a power of two).

    Parameters
    ----------
    config
        The model's shape.
    weights
        Checkpoint tensors by their Hugging Face names (see `weights.load_checkpoint`, `weights.random_weights`).
    max_seq
        Positions the cache holds (prompt plus generated tokens); rounded up to a power of two.
    """

    def __init__(self, config: Qwen3Config, weights: dict[str, np.ndarray[Any, Any]], max_seq: int = 1024) -> None:
        missing = [n for n in config.weight_shapes() if n not in weights]
        if missing:
            raise ArgumentError(f"Qwen3: weights lack {len(missing)} tensor(s), first {missing[0]!r}")
        self.config = config
        self.max_seq = _args.next_pow2(max(2, max_seq))

        def put(*names: str) -> Tensor:
            parts = [np.asarray(weights[n], dtype=ml_dtypes.bfloat16) for n in names]
            return tile.from_numpy(np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0]))

        c = config
        self.embed = put("model.embed_tokens.weight")
        self.layers = []
        for n in range(c.num_hidden_layers):
            p = f"model.layers.{n}."
            a, m = p + "self_attn.", p + "mlp."
            self.layers.append(
                _Layer(
                    ln1=put(p + "input_layernorm.weight"),
                    wqkv=put(a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"),
                    q_norm=put(a + "q_norm.weight").reshape(1, c.head_dim),
                    k_norm=put(a + "k_norm.weight").reshape(1, c.head_dim),
                    wo=put(a + "o_proj.weight"),
                    ln2=put(p + "post_attention_layernorm.weight"),
                    wgu=put(m + "gate_proj.weight", m + "up_proj.weight"),
                    wd=put(m + "down_proj.weight"),
                )
            )
        self.norm = put("model.norm.weight")
        self.lm_head = self.embed if c.tie_word_embeddings else put("lm_head.weight")
        cos, sin = rope_tables(c, self.max_seq)
        self.cos, self.sin = tile.from_numpy(cos), tile.from_numpy(sin)
        self.k_cache = [tile.zeros(bf16, [c.num_key_value_heads, self.max_seq, c.head_dim]) for _ in self.layers]
        self.v_cache = [tile.zeros(bf16, [c.num_key_value_heads, self.max_seq, c.head_dim]) for _ in self.layers]
        self.length = 0
        self.block = min(64, self.max_seq)

    def weight_bytes(self) -> int:
        """Bytes of weights one token reads (every matrix and vector once; a tied embedding counted once)."""
        return 2 * self.config.num_parameters()

    def reset(self) -> None:
        """Forget the cached sequence (the next `forward` starts at position 0)."""
        self.length = 0

    def forward(self, ids: Sequence[int], *, all_logits: bool = False) -> np.ndarray[Any, Any]:
        """Run ``ids`` at the next positions of the cached sequence and return f32 logits.

        Returns the last token's logits ``(vocab,)``, or every token's ``(len(ids), vocab)`` with ``all_logits``.
        Raises `ArgumentError` if the cache cannot hold the tokens or an id is outside the vocabulary.
        """
        ids = [int(i) for i in ids]
        n, c = len(ids), self.config
        if n == 0:
            raise ArgumentError("Qwen3.forward: no tokens given")
        if self.length + n > self.max_seq:
            raise ArgumentError(
                f"Qwen3.forward: {self.length} cached + {n} new tokens exceed the cache of {self.max_seq} positions; "
                "make the model with a larger max_seq"
            )
        pos = tile.from_numpy(np.array([self.length], dtype=np.int32))
        x = _ops.embed(
            self.embed, tile.from_numpy(np.array(ids, dtype=np.int32)), n_ids=n, vocab=c.vocab_size, ids_host=ids
        )
        for i, layer in enumerate(self.layers):
            x = self._layer(i, layer, x, pos)
        self.length += n
        rows = x if all_logits else x[n - 1 : n]
        h = tk.rmsnorm(rows, self.norm, eps=c.rms_norm_eps)
        logits = tk.matmul(h, self.lm_head.T, out_dtype=f32).to_numpy()
        return logits if all_logits else logits[0]

    def _layer(self, i: int, layer: _Layer, x: Tensor, pos: Tensor) -> Tensor:
        c, n = self.config, x.shape[0]
        nq, nkv, eps = c.num_attention_heads, c.num_key_value_heads, c.rms_norm_eps
        h = tk.rmsnorm(x, layer.ln1, eps=eps)
        qkv = tk.matmul(h, layer.wqkv.T).reshape(n, nq + 2 * nkv, c.head_dim)
        tables = {"cos": self.cos, "sin": self.sin, "pos": pos}
        q = _ops.prep_q(qkv[:, :nq], layer.q_norm, eps=eps, **tables)
        k_new, v_new = qkv[:, nq : nq + nkv], qkv[:, nq + nkv :]
        self.k_cache[i] = _ops.append_kv(self.k_cache[i], k_new, layer.k_norm, eps=eps, rope=True, **tables)
        self.v_cache[i] = _ops.append_kv(self.v_cache[i], v_new, layer.k_norm, eps=eps, rope=False, **tables)
        del qkv, k_new, v_new
        o = _ops.attention(q, self.k_cache[i], self.v_cache[i], pos=pos, group=c.group, block=self.block)
        x = tk.matmul(o.reshape(n, c.q_size), layer.wo.T, residual=x)
        h = tk.rmsnorm(x, layer.ln2, eps=eps)
        gu = tk.matmul(h, layer.wgu.T)
        act = _ops.swiglu(gu[:, : c.intermediate_size], gu[:, c.intermediate_size :])
        return tk.matmul(act, layer.wd.T, residual=x)
