"""Floating-point modes of kernel math: ``flush_to_zero`` and ``rounding`` per op, and per-kernel defaults.

Which op takes which mode is read from the Tile IR op catalog (``tile.ir.ops.CATALOG``), never restated here: an op
takes ``flush_to_zero`` when its Tile IR op has that attribute (``addf subf mulf divf fma maxf minf exp2 rsqrt
sqrt``), and the roundings its ``rounding_mode`` attribute allows (``approx`` for ``divf sqrt exp tanh``, ``full``
for ``divf exp tanh``, the IEEE directed modes for ``addf subf mulf divf fma sqrt``). Tile IR defines
``flush_to_zero``, ``approx`` and ``full`` on f32 only; asking for them on another dtype is an error here rather
than a silent no-op.

Per-kernel defaults (``CompileOptions.flush_to_zero`` / ``.approx``) are applied by `apply_defaults` after type
checking: every f32 op of the kernel whose Tile IR op takes the mode gets it (the operators ``+ - * /``, the bodies
of ``tile.sum``, ...), except a mode the user chose on that very call (`EXPLICIT` lists those on the op).

Invariants: `mode_attrs` returns only attributes the Tile IR verifier accepts for that op and dtype; `EXPLICIT` never
reaches lowering (`apply_defaults` removes it).
"""

from __future__ import annotations

from typing import Any

from tile.compiler._errors import TileError
from tile.compiler._kir import Block
from tile.compiler._types import DType, TileType
from tile.ir.ops import CATALOG

__all__ = ["APPROX_OPS", "EXPLICIT", "FTZ_OPS", "ModeError", "apply_defaults", "mode_attrs", "roundings"]

EXPLICIT = "$explicit_modes"
_IEEE = ("nearest_even", "zero", "negative_inf", "positive_inf")
_F32_ONLY = ("approx", "full")


def _spec(op: str, attr: str) -> Any:
    return next((a for a in CATALOG[op].attrs if a.name == attr), None) if op in CATALOG else None


def roundings(op: str) -> tuple[str, ...]:
    """The rounding names Tile IR op ``op`` accepts (empty when it has no ``rounding_mode``)."""
    spec = _spec(op, "rounding_mode")
    if spec is None:
        return ()
    return tuple(str(m) for m in spec.allowed) if spec.allowed else _IEEE


FTZ_OPS = frozenset(name for name in CATALOG if _spec(name, "flush_to_zero") is not None)
APPROX_OPS = frozenset(name for name in CATALOG if "approx" in roundings(name))


class ModeError(TileError):
    """A mode the op or dtype does not take; the checker reports the message at the user's line (as a CompileError).
    Internal to the checker, but a Tile error like every other, so nothing outside the one root can escape."""


def mode_attrs(what: str, op: str, dtype: DType, rounding: object, flush_to_zero: object) -> dict[str, Any]:
    """The Tile IR attributes for ``rounding=`` / ``flush_to_zero=`` of kernel call ``what`` lowering to ``op``.

    ``None`` means "not given" (the kernel's default applies later). Raises `ModeError` for a value the op or the
    dtype does not take.
    """
    attrs: dict[str, Any] = {}
    explicit: list[str] = []
    if flush_to_zero is not None:
        if not isinstance(flush_to_zero, bool):
            raise ModeError(f"flush_to_zero= of {what} must be a compile-time True or False, got {flush_to_zero!r}")
        if op not in FTZ_OPS:
            alt = "; use tile.exp2(x * 1.4426950408889634, flush_to_zero=True)" if op == "exp" else ""
            raise ModeError(f"{what} takes no flush_to_zero (Tile IR's {op} has none){alt}")
        if flush_to_zero and dtype.name != "f32":
            raise ModeError(
                f"flush_to_zero works only on f32 tiles, {what} got {dtype.name}; convert with .astype(tile.f32) "
                "or drop flush_to_zero"
            )
        attrs["flush_to_zero"] = flush_to_zero
        explicit.append("flush_to_zero")
    if rounding is not None:
        allowed = roundings(op)
        if not allowed:
            raise ModeError(f"{what} takes no rounding= (Tile IR's {op} has one fixed rounding)")
        if rounding not in allowed:
            raise ModeError(f"rounding= of {what} must be one of {', '.join(map(repr, allowed))}, got {rounding!r}")
        if rounding in _F32_ONLY and dtype.name != "f32":
            raise ModeError(
                f"rounding={rounding!r} works only on f32 tiles, {what} got {dtype.name}; convert with "
                ".astype(tile.f32) or use the default rounding"
            )
        attrs["rounding_mode"] = rounding
        explicit.append("rounding_mode")
    if explicit:
        attrs[EXPLICIT] = tuple(explicit)
    return attrs


def apply_defaults(block: Block, flush_to_zero: bool, approx: bool) -> None:
    """Give every f32 op in ``block`` (and its regions) the kernel's default modes, and drop the `EXPLICIT` marks."""
    for op in block.ops:
        chosen = op.attrs.pop(EXPLICIT, ())
        for region in op.regions:
            apply_defaults(region, flush_to_zero, approx)
        if not op.results or not _is_f32(op.results[0].type):
            continue
        if flush_to_zero and op.name in FTZ_OPS and "flush_to_zero" not in chosen:
            op.attrs["flush_to_zero"] = True
        if approx and op.name in APPROX_OPS and "rounding_mode" not in chosen:
            op.attrs["rounding_mode"] = "approx"


def _is_f32(t: object) -> bool:
    return isinstance(t, TileType) and isinstance(t.elem, DType) and t.elem.name == "f32"
