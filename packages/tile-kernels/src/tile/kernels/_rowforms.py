"""How a row kernel runs: its form (whole row in registers, or chunked), tile shape and hints, from a config.

A config (`autotune.Config`) of a row kernel has up to five parameters; absent ones are 0:

``BM``
    Rows per block (a power of two, at least 1).
``BN``
    Chunk width: 0 (or anything >= the padded row length NP) is the whole-row form, a block keeping its ``(BM, NP)``
    tile in registers between the reduction and the store; a smaller power of two is the chunked form, two passes
    over ``(BM, BN)`` chunks (``_row_chunked.tilepy``).
``OCC``, ``WARPS``
    tileiras hints: blocks per SM (1..32) and worker warps per block (4 or 8); 0 leaves the choice to tileiras.
``LAT``
    The loads' and stores' latency hint (1..10); 0 gives none.

The hints are entry options, so each (kernel, OCC, WARPS) is its own `tile.frontend.Kernel`, made once. Tuned
records are keyed by the device arch (`autotune.environment`), so a hint a config carries is the one tuned for
this arch; no `tile.by_arch` table is needed for tuned values.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import tile.frontend as tile
from tile.frontend import ArgumentError, Kernel
from tile.kernels import autotune
from tile.kernels._source import kernels, pdl_requested, source_digest

__all__ = ["WHOLE_MAX", "Plan", "configs", "default", "plan", "source"]

WHOLE_MAX = 32768
"""The most elements a whole-row block holds (``BM * NP``): longer rows, or more rows per block, are chunked."""
WHOLE, CHUNKED = "_row_kernels", "_row_chunked"
_TUNED_BN = (1024, 2048, 4096)
_VARIANTS: dict[tuple[str, str, int, int, bool], Kernel] = {}
_LOCK = threading.Lock()


def source() -> str:
    """A digest of both kernel files: tuning records made for other kernel source are ignored."""
    return source_digest(WHOLE) + source_digest(CHUNKED)


@dataclass(frozen=True)
class Plan:
    """One row kernel's launch shape: rows per block, chunk width, padded row length and hints."""

    bm: int
    bn: int
    np: int
    occ: int
    warps: int
    lat: int

    @property
    def whole(self) -> bool:
        """Whether the block keeps its whole rows in registers (one chunk)."""
        return self.bn >= self.np

    @property
    def tile(self) -> list[int]:
        """The output tile a block owns: ``[BM, NP]``."""
        return [self.bm, self.np]

    def kernel(self, name: str) -> Kernel:
        """The kernel ``name`` (``rmsnorm``...) of this plan's form, with this plan's hints."""
        if name == "rmsnorm_heads":  # one kernel: a whole row is one chunk of whole heads
            stem, entry = CHUNKED, name
        else:
            stem, entry = (WHOLE, name) if self.whole else (CHUNKED, f"{name}_chunked")
        return _variant(stem, entry, self.occ, self.warps)

    def generics(self) -> dict[str, Any]:
        """The const generics the form takes besides the op's own: ``LAT``, and ``BN`` when chunked."""
        return {"LAT": self.lat} if self.whole else {"LAT": self.lat, "BN": self.bn}


def _variant(stem: str, entry: str, occ: int, warps: int) -> Kernel:
    key = (stem, entry, occ, warps, pdl_requested())  # the PDL kernels inside launch_pdl(True): tile.kernels._source
    with _LOCK:
        found = _VARIANTS.get(key)
        if found is None:
            base: Kernel = getattr(kernels(stem), entry)
            if occ == 0 and warps == 0:
                found = base
            else:
                hint = tile.entry(occupancy=occ or None, num_worker_warps=warps or None, pdl=base.options.pdl)
                found = hint(base.fn)
            _VARIANTS[key] = found
        return found


