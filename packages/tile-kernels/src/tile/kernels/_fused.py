"""The two fusions `matmul` takes for decode projections: the RMSNorm prologue (``norm=``) and the SwiGLU epilogue
(``swiglu=True``), each saving a launch (and a round trip of the activation) between two kernels of a decode step.

- ``matmul(x, w_t, norm=g, eps=eps)`` is ``rmsnorm(x, g, eps=eps) @ w_t``. The GEMV forms (M <= 16) compute it in
  one kernel: each block sums the squares of its rows over all of K first (the rows are a few KB, L2-resident), then
  normalises every activation tile as `tk.rmsnorm` does, ``x * r * g`` in f32 rounded to the operand dtype, before
  multiplying it. The product is the unfused pair's up to the order of the sum of squares (``r`` may differ in its
  last f32 bits, flipping a rare bf16 rounding of the normed activation; the tests bound the result against a
  float64 reference with that rounding budgeted).
- ``matmul(h, wgu_t, swiglu=True)`` is ``silu(h @ wgu_t[:, :I]) * (h @ wgu_t[:, I:])`` for the ``(K, 2I)`` fused
  gate/up weight (gate columns first, as Qwen3 stores ``[gate; up]`` rows, passed transposed): a block multiplies
  the same columns of both halves (two weight tiles per K step) and applies silu * mul to its f32 accumulators. The
  gate and up sums are not rounded to the output dtype before the product, as the unfused pair's are: the fused
  result is the more accurate one.

A fused call's decode candidates are the plain GEMV's (`candidates`), tuned under their own key: the GEMV forms
walking all of K, and the split-K configs (gemv_wx's, FORM 3, and the skinny GEMM tile's, FORM 0), whose partials
kernels and combine are ``_fused_kernels.tilepy``'s (`launch_split`): the norm is applied to each partial's
activation tiles (``NORM=1``) or, every partial being linear in the rows' scale ``r``, by the combine to their sum
(``NORM=2``: the partials blocks stream the weight from their first step), and the combine sums the gate and up
partials apart and applies silu * mul. Only the persistent skinny tile (FORM 0, SPLIT 1) is left out: gemv_mma runs
the same (16, BN) tile, one block per tile. Where the matmul takes the
big-M GEMM path (M > 16: prefill), ``norm`` runs `tk.rmsnorm` first, chained (`composed`: a launch is not worth
saving next to a big GEMM, whose every output tile would redo the rows' sum of squares), and ``swiglu`` is the
persistent GEMM's own epilogue (``gemm_glu`` in ``_gemm_kernels.tilepy``): each (BM, BN) output tile multiplies the
same columns of the gate and up halves into two f32 accumulators and stores ``silu(gate) * up``, so the (M, 2I)
gate/up product is never written and no SwiGLU kernel runs. Its candidates (`big_candidates`) are the GEMM tiles
whose two accumulators fit where one of the widest plain tiles' does, tuned under their own key. Either way the op's
output starts with the output partition and then ``a`` as the caller passed it (the un-normed rows, e.g. a residual
stream, handed back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tile.frontend as tile
from tile.aio import DeviceOp
from tile.frontend import ArgumentError, Tensor, f32
from tile.kernels import _args, _gemv, autotune
from tile.kernels._source import kernels

__all__ = [
    "GLU_TILE",
    "MAX_M",
    "NORM_FORMS",
    "SPLIT_STEM",
    "Fusion",
    "big_candidates",
    "candidates",
    "check",
    "check_big",
    "composed",
    "default",
    "fusion",
    "kernel_args",
    "launch_split",
]

_Op = DeviceOp[tuple[Any, ...]]
NORM_FORMS = (1, 2)
"""The RMSNorm prologue's forms (config key ``NORM``, default 1): 1 scales the activation before the multiply, 2
sums the squares in the main loop and scales the accumulators after it."""
MAX_M = 16
"""The largest M the GEMV forms run (both fusions in one kernel); above it the big-M GEMM (`composed`)."""
SPLIT_STEM = "_fused_kernels"
"""The kernel source of the fused split-K forms (part of matmul's tuning digest)."""
GLU_TILE = 128 * 128
"""The largest BM * BN of the big-M SwiGLU GEMM: its two f32 accumulators take the registers one 128x256 tile of the
plain GEMM takes (the widest of its candidates; two of those would spill)."""


@dataclass(frozen=True)
class Fusion:
    """A checked fusion of one call: the norm weight ``(K,)`` and eps (``norm``), and the SwiGLU halves' width."""

    norm: Tensor | None
    eps: float
    swiglu: bool

    def tag(self) -> str:
        """The fusion's name in a tuning key: fused configs are tuned apart from plain ones."""
        return "+".join(name for name, on in (("norm", self.norm is not None), ("swiglu", self.swiglu)) if on)


def fusion(
    op: str,
    dtype: str,
    k: int,
    n: int,
    *,
    norm: object,
    eps: object,
    swiglu: object,
    plain_epilogue: bool,
) -> Fusion | None:
    """Check a call's fusion arguments (``n``: the columns of ``b``); None when it fuses nothing. `ArgumentError`
    for a norm weight that is not a ``(K,)`` float vector, a non-real eps, ``swiglu`` with an odd or zero N or with
    bias / activation / residual, or either fusion on f8 operands."""
    if not isinstance(swiglu, bool):
        raise ArgumentError(f"{op}: swiglu must be True or False, got {type(swiglu).__name__} {swiglu!r}")
    eps_f = _args.real(eps, "eps", op)
    if norm is None and not swiglu:
        return None
    if dtype not in _args.FLOATS:
        raise ArgumentError(
            f"{op}: norm= and swiglu= take f16, bf16 or f32 operands, not {dtype} (an f8 activation would need a "
            "scale after the norm); run tk.rmsnorm / tk.swiglu_fused and the f8 matmul apart"
        )
    g = None
    if norm is not None:
        g = _args.as_input(norm, "norm", op)
        _args.check_dtype(g, "norm", op, _args.FLOATS)
        if g.shape != (k,):
            raise ArgumentError(f"{op}: norm has shape {list(g.shape)}; pass the ({k},) RMSNorm weight of a's rows")
    if swiglu:
        if n == 0 or n % 2:
            raise ArgumentError(f"{op}: swiglu=True needs b of (K, 2 * I) columns, gate first; b has {n} columns")
        if not plain_epilogue:
            raise ArgumentError(f"{op}: swiglu=True is the epilogue; pass no bias, activation or residual with it")
    return Fusion(g, eps_f, swiglu)


def candidates(found: tuple[autotune.Config, ...], fused: Fusion) -> tuple[autotune.Config, ...]:
    """The decode candidates a fused call may run: all of the plain GEMV's (split-K included, see `launch_split`)
    but the persistent skinny tile (FORM 0, SPLIT 1; gemv_mma runs its tile), gemv_dot only where its accumulators
    (two of them with SwiGLU) stay within its register budget; with ``norm``, each in both of the prologue's forms
    (``NORM`` 1: the rows' scale first, 2: the accumulators, or the split partials' sum, scaled after; see
    ``_gemm_kernels.tilepy`` and ``_fused_kernels.tilepy``), which the tuner times against each other."""
    kept = [c for c in found if _runs_fused(c, 2 if fused.swiglu else 1)]
    if fused.norm is None:
        return tuple(kept)
    return tuple(autotune.Config.of(**(c.as_dict() | {"NORM": form})) for c in kept for form in NORM_FORMS)


def _runs_fused(config: autotune.Config, acc: int) -> bool:
    """Whether a fused launch takes ``config`` (``acc``: accumulators a gemv_dot block keeps)."""
    form = config.get("FORM", 0)
    if form == 0:
        return bool(config["SPLIT"] > 1)
    return form != 2 or acc * config["BM"] * config["BN"] * config["BK"] <= _gemv.DOT_BUDGET


def default(n: int, blocks: int, gpu: bool) -> autotune.Config:
    """The untuned fused config: `_gemv.default`'s, or where N is too small for it, its narrowest tile (8 wide) with
    SMs left idle rather than a split."""
    found = _gemv.default(n, blocks, gpu)
    if found is not None:
        return found
    return autotune.Config.of(FORM=1, BM=16, BN=8, BK=128 if gpu else 32, LAT=3, TMA=1, OCC=0, GROUP=1, SPLIT=1)


def check(config: autotune.Config, fused: Fusion | None, op: str) -> None:
    """`ArgumentError` for a config a decode call cannot run fused (the persistent skinny GEMM, FORM 0 without a
    split, or a gemv_dot over its budget), or a ``NORM`` form that is not 1 or 2, or one given to a call without
    ``norm``."""
    form = config.as_dict().get("NORM")
    if form is not None and (fused is None or fused.norm is None or form not in NORM_FORMS):
        raise ArgumentError(
            f"{op}: config {config}: NORM picks the norm= prologue's form, {NORM_FORMS[0]} (scale first) or "
            f"{NORM_FORMS[1]} (one pass); give it only with norm="
        )
    if fused is not None and not _runs_fused(config, 2 if fused.swiglu else 1):
        raise ArgumentError(
            f"{op}: config {config} is the persistent skinny GEMM or over gemv_dot's budget; norm= and swiglu= run "
            "the GEMV forms (FORM 1, 2 or 3; gemv_dot: BM * BN * BK within its budget, halved with swiglu) or the "
            "split-K GEMM (FORM 0 with SPLIT > 1)"
        )


def big_candidates(found: tuple[autotune.Config, ...]) -> tuple[autotune.Config, ...]:
    """The big-M GEMM configs a SwiGLU call may run: whole-K tiles (no SPLIT, no GEMV form) of at most `GLU_TILE`
    elements."""
    return tuple(c for c in found if c.get("FORM", 0) == 0 and c["SPLIT"] == 1 and c["BM"] * c["BN"] <= GLU_TILE)


def check_big(config: autotune.Config, glu: Fusion | None, op: str) -> None:
    """`ArgumentError` for a config the big-M GEMM cannot run: a GEMV form or a ``NORM`` key (the norm runs apart
    there), or with SwiGLU (``glu``) a split or a tile over `GLU_TILE`."""
    values = config.as_dict()
    if values.get("FORM", 0) != 0 or "NORM" in values:
        raise ArgumentError(
            f"{op}: config {config} is a GEMV form (FORM, NORM); above M = {MAX_M} rows norm= and swiglu= run the "
            "big GEMM: give BM, BN, BK, GROUP, SPLIT"
        )
    if glu is not None and not big_candidates((config,)):
        raise ArgumentError(
            f"{op}: config {config}: the SwiGLU GEMM keeps two accumulators; it takes SPLIT=1 and BM * BN <= "
            f"{GLU_TILE} (e.g. BM=128, BN=128)"
        )


def kernel_args(
    fused: Fusion | None, y: Tensor, k: int, norm_form: int
) -> tuple[Tensor, Any, Any, float, float, dict[str, int]]:
    """``(b, g, u, kf, eps, flags)`` for a GEMV launch: ``b`` the (gate half of the) weight, the norm weight and the
    up half (placeholders when unfused), K as a float, eps, and the NORM (0 or ``norm_form``) / GLU flags."""
    if fused is None:
        return y, _args.placeholder(f32, 1), _args.placeholder(f32, 2), 0.0, 0.0, {"NORM": 0, "GLU": False}
    g = fused.norm[()] if fused.norm is not None else _args.placeholder(f32, 1)
    flags = {"NORM": norm_form if fused.norm is not None else 0, "GLU": fused.swiglu}
    if not fused.swiglu:
        return y, g, _args.placeholder(f32, 2), float(k), fused.eps, flags
    inner = y.shape[1] // 2  # the gate and up halves, views of the borrowed weight (one launch's)
    return y[:, :inner], g, y[:, inner:], float(k), fused.eps, flags


def launch_split(config: autotune.Config, z: Tensor, *, x: Tensor, y: Tensor, fused: Fusion) -> _Op:
    """A fused decode call split over K (FORM 0: ``gemm_split_fused``, FORM 3: ``gemv_wx_split_fused``) into f32
    partials, SPLIT slices (twice as many with SwiGLU: the gate half's, then the up half's), chained with no wait to
    ``reduce_split_fused``, which sums them, finishes the norm (``NORM=2``) and the SwiGLU, and writes ``z``. The
    op's output starts ``(z's partition, x)``, as a fused GEMV launch's."""
    k = kernels(SPLIT_STEM)
    tile_shape = [config["BM"], config["BN"]]
    split = max(1, min(config["SPLIT"], -(-x.shape[1] // config["BK"])))
    b, g, u, kf, eps, flags = kernel_args(fused, y, x.shape[1], config.get("NORM", 1))
    slices = split * (2 if fused.swiglu else 1)
    partials = tile.empty(f32, [slices, *z.shape]).partition([1, *tile_shape])
    hints: dict[str, Any] = {"BK": config["BK"], "SPLIT": split}
    first = k.gemm_split_fused
    if config.get("FORM", 0) == 3:
        first = k.gemv_wx_split_fused
        hints |= {"LAT": config["LAT"], "TMA": bool(config["TMA"])}
    with tile.partitioned(z, tile_shape) as target:  # a refused first launch gives ``z`` (maybe out=) back

        def combine(out: tuple[Any, ...]) -> _Op:
            # The partials and x are in flight: the combine runs after the partials kernel, no wait between.
            done: _Op = k.reduce_split_fused(
                target, out[1], out[0].unpartition(), kf, eps, BK=config["BK"], SPLIT=split, **flags
            )
            return done

        made: _Op = first(partials, x, b, g, u, kf, eps, **hints, **flags)
        return made.then(combine)


def composed(fused: Fusion, x: Tensor, matmul: Callable[[Tensor], _Op]) -> _Op:
    """A fused call above `MAX_M` rows: `tk.rmsnorm_op` of ``x`` first (with ``norm``), chained, then
    ``matmul(activation)``, the big-M GEMM (with ``swiglu``: its SwiGLU epilogue) writing the call's output, which
    the caller holds (partitioned) from the op's making on. The op's output is ``(z's partition, x)``, as a fused
    launch's starts."""
    from tile.kernels._addnorm import rmsnorm_op

    if fused.norm is None:
        return matmul(x).map(lambda out: (out[0], out[1]))
    first: _Op = rmsnorm_op(x, fused.norm, eps=fused.eps)

    def normed(out: tuple[Any, ...]) -> _Op:
        x_back = out[1]
        return matmul(out[0].unpartition()).map(lambda done: (done[0], x_back))

    return first.then(normed)
