"""The check that a `Qwen3`'s KV caches can be taken by a pass, made before any of them moves.

A pass moves each layer's caches into its launches in turn; a cache the kernels refuse (replaced by one of another
shape, moved or freed elsewhere, the same tensor as another layer's) would fail the chain at that layer, after the
earlier layers' caches were moved into it: those would be lost with it. `check_caches` refuses the pass first.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tile.frontend import ArgumentError, Tensor, bf16

__all__ = ["check_caches"]


def check_caches(k_cache: Sequence[object], v_cache: Sequence[object], shape: tuple[int, ...], device: object) -> None:
    """Raise `ArgumentError` unless every cache is a live, contiguous bf16 `Tensor` of ``shape`` on ``device``, one a
    layer for keys and one for values, none overlapping another's memory."""
    layers = len(k_cache)
    if len(v_cache) != layers:
        raise ArgumentError(
            f"Qwen3: {len(k_cache)} key caches but {len(v_cache)} value caches; the model keeps one of each a layer"
        )
    spans: list[tuple[int, int, str]] = []
    for kind, caches in (("k_cache", k_cache), ("v_cache", v_cache)):
        for i, cache in enumerate(caches):
            where = f"Qwen3.{kind}[{i}]"
            if not isinstance(cache, Tensor) or cache.moved:
                what = "moved or freed" if isinstance(cache, Tensor) else f"a {type(cache).__name__}"
                raise ArgumentError(
                    f"{where} is {what}; the caches are the model's (a pass moves them), give it back a bf16 tensor of "
                    f"shape {list(shape)} or make a new Qwen3"
                )
            if cache.dtype != bf16 or tuple(cache.shape) != shape or cache.device != device or not cache.is_contiguous:
                raise ArgumentError(
                    f"{where} is {cache.dtype.name} {list(cache.shape)} on {cache.device}; the model's caches are "
                    f"contiguous bf16 {list(shape)} on {device}"
                )
            spans.append((cache.data_ptr(), cache.data_ptr() + cache.nbytes, where))
    spans.sort()
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            raise ArgumentError(f"{first} and {second} share memory; every layer's keys and values need their own")