def _pow2(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


_PLANS: dict[tuple[autotune.Config, int, int], Plan] = {}
"""The plans `plan` made, by its arguments (``op`` only names the call in a message): a row op asks on every call."""


def plan(config: autotune.Config, np_: int, op: str, *, unit: int = 1) -> Plan:
    """The plan of ``config`` for rows padded to ``np_``; `ArgumentError` for a config this op cannot run.

    ``unit`` is the size chunks must be a multiple of (the head size for per-head rmsnorm)."""
    found = _PLANS.get((config, np_, unit))
    if found is None:
        found = _plan(config, np_, op, unit)
        if len(_PLANS) >= 4096:  # hand-picked configs of ever-new widths must not grow it without bound
            _PLANS.clear()
        _PLANS[config, np_, unit] = found
    return found


def _plan(config: autotune.Config, np_: int, op: str, unit: int) -> Plan:
    values = config.as_dict()
    unknown = set(values) - {"BM", "BN", "OCC", "WARPS", "LAT"}
    if unknown:
        raise ArgumentError(f"{op}: config {config}: unknown parameter(s) {', '.join(sorted(unknown))}")
    bm, bn = values.get("BM", 0), values.get("BN", 0) or np_
    occ, warps, lat = values.get("OCC", 0), values.get("WARPS", 0), values.get("LAT", 0)
    if not _pow2(bm):
        raise ArgumentError(f"{op}: config {config}: BM (rows per block) must be a power of two")
    if not _pow2(bn) or bn % unit:
        raise ArgumentError(f"{op}: config {config}: BN (chunk width) must be 0 or a power of two, multiple of {unit}")
    bn = min(bn, np_)
    if bm * bn > WHOLE_MAX:
        raise ArgumentError(
            f"{op}: config {config}: a block's (BM, BN) = ({bm}, {bn}) tile is more than {WHOLE_MAX} elements; "
            "set a smaller BN (chunks) or BM"
        )
    if not 0 <= occ <= 32 or warps not in (0, 4, 8) or not 0 <= lat <= 10:
        raise ArgumentError(f"{op}: config {config}: OCC is 0..32, WARPS 0, 4 or 8, LAT 0..10")
    return Plan(bm, bn, np_, occ, warps, lat)


def configs(np_: int) -> tuple[autotune.Config, ...]:
    """The candidates the tuner times for rows padded to ``np_``: whole-row forms with 1..8 rows per block (at most
    8192 elements, or one row) and chunked forms of 1024, 2048 and 4096 columns, each with tileiras' warp count and
    with 8 worker warps."""
    shapes = [(bm, 0) for bm in (1, 2, 4, 8) if bm * np_ <= max(8192, np_) and np_ <= WHOLE_MAX]
    shapes += [(1, bn) for bn in _TUNED_BN if bn < np_]
    return tuple(autotune.Config.of(BM=bm, BN=bn, WARPS=w) for bm, bn in shapes for w in (0, 8))


def default(np_: int) -> autotune.Config:
    """The untuned choice. GPU: whole rows up to 8192 columns, 4096 elements per block (several rows for short rows),
    8 worker warps; longer rows in chunks of 2048 with 8 warps. Read from the SASS (benchmarks/inspect_rows.py): 8
    warps keep 16-32 f32 values per thread, while a whole 32768-element row needs 252 registers a thread at 8 warps
    (one block per SM) and spills at 4. The interpreter: whole rows up to 2048, chunks of 1024 (fewer blocks)."""
    if tile.backend() != "gpu":
        if np_ <= 2048:
            return autotune.Config.of(BM=max(1, min(16, 2048 // np_)))
        return autotune.Config.of(BM=1, BN=1024)
    if np_ <= 8192:
        return autotune.Config.of(BM=max(1, min(16, 4096 // np_)), BN=0, WARPS=8)
    return autotune.Config.of(BM=1, BN=2048, WARPS=8)


def heads_configs(np_: int, d: int) -> tuple[autotune.Config, ...]:
    """Per-head rmsnorm candidates: chunks of 1..np_/d heads (at most 8192 elements a chunk), 1..8 rows a block."""
    chunks = [bn for bn in (d, 2 * d, 4 * d, 8 * d, 16 * d, 32 * d) if bn <= min(np_, 8192)]
    return tuple(autotune.Config.of(BM=bm, BN=bn) for bn in chunks for bm in (1, 2, 4, 8) if bm * bn <= 8192)


def heads_default(np_: int, d: int) -> autotune.Config:
    """Per-head rmsnorm's untuned choice: chunks of about 1024 elements (whole heads), about 4096 per block."""
    bn = max(d, min(np_, 1024))
    return autotune.Config.of(BM=max(1, min(16, 4096 // bn)), BN=bn)
