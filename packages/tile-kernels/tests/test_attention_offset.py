"""attention's causal ``offset`` (queries inside a longer key sequence, such as a KV cache) and its token-major rows
form ``(Sq, Hq * D)`` on the CPU interpreter: float64 references, odd lengths, GQA, a chain with a tensor in flight,
keys past the causal limit never loaded, and the refusals."""

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
from test_attention import bound, reference
from tile.frontend import ArgumentError

Array = np.ndarray[Any, Any]
TILES = tk.Config.of(BM=16, BN=16)  # the interpreter's default tiles, named so the tests can place keys past them


def rows(heads: Array) -> Array:
    """``(H, S, D)`` as token-major rows ``(S, H * D)``."""
    h, s, d = heads.shape
    return np.ascontiguousarray(heads.transpose(1, 0, 2).reshape(s, h * d))


def poison_past(k: Array, v: Array, limit: int) -> tuple[Array, Array]:
    """``k`` and ``v`` with NaN in every key tile after the one holding key position ``limit - 1``: a kernel that
    loaded one of those tiles would put NaN into the output (``0 * NaN`` in the PV product)."""
    k, v = k.copy(), v.copy()
    first = -(-limit // TILES["BN"]) * TILES["BN"]
    k[:, first:], v[:, first:] = np.nan, np.nan
    return k, v


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize(
    "case",  # query heads, KV heads, head dim, queries, keys, offset
    [
        (4, 2, 16, 19, 64, 21),  # GQA 2, two query tiles (the second partial), keys far past the limit
        (3, 1, 32, 7, 40, 0),  # GQA 3, the first chunk of a cache
        (2, 2, 64, 33, 53, 20),  # no GQA, odd key count (EVEN_K false), offset + Sq == Sk (bottom-right)
        (2, 1, 16, 1, 37, 36),  # one query at the last position
    ],
)
def test_offset_matches_the_reference(dtype: str, case: tuple[int, int, int, int, int, int]) -> None:
    hq, hkv, d, sq, sk, offset = case
    rng = np.random.default_rng(sq * sk + d)
    q, k, v = array(rng, dtype, (hq, sq, d)), array(rng, dtype, (hkv, sk, d)), array(rng, dtype, (hkv, sk, d))
    ref, mag = reference(q[None], k[None], v[None], True, offset=offset)
    limit = bound(dtype, ref[0], mag[0])
    k, v = poison_past(k, v, offset + sq)
    heads = tk.attention(tensor(q), tensor(k), tensor(v), causal=True, offset=offset, config=TILES)
    assert heads.shape == (hq, sq, d)
    assert_within(heads.to_numpy(), ref[0], limit)
    got = tk.attention(tensor(rows(q)), tensor(k), tensor(v), causal=True, offset=offset, config=TILES)
    assert got.shape == (sq, hq * d)
    assert_within(got.to_numpy(), rows(ref[0]), rows(limit))


def test_default_offset_is_bottom_right_and_rows_match_heads() -> None:
    rng = np.random.default_rng(3)
    q, k, v = array(rng, "bf16", (4, 21, 16)), array(rng, "bf16", (2, 30, 16)), array(rng, "bf16", (2, 30, 16))
    for causal in (False, True):
        want = tk.attention(tensor(q), tensor(k), tensor(v), causal=causal, config=TILES).to_numpy()
        got = tk.attention(tensor(rows(q)), tensor(k), tensor(v), causal=causal, config=TILES).to_numpy()
        np.testing.assert_array_equal(got, rows(want))  # the same tiles and arithmetic, moved in memory
    explicit = tk.attention(tensor(q), tensor(k), tensor(v), causal=True, offset=9, config=TILES).to_numpy()
    np.testing.assert_array_equal(explicit, want)


def test_rows_in_flight_in_a_chain() -> None:
    # The model's use: q rows made by the previous launch (in flight: moved in, no view made), the caches borrowed,
    # the output rows handed on. Twice attention in one chain equals the two eager calls bit for bit.
    rng = np.random.default_rng(4)
    q, k, v = array(rng, "bf16", (4, 9, 16)), array(rng, "bf16", (2, 32, 16)), array(rng, "bf16", (2, 32, 16))
    tk_, tv = tensor(k), tensor(v)

    def again(out: tuple[Any, ...]) -> Any:
        return tk.attention_op(out[0].unpartition(), tk_, tv, causal=True, offset=5, config=TILES)

    first = tk.attention_op(tensor(rows(q)), tk_, tv, causal=True, offset=5, config=TILES)
    got = first.then(again).sync()[0].unpartition().to_numpy()
    once = tk.attention(tensor(rows(q)), tk_, tv, causal=True, offset=5, config=TILES)
    twice = tk.attention(once, tk_, tv, causal=True, offset=5, config=TILES).to_numpy()
    np.testing.assert_array_equal(got, twice)
    ref, mag = reference(q[None], k[None], v[None], True, offset=5)
    assert_within(once.to_numpy(), rows(ref[0]), rows(bound("bf16", ref[0], mag[0])))


@pytest.mark.parametrize(
    ("q_shape", "k_shape", "kwargs", "message"),
    [
        ((2, 8, 16), (2, 16, 16), {"causal": True, "offset": -1}, "offset -1 puts the 8 queries"),
        ((2, 8, 16), (2, 16, 16), {"causal": True, "offset": 9}, "it must be from 0 to 8"),
        ((8, 32), (2, 16, 16), {"causal": True, "offset": 9}, "outside the 16 keys"),
        ((2, 8, 16), (2, 16, 16), {"causal": False, "offset": 0}, "non-causal attention reads every key"),
        ((2, 8, 16), (2, 16, 16), {"causal": True, "offset": 2.5}, "offset must be an integer"),
        ((2, 8, 16), (2, 16, 16), {"causal": True, "offset": True}, "offset must be an integer"),
        ((8, 40), (2, 16, 16), {"causal": True}, "q rows of width 40 are not whole heads"),
        ((8, 48), (2, 16, 16), {"causal": True}, "3 query heads cannot share 2 KV heads"),
        ((8, 32), (1, 2, 16, 16), {"causal": True}, "q rows (Sq, Hq * D) are one sequence"),
        ((8, 24), (2, 16, 24), {"causal": True}, "one of [16, 32, 64, 128, 256]"),
    ],
)
def test_offset_and_rows_refusals(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], kwargs: dict[str, Any], message: str
) -> None:
    q, kv = tile.zeros(tile.bf16, list(q_shape)), tile.zeros(tile.bf16, list(k_shape))
    with pytest.raises(ArgumentError) as err:
        tk.attention(q, kv, kv, **kwargs)
    assert message in str(err.value)
    with pytest.raises(ArgumentError) as err:
        tk.attention_op(q, kv, kv, **kwargs)
    assert message in str(err.value)
    assert q.to_numpy().shape == q_shape  # the refused call borrowed nothing for good
