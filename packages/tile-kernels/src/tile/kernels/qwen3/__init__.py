"""Qwen3 inference on Tile: configs, weights (Hugging Face safetensors or seeded random), the model, sampling.

``python -m tile.kernels.qwen3 --model 4B`` runs it and prints prefill and decode tokens/s. Guide:
``docs/packages/qwen3.md``.
"""

from __future__ import annotations

from tile.kernels.qwen3.config import CONFIGS, TINY, Qwen3Config, config_for
from tile.kernels.qwen3.decode import DecodeGraph
from tile.kernels.qwen3.model import Qwen3, rope_tables
from tile.kernels.qwen3.sampling import Sampler
from tile.kernels.qwen3.tp import TPQwen3, local_config, shard_slices
from tile.kernels.qwen3.weights import WeightsError, load_checkpoint, random_weights, read_safetensors, save_checkpoint

__all__ = [
    "CONFIGS",
    "TINY",
    "DecodeGraph",
    "Qwen3",
    "Qwen3Config",
    "Sampler",
    "TPQwen3",
    "WeightsError",
    "config_for",
    "load_checkpoint",
    "local_config",
    "random_weights",
    "read_safetensors",
    "rope_tables",
    "save_checkpoint",
    "shard_slices",
]
