"""Qwen3's own launches on the GPU against float64 numpy (the CPU forms and the reference are ``test_qwen3_ops.py``):
`prep_qkv` at the model's head dim 128 and cache of 1024 positions, decode and a multi-token pass.

Run with ``TILE_REQUIRE_GPU=1 pytest packages/tile-kernels/tests/test_qwen3_ops_gpu.py -m gpu``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tile.frontend as tile
from helpers_qwen3_ops import check_prep_qkv
from tile.kernels.qwen3 import _ops

pytestmark = [pytest.mark.gpu, pytest.mark.requires_tileiras]


@pytest.fixture(autouse=True)
def _gpu_backend() -> Iterator[None]:
    tile.set_backend("gpu")
    yield
    tile.set_backend("cpu")


@pytest.mark.parametrize(("pos", "tables"), [(0, "bf16"), (1023, "bf16"), (511, "f32")])
def test_prep_qkv_decode_form_matches_float64_on_the_gpu(pos: int, tables: str) -> None:
    # Decode's one-token kernel (qkv_prep_one: register loads, no token loop) at Qwen3-4B's heads, both table dtypes.
    check_prep_qkv(1, 32, 8, hd=128, s=1024, pos=pos, tables=tables)


@pytest.mark.parametrize(
    ("t", "heads", "kv", "pos"),
    [(1, 32, 8, 543), (1, 32, 8, 1023), (7, 32, 8, 100), (3, 5, 1, 0)],  # Qwen3-4B's heads; odd counts
)
def test_prep_qkv_matches_float64_on_the_gpu(t: int, heads: int, kv: int, pos: int) -> None:
    check_prep_qkv(t, heads, kv, hd=128, s=1024, pos=pos)


@pytest.mark.parametrize(("t", "pos"), [(300, 100), (1024, 0), (17, 1007), (512, 256), (100, 64), (5, 0)])
def test_prep_qkv_in_cache_tiles_matches_float64_on_the_gpu(t: int, pos: int) -> None:
    """A prefill chunk's `_ops.APPEND_TOKENS` tokens a block and its append in cache tiles of as many positions
    (Qwen3-4B's heads): off tile edges (token by token), the whole cache and chunks from a tile edge (whole tiles in
    one store, the last in part), the cache's last positions, fewer tokens than a tile."""
    check_prep_qkv(t, 32, 8, hd=128, s=1024, pos=pos, tokens=_ops.APPEND_TOKENS)


@pytest.mark.parametrize("tables", ["f32", "bf16"])
@pytest.mark.parametrize("occupancy", [0, 4])
@pytest.mark.parametrize("block", [(16, 1), (32, 1), (64, 1), (32, 2), (32, 4), (16, 4), (64, 4)])
@pytest.mark.parametrize("chunk", [(1024, 0), (300, 100), (100, 64)])
def test_prep_qkv_configs_match_float64_on_the_gpu(
    chunk: tuple[int, int], block: tuple[int, int], occupancy: int, tables: str
) -> None:
    """Every block shape `_ops` lists as a candidate (`APPEND_TOKENS`, `PREP_GROUP`, `PREP_OCCUPANCY`; what
    ``benchmarks/prep_sweep.py`` times), with the model's f32 RoPE tables and bf16 ones: whole aligned tiles, a
    chunk off tile edges, one from a tile edge with its last tile in part."""
    (t, pos), (tokens, group) = chunk, block  # tokens from pos; tokens and query heads a block
    if tables == "f32" and group > 1 and occupancy == 0:
        pytest.skip("refused: tileiras miscompiles this form (test_prep_qkv_refuses_the_miscompiled_form)")
    check_prep_qkv(t, 32, 8, hd=128, s=1024, pos=pos, tokens=tokens, group=group, occupancy=occupancy, tables=tables)
