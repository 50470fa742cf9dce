"""Choosing the next token from logits: greedy (argmax) or top-k with temperature, seeded."""

from __future__ import annotations

from typing import Any

import numpy as np

from tile.frontend import ArgumentError

__all__ = ["Sampler"]


class Sampler:
    """Greedy when ``temperature == 0`` or ``top_k == 1``; else sample from the softmax of ``logits / temperature``
    over the ``top_k`` largest logits (all of them for ``top_k=0``), with a generator seeded by ``seed``."""

    def __init__(self, temperature: float = 0.0, top_k: int = 0, seed: int = 0) -> None:
        if temperature < 0 or top_k < 0:
            raise ArgumentError(f"Sampler: temperature ({temperature}) and top_k ({top_k}) must be >= 0")
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.rng = np.random.default_rng(seed)

    @property
    def greedy(self) -> bool:
        """Whether this sampler always takes the largest logit (the first on ties)."""
        return self.temperature == 0.0 or self.top_k == 1

    def __call__(self, logits: np.ndarray[Any, Any]) -> int:
        """The next token id for one row of logits ``(vocab,)``."""
        row = np.asarray(logits, dtype=np.float64).reshape(-1)
        if self.greedy:
            return int(np.argmax(row))
        k = row.size if self.top_k == 0 else min(self.top_k, row.size)
        top = np.argpartition(-row, k - 1)[:k]
        top = top[np.argsort(-row[top], kind="stable")]
        z = row[top] / self.temperature
        p = np.exp(z - z.max())
        return int(top[self.rng.choice(k, p=p / p.sum())])
