"""The verifier's rule for ``ftof`` rounding modes, per (source, target) float type, as tileiras 13.5 has it.

Every pair of the nine float types was measured with tileirdisasm 13.5 (which rounding modes its verifier
accepts) and the accepted ones compiled with tileiras for sm_90, sm_100 and sm_120. The first matching row
decides:

1. same type: a no-op conversion, rejected;
2. to f8E8M0FNU: ``zero`` or ``positive_inf``; to the other 8- and 4-bit floats: ``nearest_even``;
3. f32 -> tf32: ``nearest_even``, ``zero``, ``nearest_away``; f64 -> f32: the four directed IEEE modes;
4. widening (every source value is exact in the target, by `FORMATS`): the IEEE modes and ``nearest_away``,
   except where tileiras 13.5 crashes (SIGILL, no message) when the result is used: widening into bf16 with
   ``negative_inf``/``positive_inf``/``nearest_away`` and into tf32 with ``negative_inf``/``positive_inf``
   (`WIDENING_CRASHES`; an exact conversion rounds the same in every mode, so ``nearest_even`` loses nothing);
5. narrowing: ``nearest_even`` or ``zero``.
"""

from __future__ import annotations

from tile.ir._enums import RoundingMode
from tile.ir._ir import Operation
from tile.ir._types import ScalarType, TileType

__all__ = ["FORMATS", "WIDENING_CRASHES", "ftof_problems"]

_R = RoundingMode
FORMATS: dict[str, tuple[int, int, int]] = {
    # name: (largest exponent, smallest normal exponent, significand bits including the implicit one)
    "f16": (15, -14, 11),
    "bf16": (127, -126, 8),
    "tf32": (127, -126, 11),
    "f32": (127, -126, 24),
    "f64": (1023, -1022, 53),
    "f8E4M3FN": (8, -6, 4),
    "f8E5M2": (15, -14, 3),
    "f8E8M0FNU": (127, -127, 1),
    "f4E2M1FN": (2, 0, 2),
}
_DIRECTED = frozenset({_R.NEAREST_EVEN, _R.ZERO, _R.NEGATIVE_INF, _R.POSITIVE_INF})
_BY_TARGET = {
    "f8E8M0FNU": frozenset({_R.ZERO, _R.POSITIVE_INF}),
    "f8E4M3FN": frozenset({_R.NEAREST_EVEN}),
    "f8E5M2": frozenset({_R.NEAREST_EVEN}),
    "f4E2M1FN": frozenset({_R.NEAREST_EVEN}),
}
_BY_PAIR = {("f32", "tf32"): frozenset({_R.NEAREST_EVEN, _R.ZERO, _R.NEAREST_AWAY}), ("f64", "f32"): _DIRECTED}
_WIDENING = _DIRECTED | {_R.NEAREST_AWAY}
_NARROWING = frozenset({_R.NEAREST_EVEN, _R.ZERO})
WIDENING_CRASHES: dict[str, frozenset[RoundingMode]] = {
    "bf16": frozenset({_R.NEGATIVE_INF, _R.POSITIVE_INF, _R.NEAREST_AWAY}),
    "tf32": frozenset({_R.NEGATIVE_INF, _R.POSITIVE_INF}),
}


def _widens(src: str, dst: str) -> bool:
    """Whether every value of `src` is exactly representable in `dst`."""
    (s_max, s_min, s_bits), (d_max, d_min, d_bits) = FORMATS[src], FORMATS[dst]
    return s_max <= d_max and s_min >= d_min and s_bits <= d_bits


def _allowed(src: str, dst: str) -> tuple[frozenset[RoundingMode], str]:
    if dst in _BY_TARGET:
        return _BY_TARGET[dst], f"conversions to {dst}"
    if (src, dst) in _BY_PAIR:
        return _BY_PAIR[src, dst], f"{src} -> {dst}"
    if _widens(src, dst):
        return _WIDENING, "widening (exact) conversions"
    return _NARROWING, "narrowing conversions"


def _names(op: Operation) -> tuple[str, str] | None:
    elements = [t.element if isinstance(t, TileType) else None for t in (op.operands[0].type, op.results[0].type)]
    src, dst = elements
    if isinstance(src, ScalarType) and isinstance(dst, ScalarType):
        return src.name, dst.name
    return None


def ftof_problems(op: Operation) -> list[str]:
    """Return the rounding-mode problems of an ``ftof`` op whose operand and result are float tiles."""
    names = _names(op)
    mode = op.attributes.get("rounding_mode")
    if names is None:
        return []
    src, dst = names
    if src == dst:
        return [f"ftof from {src} to {dst} is a no-op; drop it"]
    if src not in FORMATS or dst not in FORMATS:
        return []
    allowed, what = _allowed(src, dst)
    if mode not in allowed:
        choices = ", ".join(sorted(str(m) for m in allowed))
        return [f"rounding_mode {mode} is not supported for {src} -> {dst}; {what} take {choices}"]
    if allowed is _WIDENING and mode in WIDENING_CRASHES.get(dst, frozenset()):
        return [
            f"tileiras 13.5 crashes compiling ftof {src} -> {dst} with rounding_mode {mode}; the conversion is "
            "exact, so use nearest_even"
        ]
    return []
