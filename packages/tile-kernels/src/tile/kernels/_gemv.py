"""Decode-sized matmul (M <= 16): the GEMV forms `matmul` picks for skinny M, their autotune candidates and launches.

Batch-1 decode multiplies one row (or a few) by every weight of the model, so the work is reading the weight once at
the HBM bandwidth. The persistent GEMM's 128-wide tiles leave most SMs idle at the small N of a decode projection
(N = 2560 is 20 tiles of 128), and splitting K to fill them costs an f32 partials round trip and a second kernel.
The GEMV forms instead give every block a narrow (BM, BN) output tile, BN 8..128, and let it walk all of K: N / BN
blocks fill the machine without splitting (2560 / 8 = 320 blocks), and the epilogue (bias, activation, residual,
output cast) runs in the same kernel. Three forms, all offered to the autotuner because which one tileiras makes
faster depends on the shape:

- ``FORM=1`` (``gemv_mma``): the activation rows padded with zeros to BM = 16, times a (BK, BN) weight tile on the
  matrix unit;
- ``FORM=2`` (``gemv_dot``): multiply and add in f32 on the CUDA cores into a (BM, BN, BK) accumulator reduced once
  after the loop; BM is M rounded up to a power of two, so no padded rows are multiplied;
- ``FORM=3`` (``gemv_wx``): the transposed product ``z^T = w @ x^T`` on the matrix unit: the (BN, BK) weight tile (BN
  rows of the (N, K) weight, contiguous along K) is the left operand, the side Hopper's warpgroup MMA needs 64 rows
  on, and the activation rows, padded to BM = 8 (M <= 8) or 16, the right operand, which may be 8 wide. FORM 1 puts
  the 16 padded activation rows on that side instead, which the warpgroup MMA cannot take.

Each config also carries the loads' ``LAT`` (latency hint: tiles in flight) and ``TMA`` (1: bulk-copy engine
allowed, 0: plain loads), and ``OCC`` (blocks per SM hint, 0: tileiras' choice). gemv_wx alone may split K
(``SPLIT`` > 1: ``gemv_wx_split_k`` into f32 partials, then ``reduce_split_k`` with the epilogue, one more launch)
where N is too small for its 64- and 128-wide tiles to fill the SMs. The skinny persistent tiles of `_gemm`
(``FORM=0``, split-K among them) race all of them.
"""

from __future__ import annotations

import functools
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Kernel, Tensor
from tile.kernels import _args, _fused, autotune
from tile.kernels._source import kernels, pdl_requested

__all__ = ["DOT_BUDGET", "FORMS", "candidates", "check", "default", "launch", "launch_split"]

FORMS = {1: "gemv_mma", 2: "gemv_dot", 3: "gemv_wx"}
_STEM = "_gemm_kernels"
_TILE_SIZES = (4096, 8192)  # elements of one gemv_mma weight tile, BN x BK
DOT_BUDGET = 8192  # f32 accumulator elements of one gemv_dot block: BM * BN * BK (64 registers a thread at 128)
# gemv_mma's plain-load tiles, (BN x BK, blocks per SM hint), at most 128 deep (BN = 32, BK = 256 spills); BN = 64,
# BK = 128, 4 blocks an SM was the tuned best at Qwen3-4B's gate/up.
_PLAIN = ((4096, 0), (8192, 4))
_MAX_SPLIT = 16  # runs of K tiles gemv_wx may split K into (each a slice of the f32 partials)


def _gemv(**values: int) -> autotune.Config:
    return autotune.Config.of(**({"GROUP": 1, "SPLIT": 1} | values))


