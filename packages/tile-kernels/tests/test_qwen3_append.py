"""Qwen3's parallel KV-cache append of a multi-token pass (`append_kv_chunks`, one block per KV head and 16 cache
positions) on the CPU interpreter: the serial `append_kv`'s writes bit for bit, nothing else in the cache touched, and
a position past the cache faults."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tile.frontend as tile
from tile.kernels.qwen3 import TINY, _ops, rope_tables

Array = np.ndarray[Any, Any]
KV, HD, S = TINY.num_key_value_heads, TINY.head_dim, 64


def _inputs(t: int, seed: int) -> tuple[Array, Array, Array, Array]:
    """Fused q/k/v rows of ``t`` tokens, the k norm weight, and two caches of random (sentinel) rows."""
    rng = np.random.default_rng(seed)

    def bf16(*shape: int) -> Array:
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)

    return bf16(t, (TINY.num_attention_heads + 2 * KV) * HD), bf16(1, HD), bf16(KV, S, HD), bf16(KV, S, HD)


def _append(fn: Any, inputs: tuple[Array, Array, Array, Array], pos: int) -> tuple[Array, Array]:
    qkv, w, kc, vc = inputs
    cos, sin = (tile.from_numpy(a) for a in rope_tables(TINY, S))
    at = tile.from_numpy(np.array([pos], np.int32))
    caches = (tile.from_numpy(kc), tile.from_numpy(vc))
    out = fn(*caches, tile.from_numpy(qkv), tile.from_numpy(w), offset=4, cos=cos, sin=sin, pos=at, eps=1e-6).sync()
    return out[0].unpartition().to_numpy(), out[1].unpartition().to_numpy()


@pytest.mark.parametrize(("t", "pos"), [(37, 13), (16, 16), (2, 62), (64, 0)])
def test_chunked_append_writes_what_the_serial_one_does(t: int, pos: int) -> None:
    inputs = _inputs(t, seed=t + pos)
    serial = _append(_ops.append_kv, inputs, pos)
    chunks = _append(_ops.append_kv_chunks, inputs, pos)
    for want, got, before in zip(serial, chunks, inputs[2:], strict=True):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
        kept = np.r_[0:pos, pos + t : S]
        np.testing.assert_array_equal(got[:, kept].view(np.uint16), before[:, kept].view(np.uint16))
        assert not np.array_equal(got[:, pos : pos + t], before[:, pos : pos + t])


def test_chunked_append_faults_on_a_position_past_the_cache() -> None:
    with pytest.raises(tile.KernelFaultError, match="outside the cache"):
        _append(_ops.append_kv_chunks, _inputs(5, seed=0), S - 4)
