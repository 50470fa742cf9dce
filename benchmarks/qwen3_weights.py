"""`SeededWeights`: seeded random Qwen3 weights made one tensor at a time, when read, so a 32B model never exists
on the host as a whole (64 GB of bf16): `tile.kernels.qwen3.Qwen3` reads its weights name by name and uploads
each (fused) matrix at once, so the host holds about one layer's matrices at a time.

Scales follow `tile.kernels.qwen3.random_weights` (matrices normal with variance ``1 / fan_in``, embeddings standard
normal, norm weights ``1 + 0.1 * normal``), but each tensor is seeded by ``(seed, its index)``: reading a name twice,
or in any order, gives the same array, so every contender of a benchmark (Tile, torch, transformers) gets the same
model. A matrix larger than `POOL` elements is a read-only strided window over a short seeded vector (row ``r`` is
``v[STEP * r : STEP * r + columns]``): drawing 25 billion normals on the host would take minutes, and the one copy
of each matrix is the consumer's (Tile's upload, torch's), so the host writes each weight once. The values are for
timing, not for quality.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import ml_dtypes
import numpy as np

from tile.kernels.qwen3 import Qwen3Config

POOL = 1 << 20
"""Elements of the largest tensor drawn value by value."""
STEP = 61
"""Elements between the starts of consecutive rows of a windowed matrix (prime, so rows do not line up)."""


class SeededWeights(Mapping[str, np.ndarray[Any, Any]]):
    """The weights of ``config`` by checkpoint name (`Qwen3Config.weight_shapes`), each made when read."""

    def __init__(self, config: Qwen3Config, seed: int = 0) -> None:
        self.config, self.seed = config, seed
        self._shapes = config.weight_shapes()
        self._index = {name: i for i, name in enumerate(self._shapes)}

    def __getitem__(self, name: str) -> np.ndarray[Any, Any]:
        shape = self._shapes[name]
        rng = np.random.default_rng([self.seed, self._index[name]])
        count = int(np.prod(shape, dtype=np.int64))
        scale = np.float32(1.0 if len(shape) == 1 or "embed_tokens" in name else shape[1] ** -0.5)
        if count <= POOL:
            values = rng.standard_normal(count, dtype=np.float32) * scale
            values = 1.0 + np.float32(0.1) * values if len(shape) == 1 else values
            small: np.ndarray[Any, Any] = values.astype(ml_dtypes.bfloat16).reshape(shape)
            return small
        rows, columns = shape
        values = rng.standard_normal(STEP * (rows - 1) + columns, dtype=np.float32) * scale
        base = values.astype(ml_dtypes.bfloat16)
        item = base.itemsize
        return np.lib.stride_tricks.as_strided(base, shape, (STEP * item, item), writeable=False)

    def __contains__(self, name: object) -> bool:
        return name in self._shapes  # (Mapping's default would make the tensor to find out)

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)
