"""`TorchQwen3`: the Qwen3 forward pass in plain torch ops (eager), the ``torch_eager`` decode contender of
``bench_qwen3.py``, and `torch_rate`, its greedy decode time per token."""

from __future__ import annotations

from typing import Any

from qwen3_hf import bf16_to_torch, decode_rate

from tile.kernels.qwen3 import Qwen3Config

__all__ = ["TorchQwen3", "torch_rate"]


class TorchQwen3:
    """Qwen3 in plain torch ops (eager), with a preallocated KV cache."""

    def __init__(self, torch: Any, c: Qwen3Config, w: dict[str, Any], max_seq: int) -> None:
        self.t, self.c = torch, c
        self.w = {n: bf16_to_torch(torch, a) for n, a in w.items()}
        shape = (c.num_hidden_layers, 1, c.num_key_value_heads, max_seq, c.head_dim)
        self.k = torch.zeros(shape, dtype=torch.bfloat16, device="cuda")
        self.v = torch.zeros_like(self.k)
        half = c.head_dim // 2
        inv = c.rope_theta ** (-torch.arange(half, dtype=torch.float64) * 2 / c.head_dim)
        ang = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv[None]
        self.cos, self.sin = ang.cos().float().cuda(), ang.sin().float().cuda()
        self.length = 0

    def _norm(self, x: Any, w: Any) -> Any:
        x32 = x.float()
        return (x32 * self.t.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.c.rms_norm_eps) * w.float()).to(x.dtype)

    def _rope(self, x: Any, pos: slice) -> Any:  # (1, heads, T, hd)
        a, b = x.float().chunk(2, -1)
        cos, sin = self.cos[pos], self.sin[pos]
        return self.t.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)

    def forward(self, ids: list[int]) -> Any:
        t, c, w, fn = self.t, self.c, self.w, self.t.nn.functional
        n, p0 = len(ids), self.length
        pos = slice(p0, p0 + n)
        x = w["model.embed_tokens.weight"][t.tensor(ids, device="cuda")][None]
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = (h @ w[p + "self_attn.q_proj.weight"].T).view(1, n, -1, c.head_dim)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).view(1, n, -1, c.head_dim)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).view(1, n, -1, c.head_dim)
            q = self._rope(self._norm(q, w[p + "self_attn.q_norm.weight"]).transpose(1, 2), pos)
            self.k[i, :, :, pos] = self._rope(self._norm(k, w[p + "self_attn.k_norm.weight"]).transpose(1, 2), pos)
            self.v[i, :, :, pos] = v.transpose(1, 2)
            kk, vv = self.k[i, :, :, : p0 + n], self.v[i, :, :, : p0 + n]
            mask = t.ones(n, p0 + n, dtype=t.bool, device="cuda").tril(p0)
            o = fn.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=True)
            x = x + o.transpose(1, 2).reshape(1, n, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (fn.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
        self.length += n
        head = w["model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"]
        return (self._norm(x[:, -1], w["model.norm.weight"]) @ head.T).float()[0]


def torch_rate(torch: Any, tm: TorchQwen3, prompt: list[int], tokens: int) -> float:
    """Seconds per greedy decode step of the torch model after ``prompt``."""
    with torch.no_grad():
        first = int(tm.forward(prompt).argmax())
        return decode_rate(lambda tok: int(tm.forward([tok]).argmax()), first, tokens, torch.cuda.synchronize)
