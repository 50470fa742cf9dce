"""Format strings of ``tile.printf``: the conversions a safe kernel may pass to the device's ``printf``.

On the GPU, Tile IR's ``print_tko`` becomes a ``vprintf`` call, which reads one argument per conversion from the
argument buffer the kernel packs, by the conversion's own type. A conversion that reads something else is a memory
access the compiler cannot check: ``%s`` (and ``%p`` printed by address) dereferences the value as a pointer, ``%n``
writes through one, and ``*`` for a width or precision takes one more argument than the format seems to have, reading
past the buffer. So a format may hold only ``%%`` and ``%[flags][width][.precision][length]conv`` with ``conv`` in
``diuoxX`` for integers and ``eEfFgGaA`` for floats (cuTile Python's set), each matching its argument's kind.

Invariant: `format_problem` is None exactly when every ``%`` of the format starts ``%%`` or one such conversion, the
conversions are as many as the arguments, and each one's kind and length fit its argument's dtype.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tile.compiler._types import DType

__all__ = ["escape", "format_problem"]

_CONVERSION = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?(hh|h|ll|l)?([diuoxXeEfFgGaA]))")
_INT, _FLOAT = "diuoxX", "eEfFgGaA"


def escape(text: str) -> str:
    """``text`` as literal format text (every ``%`` doubled)."""
    return text.replace("%", "%%")


def format_problem(fmt: str, dtypes: Sequence[DType]) -> str | None:
    """Why ``fmt`` may not print arguments of ``dtypes`` (in order), or None when it may."""
    convs: list[tuple[str, str, str]] = []
    pos = 0
    while (start := fmt.find("%", pos)) >= 0:
        m = _CONVERSION.match(fmt, start)
        if m is None:
            return (
                f"the format has {fmt[start : start + 4]!r} at {start}, which is not a conversion Tile prints: use "
                "%% or %[flags][width][.precision][length]conv with conv one of diuoxX (integers) or eEfFgGaA "
                "(floats); %s, %p, %n, %c and '*' widths read or write memory the kernel cannot check"
            )
        if m.group(0) != "%%":
            convs.append((m.group(0), m.group(1) or "", m.group(2)))
        pos = m.end()
    if len(convs) != len(dtypes):
        return f"the format has {len(convs)} conversions but {len(dtypes)} values were given"
    problems = (_mismatch(text, length, conv, dt) for (text, length, conv), dt in zip(convs, dtypes, strict=True))
    return next((p for p in problems if p is not None), None)


def _mismatch(text: str, length: str, conv: str, dt: DType) -> str | None:
    """Why conversion ``text`` (its length modifier and conversion letter) may not print a ``dt`` value."""
    if conv in _FLOAT and not dt.is_float:
        return f"the conversion {text} prints a float but its value is {dt.name}; use %d, %u or %x"
    if conv in _INT and dt.is_float:
        return f"the conversion {text} prints an integer but its value is {dt.name}; use %f, %e or %g"
    if conv in _INT and length in ("l", "ll") and dt.bits < 64:
        return f"the conversion {text} reads a 64-bit integer but its value is {dt.name}; drop the '{length}'"
    if conv in _FLOAT and length not in ("", "l"):
        return f"the conversion {text} has the length '{length}', which a float conversion does not take"
    return None
