"""The matmul family's configs: the candidates the GPU tuner times for `matmul` (big tiles for M > 16; the GEMV forms
and the skinny tiles for decode sizes), the deterministic config used untuned, and the check every config passes
before a launch.
"""

from __future__ import annotations

import tile.frontend as tile
from tile.frontend import ArgumentError
from tile.kernels import _gemv, autotune

# Candidates the GPU tuner times: big tiles for M > 16; for decode sizes the GEMV forms (`_gemv.candidates`) and the
# skinny (BM = 16) tiles with and without split-K, which stay in the race (without them Qwen3-4B decode on an H100 was
# slower: 166 against 175 tokens/s), and split-K wins where N is small.
WIDE = tuple(
    autotune.Config.of(BM=bm, BN=bn, BK=bk, GROUP=g, SPLIT=1)
    for bm, bn, bk, g in (
        (128, 128, 64, 4),
        (128, 128, 64, 8),
        (128, 256, 64, 8),
        (256, 128, 64, 8),
        (128, 128, 32, 8),
        (64, 128, 64, 4),
        (128, 64, 64, 4),
    )
)
# For big M where the widest tiles leave the last wave ragged: Qwen3-4B's o_proj and down_proj write (2048, 2560),
# 160 tiles of 128x256 (or 256x128) on an H100/H200's 132 SMs, two waves of which the second keeps 28 SMs busy: 61%
# of the SM time does work (they ran at ~510-540 TFLOP/s where qkv and gate/up, 97% and 92% full, ran at ~720). Tiles
# of 128x128 are 320 (81%); 8K-element tiles are 640 (97%) at a lower intensity, deeper BK to feed them; 64x256 and
# 256x64 are other 16K shapes. Where even the 128x128 tiles are fewer than the SMs (short prompts), split-K fills them.
WAVE = tuple(
    autotune.Config.of(BM=bm, BN=bn, BK=bk, GROUP=g, SPLIT=1)
    for bm, bn, bk, g in (
        (64, 256, 64, 8),
        (256, 64, 64, 8),
        (64, 128, 128, 8),
        (128, 64, 128, 8),
        (64, 64, 128, 8),
    )
)
FEW = tuple(autotune.Config.of(BM=128, BN=128, BK=64, GROUP=8, SPLIT=s) for s in (2, 4))
RAGGED = 0.0
"""The share of the last wave's SM time the widest tile must fill for `big_candidates` to add no other tiles. 0: the
extra tiles are off. With 0.9 (o_proj / down_proj at 2048 tokens get them) the tuner's picks measured slower on an
H200 in `benchmarks/profile_prefill.py` (Qwen3-4B: o_proj 3.05 -> 3.79 ms, down_proj 6.8 -> 7.8 ms over 36 layers,
one run each; the tuner's isolated timing and the chained one disagree), so they wait for a measurement that shows
them paying."""
SKINNY = tuple(
    autotune.Config.of(BM=16, BN=bn, BK=bk, GROUP=1, SPLIT=s)
    for bn in (64, 128, 256)
    for bk in (128, 256)
    for s in (1, 2, 4, 8)
)


def decode_candidates(m: int, n: int) -> tuple[autotune.Config, ...]:
    """What the tuner times for M <= 16: the GEMV forms and the skinny tiles (split-K among them)."""
    return _gemv.candidates(m, n, persistent_blocks()) + SKINNY


def wave_fill(m: int, n: int, bm: int, bn: int, blocks: int) -> float:
    """The share of SM time doing work when ``blocks`` persistent blocks share the ``(M, N)`` output's (BM, BN) tiles
    (every tile taking the same time): tiles / (waves * blocks)."""
    tiles = -(-m // bm) * -(-n // bn)
    return tiles / (-(-tiles // blocks) * blocks)


def big_candidates(m: int, n: int) -> tuple[autotune.Config, ...]:
    """What the tuner times for M > 16: the `WIDE` tiles, and where the widest of them (128x256) fills less than
    `RAGGED` of its waves, the `WAVE` tiles too (and split-K where even 128x128 tiles are fewer than the SMs)."""
    blocks = persistent_blocks()
    if wave_fill(m, n, 128, 256, blocks) >= RAGGED:
        return WIDE
    few = FEW if -(-m // 128) * -(-n // 128) < blocks else ()
    return WIDE + WAVE + few


def persistent_blocks() -> int:
    """Blocks of a persistent launch: one per SM on the GPU, a few on the CPU interpreter."""
    if tile.backend() != "gpu":
        return 4
    from tile import core

    return int(core.Device(0).sm_count)


def default(m: int, n: int, k: int) -> autotune.Config:
    """The deterministic config used untuned: 128x128x64 tiles (32^3 on the interpreter); for M <= 16 the GEMV form
    (`_gemv.default`), or split-K where N is too small for it."""
    gpu = tile.backend() == "gpu"
    if m > 16:
        return WIDE[0] if gpu else autotune.Config.of(BM=32, BN=32, BK=32, GROUP=2, SPLIT=1)
    gemv = _gemv.default(n, persistent_blocks(), gpu)
    if gemv is not None:
        return gemv
    bn, bk = (128, 128) if gpu else (32, 32)
    tiles_n, tiles_k = -(-n // bn), -(-k // bk)
    split = 1
    while split < 8 and tiles_n * split * 2 <= persistent_blocks() and split * 2 <= tiles_k:
        split *= 2  # only while the blocks would otherwise leave SMs idle and each split keeps a K tile
    return autotune.Config.of(BM=16, BN=bn, BK=bk, GROUP=1, SPLIT=split)


_VALID: set[autotune.Config] = set()
"""Configs `check_config` passed: its verdict depends on the config alone (``op`` only names the call in a message),
and every launch checks the tuned config again."""


def check_config(config: autotune.Config, op: str) -> None:
    if config in _VALID:
        return
    try:
        values = [config[name] for name in ("BM", "BN", "BK", "GROUP", "SPLIT")]
    except KeyError as exc:
        raise ArgumentError(f"{op}: config {config} lacks {exc.args[0]}; give BM, BN, BK, GROUP and SPLIT") from None
    if any(v < 1 for v in values) or any(v & (v - 1) for v in values[:3]):
        raise ArgumentError(f"{op}: config {config}: BM, BN, BK must be powers of two, GROUP and SPLIT >= 1")
    if config.get("FORM", 0) != 0:
        _gemv.check(config, op)
    if len(_VALID) < 4096:  # hand-picked configs beyond it are checked every time
        _VALID.add(config)
