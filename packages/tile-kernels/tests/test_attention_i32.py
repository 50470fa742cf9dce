"""Device values near the ends of i32 in the decode and KV-append kernels (CPU interpreter): the in-kernel sums of a
length (or position) read from data with a host scalar must not wrap before their clamp or check, and the host side
refuses what it can see."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
import tile.kernels as tk
from helpers_kernels import array, assert_within, tensor
from test_attention import _decode_ref, bound
from tile.frontend import ArgumentError
from tile.kernels._source import kernels

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
S = 40


@pytest.mark.parametrize("splits", [1, 3])  # decode_one, and decode_split + decode_combine
@pytest.mark.parametrize(
    ("length", "plus", "rows"),
    [
        (I32_MAX, 1, S),  # wrapped to I32_MIN: clamped to 0 (zeros) instead of the whole cache
        (I32_MAX - 5, I32_MAX, S),
        (I32_MIN, -1, 0),  # wrapped to I32_MAX: clamped to S (the whole cache) instead of nothing
        (-3, I32_MIN, 0),
        (I32_MAX, I32_MIN, 0),  # -1: no wrap, the plain clamp
    ],
)
def test_decode_clamps_a_device_length_whose_sum_would_wrap(length: int, plus: int, rows: int, splits: int) -> None:
    """``lengths[b] + plus`` is clamped into ``[0, S]`` in the kernel; near the ends of i32 the sum wrapped (a length
    of ``2**31 - 1`` with ``plus=1`` read nothing, ``-2**31`` with ``plus=-1`` read the whole cache)."""
    rng = np.random.default_rng(length % 97 + splits)
    q, kc, vc = array(rng, "bf16", (2, 4, 64)), array(rng, "bf16", (2, 2, S, 64)), array(rng, "bf16", (2, 2, S, 64))
    lengths = tile.from_numpy(np.array([length, 7], np.int32))  # a device tensor: not read on the host
    out = tk.decode_attention_op(tensor(q), tensor(kc), tensor(vc), lengths, plus=plus, splits=splits).sync()
    got = out[0].unpartition().to_numpy().reshape(2, 4, 64)
    ref, mag = _decode_ref(q, kc, vc, [rows, min(max(7 + plus, 0), S)])
    assert_within(got, ref, bound("bf16", ref, mag))


@pytest.mark.parametrize(
    ("plus", "message"),
    [
        (2**31, r"decode_attention_op: plus is 2147483648, outside the i32 range"),
        (I32_MIN - 1, r"decode_attention_op: plus is -2147483649, outside the i32 range"),
        (1.5, r"decode_attention_op: plus must be an integer, got float 1\.5"),
        (True, r"decode_attention_op: plus must be an integer, got bool True"),
    ],
)
def test_decode_refuses_a_plus_outside_i32(plus: Any, message: str) -> None:
    q, kc = tile.zeros(tile.bf16, [1, 4 * 64]), tile.zeros(tile.bf16, [2, 8, 64])
    with pytest.raises(ArgumentError, match=message):
        tk.decode_attention_op(q, kc, kc, tile.from_numpy(np.array([3], np.int32)), plus=plus)


@pytest.mark.parametrize("position", [I32_MAX, I32_MAX - 1])
def test_kv_append_asserts_a_position_whose_end_would_wrap(position: int) -> None:
    """The kernel checked ``p0 + n_new <= S`` in i32: a position near ``2**31`` wrapped the end negative and passed,
    and only the sub-tile store's own check stopped the write. It is now ``p0 <= S - n_new``."""
    caches = [tile.zeros(tile.f16, [2, 8, 64]).partition([1, 8, 64]) for _ in range(2)]
    new = tile.zeros(tile.f16, [2, 3, 64])
    pos = tile.from_numpy(np.array([position], np.int32))
    with pytest.raises(tile.KernelFaultError, match="append_kv: a position is outside the cache"):
        kernels("_attention_kernels").kv_append(*caches, new, new, pos, HKV=2).sync()


def test_append_kv_refuses_host_positions_near_i32() -> None:
    kc, new = tile.zeros(tile.f16, [2, 8, 64]), tile.zeros(tile.f16, [2, 3, 64])
    with pytest.raises(ArgumentError, match=r"positions holds 2147483647, outside \[0, 5\]"):
        tk.append_kv(kc, tile.zeros(tile.f16, [2, 8, 64]), new, new, np.array([I32_MAX], np.int64))
    with pytest.raises(ArgumentError, match=r"positions holds 4294967296, outside \[0, 5\]"):
        tk.append_kv(kc, tile.zeros(tile.f16, [2, 8, 64]), new, new, [2**32])  # would wrap to 0 as i32
