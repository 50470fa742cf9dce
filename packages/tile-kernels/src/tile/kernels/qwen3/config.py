"""Qwen3 dense model shapes: `Qwen3Config` and the published sizes (`CONFIGS`), plus `TINY` for tests.

The numbers are those of the public Hugging Face ``config.json`` files of ``Qwen/Qwen3-{0.6B,...,32B}``: head dim 128,
vocabulary 151936, RoPE theta 1e6, RMSNorm eps 1e-6, q/k RMSNorm on every head, SwiGLU MLP, no biases, and tied input
and output embeddings for 0.6B, 1.7B and 4B only.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from tile.frontend import ArgumentError

__all__ = ["CONFIGS", "TINY", "Qwen3Config", "config_for"]


@dataclass(frozen=True)
class Qwen3Config:
    """The shape of a Qwen3 dense model (the fields of Hugging Face's ``Qwen3Config`` that the forward pass uses)."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    head_dim: int = 128
    vocab_size: int = 151936
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 40960

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (type(value) is not int or value < 1):
                raise ArgumentError(f"Qwen3Config {self.name}: {f.name} must be a positive int, got {value!r}")
            if f.type == "float" and (
                isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf
            ):
                raise ArgumentError(f"Qwen3Config {self.name}: {f.name} must be a finite number > 0, got {value!r}")
            if f.type == "bool" and not isinstance(value, bool):
                raise ArgumentError(f"Qwen3Config {self.name}: {f.name} must be true or false, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ArgumentError(
                f"Qwen3Config {self.name}: {self.num_attention_heads} attention heads do not split into groups of "
                f"{self.num_key_value_heads} KV heads; the head count must be a multiple of the KV head count"
            )
        if self.head_dim < 2 or self.head_dim & (self.head_dim - 1):
            raise ArgumentError(f"Qwen3Config {self.name}: head_dim {self.head_dim} must be a power of two >= 2")

    @property
    def group(self) -> int:
        """Query heads per KV head (grouped-query attention)."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def q_size(self) -> int:
        """Width of the query projection (heads x head dim)."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of the key (and of the value) projection."""
        return self.num_key_value_heads * self.head_dim

    def weight_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor of a Hugging Face checkpoint of this model, by its name there, with its shape."""
        h, i = self.hidden_size, self.intermediate_size
        shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (self.vocab_size, h)}
        for n in range(self.num_hidden_layers):
            p = f"model.layers.{n}."
            shapes |= {
                p + "self_attn.q_proj.weight": (self.q_size, h),
                p + "self_attn.k_proj.weight": (self.kv_size, h),
                p + "self_attn.v_proj.weight": (self.kv_size, h),
                p + "self_attn.o_proj.weight": (h, self.q_size),
                p + "self_attn.q_norm.weight": (self.head_dim,),
                p + "self_attn.k_norm.weight": (self.head_dim,),
                p + "mlp.gate_proj.weight": (i, h),
                p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i),
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
            }
        shapes["model.norm.weight"] = (h,)
        if not self.tie_word_embeddings:
            shapes["lm_head.weight"] = (self.vocab_size, h)
        return shapes

    def num_parameters(self) -> int:
        """Parameters of the model (a tied output embedding counted once)."""
        total = 0
        for shape in self.weight_shapes().values():
            count = 1
            for d in shape:
                count *= d
            total += count
        return total

    def to_hf(self) -> dict[str, Any]:
        """The ``config.json`` fields of a Hugging Face checkpoint of this shape (``Qwen3ForCausalLM``)."""
        out = {k: v for k, v in asdict(self).items() if k != "name"}
        out |= {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu"}
        out |= {"attention_bias": False, "torch_dtype": "bfloat16"}
        return out

    @classmethod
    def from_hf(cls, data: dict[str, Any], name: str = "checkpoint") -> Qwen3Config:
        """The config of a Hugging Face ``config.json`` dict; raises `ArgumentError` for another architecture or a
        field of the wrong kind (a count that is not a positive int, a string for a number or a flag)."""
        if not isinstance(data, dict):
            raise ArgumentError(f"{name}: config.json holds a {type(data).__name__}, not a JSON object")
        if data.get("model_type", "qwen3") != "qwen3":
            raise ArgumentError(
                f"{name}: model_type is {data.get('model_type')!r}; only dense Qwen3 ('qwen3') runs here"
            )
        rope = data.get("rope_parameters") or {}
        if not isinstance(rope, dict):
            raise ArgumentError(f"{name}: rope_parameters is {rope!r}, not a JSON object")
        theta: Any = data.get("rope_theta", rope.get("rope_theta", 1_000_000.0))
        scaling = data.get("rope_scaling") or rope.get("rope_type", "default")
        if scaling not in (None, "default"):
            raise ArgumentError(f"{name}: RoPE scaling {scaling!r} is not supported (plain RoPE only)")
        try:
            kwargs = {
                f.name: data[f.name] for f in fields(cls) if f.name not in ("name", "rope_theta") and f.name in data
            }
            theta = float(theta) if type(theta) is int else theta  # 1000000 in many config.json files
            return cls(name=name, rope_theta=theta, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{name}: config.json is not a Qwen3 config ({exc})") from None

    @classmethod
    def from_dir(cls, path: str | Path) -> Qwen3Config:
        """The config of the checkpoint directory ``path`` (its ``config.json``)."""
        file = Path(path) / "config.json"
        if not file.is_file():
            raise ArgumentError(f"{path}: no config.json; pass --model with a size, or a full checkpoint directory")
        try:
            data = json.loads(file.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ArgumentError(f"{file}: cannot be read as JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
        return cls.from_hf(data, name=Path(path).name)


CONFIGS: dict[str, Qwen3Config] = {
    c.name: c
    for c in (
        Qwen3Config("0.6B", 1024, 28, 16, 8, 3072, tie_word_embeddings=True),
        Qwen3Config("1.7B", 2048, 28, 16, 8, 6144, tie_word_embeddings=True),
        Qwen3Config("4B", 2560, 36, 32, 8, 9728, tie_word_embeddings=True),
        Qwen3Config("8B", 4096, 36, 32, 8, 12288),
        Qwen3Config("14B", 5120, 40, 40, 8, 17408),
        Qwen3Config("32B", 5120, 64, 64, 8, 25600),
    )
}
"""The published Qwen3 dense sizes, by name ("0.6B" ... "32B")."""

TINY = Qwen3Config(
    "tiny",
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    head_dim=16,
    vocab_size=256,
    max_position_embeddings=256,
)
"""A two-layer model for tests on the CPU interpreter (GQA groups of 2, head dim 16, vocabulary 256)."""


def config_for(name: str) -> Qwen3Config:
    """The config called ``name`` ("0.6B" ... "32B", or "tiny"); `ArgumentError` names the choices otherwise."""
    if name == "tiny":
        return TINY
    key = name.removeprefix("Qwen3-").upper()
    if key not in CONFIGS:
        raise ArgumentError(f"unknown Qwen3 size {name!r}; choose one of {', '.join(CONFIGS)} or 'tiny'")
    return CONFIGS[key]
