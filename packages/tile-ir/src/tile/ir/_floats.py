"""Bit patterns of the floating-point element types.

Encoding rounds to nearest-even. Formats without infinities or NaN reject values they cannot represent
instead of silently saturating: a constant that changes value on the way into bytecode is a bug.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from tile.ir._errors import IRTypeError

__all__ = ["float_from_bits", "float_to_bits"]


@dataclass(frozen=True)
class _Format:
    exp_bits: int
    man_bits: int
    ieee_specials: bool  # all-ones exponent = inf/nan (IEEE); otherwise finite-only ("FN")
    nan: int | None  # NaN pattern (without sign) for non-IEEE formats
    signed: bool = True

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1


_FORMATS = {
    "f16": _Format(5, 10, True, None),
    "bf16": _Format(8, 7, True, None),
    "tf32": _Format(8, 10, True, None),
    "f8E4M3FN": _Format(4, 3, False, 0x7F),
    "f8E5M2": _Format(5, 2, True, None),
    "f8E8M0FNU": _Format(8, 0, False, 0xFF, signed=False),
    "f4E2M1FN": _Format(2, 1, False, None),
}


def float_to_bits(name: str, value: float) -> int:
    """Return the bit pattern of `value` in the float type called `name` (f16, f32, f8E4M3FN, ...)."""
    if name == "f32":
        try:
            return int(struct.unpack("<I", struct.pack("<f", value))[0])
        except OverflowError:  # rounds past the finite range: IEEE round-to-nearest gives inf, as for f16/bf16
            return 0xFF800000 if value < 0 else 0x7F800000
    if name == "f64":
        return int(struct.unpack("<Q", struct.pack("<d", value))[0])
    return _encode(_FORMATS[name], value, name)


def float_from_bits(name: str, bits: int) -> float:
    """Return the value of the bit pattern `bits` of the float type called `name`."""
    if name == "f32":
        return float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])
    if name == "f64":
        return float(struct.unpack("<d", struct.pack("<Q", bits & (2**64 - 1)))[0])
    return _decode(_FORMATS[name], bits)


def _decode(fmt: _Format, bits: int) -> float:
    width = fmt.exp_bits + fmt.man_bits
    sign = -1.0 if fmt.signed and (bits >> width) & 1 else 1.0
    body = bits & ((1 << width) - 1)
    exp, man = body >> fmt.man_bits, body & ((1 << fmt.man_bits) - 1)
    if fmt.ieee_specials and exp == (1 << fmt.exp_bits) - 1:
        return sign * math.inf if man == 0 else math.nan
    if not fmt.ieee_specials and fmt.nan is not None and body == fmt.nan:
        return math.nan
    if exp == 0 and fmt.man_bits > 0:
        return sign * man * 2.0 ** (1 - fmt.bias - fmt.man_bits)
    return sign * (1 + man / (1 << fmt.man_bits)) * 2.0 ** (exp - fmt.bias)


def _encode(fmt: _Format, value: float, name: str) -> int:
    width = fmt.exp_bits + fmt.man_bits
    sign_bit = (1 << width) if fmt.signed and math.copysign(1.0, value) < 0 else 0
    if value < 0 and not fmt.signed:
        raise IRTypeError(f"{name} cannot represent the negative value {value}")
    if math.isnan(value):
        if fmt.ieee_specials:
            return sign_bit | (((1 << fmt.exp_bits) - 1) << fmt.man_bits) | (1 << max(fmt.man_bits - 1, 0))
        if fmt.nan is None:
            raise IRTypeError(f"{name} has no NaN")
        return sign_bit | fmt.nan
    magnitude = abs(value)
    if math.isinf(magnitude):
        if not fmt.ieee_specials:
            raise IRTypeError(f"{name} has no infinity")
        return sign_bit | (((1 << fmt.exp_bits) - 1) << fmt.man_bits)
    body = _round_magnitude(fmt, magnitude)
    limit = _max_finite_body(fmt)
    if body > limit:
        if not fmt.ieee_specials:
            raise IRTypeError(f"{value} is outside the finite range of {name}")
        body = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    return sign_bit | body


def _max_finite_body(fmt: _Format) -> int:
    top = (1 << (fmt.exp_bits + fmt.man_bits)) - 1
    if fmt.ieee_specials:
        return (((1 << fmt.exp_bits) - 1) << fmt.man_bits) - 1
    return top - 1 if fmt.nan == top else top


def _round_magnitude(fmt: _Format, magnitude: float) -> int:
    if magnitude == 0:
        if fmt.man_bits == 0:
            raise IRTypeError("f8E8M0FNU cannot represent zero")
        return 0
    exp = max(math.frexp(magnitude)[1] - 1, 1 - fmt.bias)
    scaled = magnitude / 2.0 ** (exp - fmt.man_bits)  # exact: a power-of-two scaling
    mantissa = _round_half_even(scaled)
    if mantissa >= 2 << fmt.man_bits:
        mantissa //= 2
        exp += 1
    if mantissa < (1 << fmt.man_bits):
        return mantissa if fmt.man_bits else 0
    return ((exp + fmt.bias) << fmt.man_bits) | (mantissa - (1 << fmt.man_bits))


def _round_half_even(x: float) -> int:
    floor = math.floor(x)
    rest = x - floor
    if rest > 0.5 or (rest == 0.5 and floor % 2 == 1):
        return floor + 1
    return floor