def candidates(m: int, n: int, blocks: int) -> tuple[autotune.Config, ...]:
    """The GEMV configs the tuner times for an ``(m, n)`` output on a GPU of ``blocks`` SMs.

    Widths: 8 and the two widest whose grid still gives every SM a block (wider ones would leave SMs idle). What
    tileiras makes of each was read off its sm_90 code (benchmarks/gemv_sass.py, results/gemv_sass.json): below
    32 columns no form reaches the matrix unit (the mma becomes CUDA-core FMAs), and there gemv_mma spills registers
    at every BK >= 256 (BN = 8, BK = 1024: 262 spill stores), so narrow gemv_mma and gemv_wx tiles are 128 deep;
    Qwen3-4B's o and down at M = 16, which had only those spilling tiles to choose from, ran at 0.07 of copy
    bandwidth. From 32 columns gemv_mma runs on the warp MMA with 4096- or 8192-element weight tiles (8 or 16 KiB of
    bf16); gemv_wx from 64 on the warpgroup MMA with the bulk-copy engine, split over K where its tiles are too few
    (`_split_wx`). gemv_dot (CUDA cores by design, no spills) only up to M = 4, where its accumulator stays small.
    20 to 34 configs.
    """
    eligible = [bn for bn in (8, 16, 32, 64, 128) if -(-n // bn) >= blocks]
    widths = sorted({8, *eligible[-2:]})
    found = []
    for bn in widths:
        if bn < 32:  # CUDA-core FMAs: 128-deep tiles (deeper ones spill), more of them in flight
            found += [_gemv(FORM=1, BM=16, BN=bn, BK=128, LAT=lat, TMA=1, OCC=0) for lat in (3, 6)]
            continue
        found += [_gemv(FORM=1, BM=16, BN=bn, BK=size // bn, LAT=3, TMA=1, OCC=0) for size in _TILE_SIZES]
        found += [_gemv(FORM=1, BM=16, BN=bn, BK=min(128, size // bn), LAT=4, TMA=0, OCC=occ) for size, occ in _PLAIN]
    if m <= 4:
        bm = _args.next_pow2(m)
        found += [
            _gemv(FORM=2, BM=bm, BN=bn, BK=bk, LAT=4, TMA=tma, OCC=0)
            for bn in widths[:2]
            for bk in (256, 512)
            for tma in (0, 1)
            if bm * bn * bk <= DOT_BUDGET
        ]
    bm = 8 if m <= 8 else 16
    for bn in (16, 32, 64, 128):
        if -(-n // bn) < blocks or (bn < 64 and bn not in {16, *widths}):
            continue
        if bn < 64:  # CUDA-core FMAs again: 128 deep, bulk copies (plain loads spill at 16 wide)
            found.append(_gemv(FORM=3, BM=bm, BN=bn, BK=128, LAT=3, TMA=1, OCC=0))
            continue
        found += [
            _gemv(FORM=3, BM=bm, BN=bn, BK=bk, LAT=lat, TMA=tma, OCC=0)
            for bk in (128, 256)
            for tma, lat in ((1, 3), (0, 4))
        ]
    return (*found, *_split_wx(m, n, blocks))


def _split_wx(m: int, n: int, blocks: int) -> list[autotune.Config]:
    """gemv_wx split over K where its 64- and 128-wide tiles leave SMs idle (N = 2560: 40 and 20 tiles): the smallest
    power-of-two SPLIT that gives every SM a block (at most 16), and twice it for the 64-wide tiles."""
    bm = 8 if m <= 8 else 16
    found = []
    for bn in (64, 128):
        tiles = -(-n // bn)
        least = 2
        while tiles * least < blocks and least < _MAX_SPLIT:
            least *= 2
        splits = [least, 2 * least] if bn == 64 and 2 * least <= _MAX_SPLIT else [least]
        if tiles < blocks:
            found += [
                _gemv(FORM=3, BM=bm, BN=bn, BK=bk, LAT=3, TMA=1, OCC=0, SPLIT=split)
                for bk in (128, 256)
                for split in splits
            ]
    return found


def default(n: int, blocks: int, gpu: bool) -> autotune.Config | None:
    """The untuned GEMV config for N = ``n`` on ``blocks`` SMs, or None where even 8-wide tiles leave SMs idle (the
    caller splits K then): gemv_mma with the widest BN up to 64 that still gives every SM two blocks, 8192-element
    weight tiles from 32 columns (the warp MMA) and 128-deep ones below (CUDA-core FMAs, which spill registers deeper:
    see `candidates`); 32 x 32 tiles on the CPU interpreter, whose tiles stay small."""
    if not gpu:
        return _gemv(FORM=1, BM=16, BN=32, BK=32, LAT=3, TMA=1, OCC=0) if -(-n // 32) >= blocks else None
    if -(-n // 8) < blocks:
        return None
    bn = 8
    while bn < 64 and -(-n // (2 * bn)) >= 2 * blocks:
        bn *= 2
    deep = bn < 32  # the CUDA-core FMAs: more, shallower tiles in flight
    return _gemv(FORM=1, BM=16, BN=bn, BK=128 if deep else _TILE_SIZES[1] // bn, LAT=6 if deep else 3, TMA=1, OCC=0)


def check(config: autotune.Config, op: str) -> None:
    """Raise `ArgumentError` for a GEMV config with a bad form, hint or split (only gemv_wx splits K)."""
    values = config.as_dict()
    form, lat, tma, occ = (values.get(name, -1) for name in ("FORM", "LAT", "TMA", "OCC"))
    if form not in FORMS:
        raise ArgumentError(
            f"{op}: config {config}: FORM must be 0 (GEMM / split-K), 1 (gemv_mma), 2 (gemv_dot) or 3 (gemv_wx)"
        )
    split = values.get("SPLIT", 0)
    if form == 3 and not 1 <= split <= _MAX_SPLIT:
        raise ArgumentError(f"{op}: config {config}: gemv_wx (FORM 3) splits K in 1..{_MAX_SPLIT} runs; give SPLIT so")
    if form != 3 and split != 1:
        raise ArgumentError(f"{op}: config {config}: FORM 1 and 2 walk all of K in one block; give SPLIT=1")
    if not 1 <= lat <= 10 or tma not in (0, 1) or not 0 <= occ <= 32:
        raise ArgumentError(f"{op}: config {config}: give LAT in 1..10, TMA 0 or 1 and OCC in 0..32 (0: no hint)")


def _kernel(form: int, occupancy: int) -> Kernel:
    """The form's kernel, with an occupancy hint when ``occupancy`` > 0 (a kernel object of its own, compiled apart);
    the PDL one inside ``launch_pdl(True)`` (see `tile.kernels._source`)."""
    return _kernel_of(form, occupancy, pdl_requested())


@functools.cache
def _kernel_of(form: int, occupancy: int, pdl: bool) -> Kernel:
    base: Kernel = getattr(kernels(_STEM), FORMS[form])  # (kernels() reads the same request as `pdl`)
    return base if occupancy == 0 else tile.entry(occupancy=occupancy, pdl=base.options.pdl)(base.fn)


def launch(
    config: autotune.Config,
    z: Tensor,
    *,
    x: Tensor,
    y: Tensor,
    bias: Any,
    res: Any,
    flags: dict[str, Any],
    fused: _fused.Fusion | None = None,
) -> DeviceOp[tuple[Any, ...]]:
    """The GEMV launch writing ``z`` (one block per (BM, BN) tile of it) for a config `check` accepted; gemv_wx with
    SPLIT > 1 is two: ``gemv_wx_split_k`` into f32 partials, then ``reduce_split_k`` with the epilogue. ``fused``
    (RMSNorm prologue, SwiGLU epilogue: `tile.kernels._fused`) runs the fused kernels (split: `_fused.launch_split`);
    its op's output starts ``(z, x)``."""
    hints = {"BK": config["BK"], "LAT": config["LAT"], "TMA": bool(config["TMA"])}
    split = min(config["SPLIT"], -(-x.shape[1] // config["BK"]))
    if fused is not None and split > 1:  # the fused split-K forms: their own partials kernel and combine
        return _fused.launch_split(config, z, x=x, y=y, fused=fused)
    if config["FORM"] == 3 and split > 1:
        tile_shape = (config["BM"], config["BN"])
        first = kernels(_STEM).gemv_wx_split_k
        return launch_split(first, split, z, tile_shape, x=x, y=y, bias=bias, res=res, flags=flags, **hints)
    kernel = _kernel(config["FORM"], config["OCC"])
    b, g, u, kf, eps, fuse_flags = _fused.kernel_args(fused, y, x.shape[1], config.get("NORM", 1))
    with tile.partitioned(z, [config["BM"], config["BN"]]) as part:  # a refused launch gives ``z`` (maybe out=) back
        made: DeviceOp[tuple[Any, ...]] = kernel(part, x, b, bias, res, g, u, kf, eps, **hints, **flags, **fuse_flags)
    return made


def launch_split(
    first: Kernel,
    split: int,
    z: Tensor,
    tile_shape: tuple[int, int],
    *,
    x: Tensor,
    y: Tensor,
    bias: Any,
    res: Any,
    flags: dict[str, Any],
    **hints: Any,
) -> DeviceOp[tuple[Any, ...]]:
    """Split-K into ``z``: ``first`` (``gemm_split_k`` or ``gemv_wx_split_k``) writes ``split`` f32 partials of each
    (BM, BN) tile, then ``reduce_split_k`` adds them and applies the epilogue, chained with no wait between."""
    k = kernels(_STEM)
    m, n = z.shape
    partials = tile.empty(tile.f32, [split, m, n]).partition([1, *tile_shape])
    with tile.partitioned(z, list(tile_shape)) as target:  # a refused first launch gives ``z`` (maybe out=) back

        def reduce(out: tuple[Any, ...]) -> Any:
            # The partials are unpartitioned in flight: the reduction runs after the split kernel, no wait between.
            return k.reduce_split_k(target, out[0].unpartition(), bias, res, **flags)

        made: DeviceOp[tuple[Any, ...]] = first(partials, x, y, SPLIT=split, **hints)
        return made.then(reduce)
