"""Qwen3's own launches (`tile.kernels.qwen3._ops`) on the CPU interpreter against float64 numpy, at small and odd
shapes: `prep_qkv` (q RMSNorm + RoPE and the KV-cache append in one launch). The GPU forms are in
``test_qwen3_ops_gpu.py``; both use `helpers_qwen3_ops.check_prep_qkv`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
from helpers_qwen3_ops import EPS, _tables, check_prep_qkv
from tile.kernels.qwen3 import _ops


@pytest.mark.parametrize(
    "shape",
    [
        (1, 4, 2, 16, 8, 3),  # decode: one token, two query heads per KV head
        (3, 3, 1, 16, 8, 4),  # odd: three tokens, three query heads on one KV head
        (5, 6, 3, 32, 16, 0),  # odd token count, three KV heads, from position 0
        (2, 2, 2, 16, 4, 2),  # no GQA, the last two positions of a full cache
        (1, 1, 1, 16, 2, 1),  # one block: it owns the query tile and both caches
    ],
)
def test_prep_qkv_matches_float64(shape: tuple[int, int, int, int, int, int]) -> None:
    t, heads, kv, hd, s, pos = shape  # tokens, query heads, KV heads, head dim, cache positions, first position
    check_prep_qkv(t, heads, kv, hd=hd, s=s, pos=pos)


@pytest.mark.parametrize(
    "shape",
    [
        (21, 4, 2, 16, 64, 13, 16),  # a prefill chunk off any tile edge: five cache tiles of 16 share the writes
        (3, 3, 1, 16, 8, 3, 2),  # tiles of 2 positions: the three tokens span three tiles, the first and last in part
        (5, 6, 3, 32, 16, 0, 4),  # from position 0, tiles of 4
        (2, 2, 2, 16, 4, 2, 1),  # one position per tile, the last two of a full cache
        (64, 1, 1, 16, 64, 0, 16),  # the whole cache in one pass: 64 query blocks, 4 cache tiles
        (2, 1, 1, 16, 64, 30, 16),  # more cache tiles (4) than blocks (2): each block walks two, one write spans two
        (40, 4, 2, 16, 64, 16, 16),  # on a tile edge: two tiles written whole (one store each), the third in part
        (7, 3, 1, 16, 32, 8, 8),  # on a tile edge, fewer tokens than a tile: one row tile of queries, in part
    ],
)
def test_prep_qkv_in_cache_tiles_matches_float64(shape: tuple[int, int, int, int, int, int, int]) -> None:
    # A multi-token pass runs `tokens` tokens a block (`_ops.APPEND_TOKENS` in the model) and cuts the caches into
    # tiles of as many positions, each tile's block writing the tokens that land in it: a tile the tokens fill whole
    # from a start on a tile edge in one store, the others token by token.
    t, heads, kv, hd, s, pos, tokens = shape
    check_prep_qkv(t, heads, kv, hd=hd, s=s, pos=pos, tokens=tokens)


@pytest.mark.parametrize(
    "shape",
    [
        (21, 4, 2, 16, 64, 13, 16, 2),  # two query heads a block, off any tile edge: every cache tile in part
        (40, 4, 2, 16, 64, 16, 16, 2),  # two heads a block on a tile edge: whole tiles and a partial edge tile
        (37, 4, 1, 16, 64, 0, 16, 4),  # all four query heads in one block column; the last row tile in part
        (9, 8, 2, 16, 32, 5, 4, 4),  # four heads a block (the GQA group), start off a tile edge by one
        (70, 2, 1, 32, 128, 32, 32, 1),  # 32 tokens a block (the model's), from a later tile edge, an edge in part
        (64, 4, 2, 16, 64, 0, 64, 4),  # 64 tokens a block: the whole pass in one row tile, its cache tile whole
    ],
)
@pytest.mark.parametrize("tables", ["f32", "bf16"])
def test_prep_qkv_heads_per_block_matches_float64(shape: tuple[int, ...], tables: str) -> None:
    # `group` query heads a block (one load of the RoPE rows for them; `_ops.PREP_GROUP`), with f32 tables (the
    # model's) or bf16 ones (no register-layout conversion on the GPU): the same values, checked against the tables
    # as passed.
    t, heads, kv, hd, s, pos, tokens, group = shape
    check_prep_qkv(t, heads, kv, hd=hd, s=s, pos=pos, tokens=tokens, group=group, occupancy=2, tables=tables)


@pytest.mark.parametrize(("heads", "kv", "s", "pos"), [(4, 2, 8, 0), (6, 3, 16, 15), (2, 2, 4, 2), (8, 1, 32, 9)])
@pytest.mark.parametrize("tables", ["f32", "bf16"])
def test_prep_qkv_decode_form_matches_float64(heads: int, kv: int, s: int, pos: int, tables: str) -> None:
    # Decode's one token (`qkv_prep_one`): the first cache row, the last, GQA groups of 1 to 8, f32 or bf16 tables.
    check_prep_qkv(1, heads, kv, hd=16, s=s, pos=pos, tables=tables)


def test_prep_qkv_decode_form_faults_past_the_cache() -> None:
    w = tile.zeros(tile.bf16, [1, 16])
    cos, sin = (tile.from_numpy(a) for a in _tables(16, 16))  # longer than the cache: the cache's check must stop it
    for bad in (8, -1, 2**31 - 1):
        kc, vc = tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16])
        pos = tile.from_numpy(np.array([bad], dtype=np.int32))
        made = _ops.prep_qkv(kc, vc, tile.ones(tile.bf16, [1, 128]), w, w, heads=4, cos=cos, sin=sin, pos=pos, eps=EPS)
        with pytest.raises(tile.KernelFaultError, match=r"qkv_prep: a position is outside the cache"):
            made.sync()


def test_prep_qkv_refuses_rows_of_another_shape_and_faults_past_the_cache() -> None:
    kc, vc = tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16])
    w = tile.zeros(tile.bf16, [1, 16])
    cos, sin = (tile.from_numpy(a) for a in _tables(16, 16))  # longer than the cache: the cache's check must stop it
    common: dict[str, Any] = {"heads": 4, "cos": cos, "sin": sin, "eps": EPS}
    zero = tile.from_numpy(np.zeros(1, np.int32))
    with pytest.raises(tile.ArgumentError, match=r"qkv has 96 columns, expected \(4 \+ 2 \* 2\) heads of 16"):
        _ops.prep_qkv(kc, vc, tile.zeros(tile.bf16, [1, 96]), w, w, pos=zero, **common)
    # The position is data (a device tensor a graph rewrites between replays): a start that runs the new rows past
    # the cache is stopped inside the kernel, never written past its own KV head's rows.
    for tokens in (16, 3, 0):  # refused before the caches move
        with pytest.raises(tile.ArgumentError, match=rf"tokens={tokens}; a cache tile holds a power of two"):
            _ops.prep_qkv(kc, vc, tile.zeros(tile.bf16, [2, 128]), w, w, pos=zero, tokens=tokens, **common)
    assert kc.to_numpy().shape == (2, 8, 16)
    bad = tile.from_numpy(np.array([7], dtype=np.int32))
    caches = (tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16]))
    with pytest.raises(tile.KernelFaultError, match=r"qkv_prep: a position is outside the cache"):
        _ops.prep_qkv(*caches, tile.zeros(tile.bf16, [2, 128]), w, w, pos=bad, **common).sync()
    # A multi-token pass takes its start on the host too (checked there), and the kernel asserts pos agrees.
    rows = tile.zeros(tile.bf16, [2, 128])
    with pytest.raises(tile.ArgumentError, match=r"tokens= needs start="):
        _ops.prep_qkv(kc, vc, rows, w, w, pos=zero, tokens=2, **common)
    extras: tuple[dict[str, Any], ...] = ({"start": 0}, {"group": 1}, {"occupancy": 4})
    for extra in extras:
        with pytest.raises(tile.ArgumentError, match=r"start=, group= and occupancy= go with tokens="):
            _ops.prep_qkv(kc, vc, rows, w, w, pos=zero, **extra, **common)
    for group in (3, 0, 8):  # not a power of two, none, more than the 4 heads
        with pytest.raises(tile.ArgumentError, match=rf"group={group}; a block takes a power of two of query heads"):
            _ops.prep_qkv(kc, vc, rows, w, w, pos=zero, tokens=2, start=0, group=group, **common)
    with pytest.raises(tile.ArgumentError, match=r"occupancy=33; pass 1 to 32 blocks per SM"):
        _ops.prep_qkv(kc, vc, rows, w, w, pos=zero, tokens=2, start=0, occupancy=33, **common)
    half = {**common, "sin": tile.from_numpy(_tables(16, 16)[1].astype(np.float16))}
    with pytest.raises(tile.ArgumentError, match=r"RoPE tables of f32 and f16; pass two f32 or two bf16"):
        _ops.prep_qkv(kc, vc, rows, w, w, pos=zero, tokens=2, start=0, **half)
    for start in (7, -1):
        with pytest.raises(tile.ArgumentError, match=rf"2 tokens from position {start} do not fit the cache of 8"):
            _ops.prep_qkv(kc, vc, rows, w, w, pos=bad, tokens=2, start=start, **common)
    assert kc.to_numpy().shape == (2, 8, 16)  # not moved by a refused call
    caches = (tile.zeros(tile.bf16, [2, 8, 16]), tile.zeros(tile.bf16, [2, 8, 16]))
    with pytest.raises(tile.KernelFaultError, match=r"qkv_prep_rows: the pos tensor does not hold the pass's start"):
        _ops.prep_qkv(*caches, rows, w, w, pos=bad, tokens=2, start=2, **common).sync()


def test_prep_qkv_refuses_the_miscompiled_form() -> None:
    # f32 tables, more than one query head a block and no occupancy hint: tileiras 13.5 compiles the multi-token
    # kernel to write past its own shared memory (memcheck on an H200, 16 tokens and 4 heads a block). Refused on
    # every backend, before the caches move; the same call with a hint, one head a block or bf16 tables runs.
    kc, vc = tile.zeros(tile.bf16, [2, 32, 16]), tile.zeros(tile.bf16, [2, 32, 16])
    w = tile.zeros(tile.bf16, [1, 16])
    cos, sin = (tile.from_numpy(a) for a in _tables(32, 16))
    rows, zero = tile.zeros(tile.bf16, [16, 128]), tile.from_numpy(np.zeros(1, np.int32))
    form: dict[str, Any] = {"heads": 4, "pos": zero, "eps": EPS, "tokens": 16, "start": 0}
    for group in (2, 4):
        with pytest.raises(tile.ArgumentError, match=rf"group={group} with f32 RoPE tables and occupancy=0"):
            _ops.prep_qkv(kc, vc, rows, w, w, cos=cos, sin=sin, group=group, occupancy=0, **form)
    assert kc.to_numpy().shape == (2, 32, 16)  # not moved by the refusal
    out = _ops.prep_qkv(kc, vc, rows, w, w, cos=cos, sin=sin, group=4, occupancy=2, **form).sync()
    assert out[1].unpartition().to_numpy().shape == (2, 32, 16)
