"""Choosing the next token from logits: greedy (argmax) or top-k with temperature, seeded."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from tile.frontend import ArgumentError

__all__ = ["Sampler"]


class Sampler:
    """Greedy when ``temperature == 0`` or ``top_k == 1``; else sample from the softmax of ``logits / temperature``
    over the ``top_k`` largest logits (all of them for ``top_k=0``), with a generator seeded by ``seed``.

    ``temperature`` is a finite real ``>= 0``, ``top_k`` an int ``>= 0`` (above the vocabulary: all of it), ``seed``
    what ``numpy.random.default_rng`` takes; anything else is refused (`ArgumentError`).
    """

    def __init__(self, temperature: float = 0.0, top_k: int = 0, seed: int = 0) -> None:
        where = f"Sampler(temperature={temperature!r}, top_k={top_k!r}, seed={seed!r})"
        try:
            self.temperature = float(temperature)
            self.top_k = operator.index(top_k)  # 2.5 is not a count of tokens
        except (TypeError, ValueError):
            raise ArgumentError(f"{where}: temperature must be a real number and top_k an int") from None
        if isinstance(temperature, bool) or isinstance(top_k, bool):
            raise ArgumentError(f"{where}: temperature must be a real number and top_k an int, not a bool")
        if not math.isfinite(self.temperature) or self.temperature < 0 or self.top_k < 0:
            raise ArgumentError(f"{where}: temperature must be finite and >= 0, top_k >= 0")
        try:
            self.rng = np.random.default_rng(seed)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"{where}: the seed is not one numpy takes ({exc}); pass an int >= 0") from None

    @property
    def greedy(self) -> bool:
        """Whether this sampler always takes the largest logit (the first on ties)."""
        return self.temperature == 0.0 or self.top_k == 1

    def __call__(self, logits: np.ndarray[Any, Any]) -> int:
        """The next token id for one row of logits, ``(vocab,)`` or ``(1, vocab)``.

        A ``-inf`` logit is never drawn, a ``+inf`` one always is (the largest ids tie); `ArgumentError` for an empty
        row, several rows, a NaN logit (a broken model output: no id can be chosen from it) or every logit ``-inf``.
        """
        row = np.asarray(logits, dtype=np.float64)
        if row.ndim == 0 or row.size == 0 or row.size != row.shape[-1]:
            raise ArgumentError(f"Sampler: logits of shape {list(row.shape)}; pass one non-empty row (vocab,) per call")
        row = row.reshape(-1)
        if np.isnan(row).any():
            raise ArgumentError(f"Sampler: logit {int(np.argmax(np.isnan(row)))} is NaN; the model's output is broken")
        if self.greedy:
            return int(np.argmax(row))
        k = row.size if self.top_k == 0 else min(self.top_k, row.size)
        top = np.argpartition(-row, k - 1)[:k]
        top = top[np.argsort(-row[top], kind="stable")]
        best = row[top[0]]
        if best == -np.inf:
            raise ArgumentError("Sampler: every logit is -inf; no token can be drawn")
        if best == np.inf:  # the softmax's limit: the +inf logits share all the mass
            p = (row[top] == np.inf).astype(np.float64)
        else:  # scaled after subtracting the largest: a tiny temperature sends the others to -inf, not all to +inf
            with np.errstate(over="ignore"):
                p = np.exp((row[top] - best) / self.temperature)
        return int(top[self.rng.choice(k, p=p / p.sum())])
