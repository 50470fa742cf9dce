"""Floating-point literals exactly as MLIR prints them, and exact decimal-to-format rounding.

MLIR prints a float in scientific form with 6 significant decimals (``1.500000e+00``) when that text reads
back to the same bits, otherwise in LLVM's shortest round-trip form (``9.99999997E-7``) when that has a
decimal point, otherwise as the hexadecimal bit pattern (``0xFF800000`` for -inf). Both decimal forms come
from LLVM's ``APFloat::toString``, whose digit generation (truncating division, then round-half-up on the
digit string) is reproduced here on Python integers, so every value prints the same as `tileirdisasm`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from tile.ir._floats import float_from_bits
from tile.ir._types import ScalarType

__all__ = ["float_bits_from_text", "float_text", "round_to_format"]

# name: (exponent bits, mantissa bits, has IEEE inf/nan)
_FORMATS: dict[str, tuple[int, int, bool]] = {
    "f16": (5, 10, True),
    "bf16": (8, 7, True),
    "f32": (8, 23, True),
    "tf32": (8, 10, True),
    "f64": (11, 52, True),
    "f8E4M3FN": (4, 3, False),
    "f8E5M2": (5, 2, True),
    "f8E8M0FNU": (8, 0, False),
    "f4E2M1FN": (2, 1, False),
}


def _precision(name: str) -> int:
    return _FORMATS[name][1] + 1


def _trim_to_precision(digits: str, exp: int, precision: int) -> tuple[str, int]:
    """Round the digit string (most significant first) to `precision` digits, half up (LLVM's rule)."""
    if len(digits) <= precision:
        return digits, exp
    cut = len(digits) - precision
    exp += cut
    head, rest = digits[:precision], digits[precision:]
    if rest[0] < "5":
        stripped = head.rstrip("0")
        return stripped, exp + (len(head) - len(stripped))
    value = int(head) + 1
    text = str(value)
    if len(text) > len(head):
        return "1", exp + len(head)
    stripped = text.rstrip("0")
    return stripped, exp + (len(text) - len(stripped))


def _decimal_digits(value: Fraction, precision: int) -> tuple[str, int]:
    """Digits and decimal exponent of |value| > 0, as APFloat's toStringImpl derives them."""
    num, den = value.numerator, value.denominator
    exp2 = -(den.bit_length() - 1)
    while num % 2 == 0:
        num //= 2
        exp2 += 1
    if exp2 >= 0:
        significand, exp = num << exp2, 0
    else:
        significand, exp = num * 5 ** (-exp2), exp2
    bits = significand.bit_length()
    required = (precision * 196 + 58) // 59
    if bits > required:
        removable = (bits - required) * 59 // 196
        if removable:
            significand //= 10**removable
            exp += removable
    text = str(significand)
    stripped = text.rstrip("0")
    exp += len(text) - len(stripped)
    return _trim_to_precision(stripped, exp, precision)


def _apfloat_string(value: Fraction, name: str, precision: int, max_padding: int, truncate_zero: bool) -> str:
    sign = "-" if value < 0 else ""
    if value == 0:
        return sign + ("0.0E+0" if truncate_zero else "0.0" + "0" * max(precision - 1, 0) + "e+00")
    if precision == 0:
        precision = 2 + _precision(name) * 59 // 196
    digits, exp = _decimal_digits(abs(value), precision)
    n = len(digits)
    msd = exp + n - 1
    if max_padding == 0:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or n + exp > precision
    else:
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        frac = "0" if n == 1 and truncate_zero else digits[1:]
        if not truncate_zero and precision > n - 1:
            frac += "0" * (precision - n + 1)
        exp_text = str(abs(msd)).rjust(1 if truncate_zero else 2, "0")
        return f"{sign}{digits[0]}.{frac}{'E' if truncate_zero else 'e'}{'+' if msd >= 0 else '-'}{exp_text}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + n
    if whole > 0:
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    return f"{sign}0.{'0' * -whole}{digits}"


def round_to_format(value: Fraction, name: str) -> Fraction | None:
    """Round `value` to the nearest (ties to even) number of format `name`; None when it overflows."""
    exp_bits, man_bits, ieee = _FORMATS[name]
    if value == 0:
        return Fraction(0)
    bias = (1 << (exp_bits - 1)) - 1
    mag = abs(value)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    e = max(e, 1 - bias)
    quantum = Fraction(2) ** (e - man_bits)
    q = mag / quantum
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    rounded = n * quantum
    max_exp = (1 << exp_bits) - 2 - bias if ieee else (1 << exp_bits) - 1 - bias
    largest = (2 - Fraction(1, 1 << man_bits)) * Fraction(2) ** max_exp
    if rounded > largest:
        return None
    return rounded if value > 0 else -rounded


def _reads_back(text: str, value: Fraction, name: str) -> bool:
    return round_to_format(Fraction(text), name) == value


def float_text(type: ScalarType, bits: int) -> str:
    """Return the text MLIR prints for the float of type `type` with bit pattern `bits`."""
    number = float_from_bits(type.name, bits)
    if math.isfinite(number):
        value = Fraction(number)
        if value == 0 and str(number).startswith("-"):
            return "-0.000000e+00"
        text = _apfloat_string(value, type.name, 6, 0, truncate_zero=False)
        if _reads_back(text, value, type.name):
            return text
        text = _apfloat_string(value, type.name, 0, 3, truncate_zero=True)
        if "." in text:
            return text
    return f"0x{bits:X}"


def float_bits_from_text(type: ScalarType, text: str) -> int:
    """Return the bit pattern of the float literal `text` (decimal or ``0x`` bits) in `type`.

    Raises `ValueError` if the literal does not fit the type.
    """
    from tile.ir._floats import float_to_bits

    if text.lower().startswith(("0x", "-0x", "+0x")):
        return int(text, 16)
    value = round_to_format(Fraction(text), type.name)
    if value is None:
        raise ValueError(f"{text} is out of range for {type.name}")
    if value == 0 and text.lstrip().startswith("-"):
        return float_to_bits(type.name, -0.0)
    return float_to_bits(type.name, float(value))
