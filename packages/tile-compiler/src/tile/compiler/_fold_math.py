"""Python's `math` functions in kernel code, folded at compile time when every argument is a compile-time number.

Ported kernels write constants the way Python does (``math.sqrt(2.0 / math.pi)`` in a GELU, ``math.log2(e)`` in a
softmax); those fold to a Python number like any other constant expression. On a tile or run-time scalar they are a
compile error that names the tile op to use instead.

Invariants: only the pure functions listed in `_MATH` fold (no `math` function that takes or returns anything but
numbers), applied to the exact number each argument holds, whatever its class; a math domain or range error
(``math.sqrt(-1.0)``, ``math.exp(1e6)``) is a compile error at the call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NoReturn

from tile.compiler._typecheck_arith import is_const

__all__ = ["fold_math", "math_function_name"]

# The math functions that fold, with the tile op that does the same on tiles ("" where there is none).
_MATH: dict[str, str] = {
    "sqrt": "tile.sqrt",
    "exp": "tile.exp",
    "exp2": "tile.exp2",
    "log": "tile.log",
    "log2": "tile.log2",
    "log10": "",
    "log1p": "",
    "expm1": "",
    "sin": "tile.sin",
    "cos": "tile.cos",
    "tan": "tile.tan",
    "asin": "",
    "acos": "",
    "atan": "",
    "atan2": "tile.atan2",
    "sinh": "tile.sinh",
    "cosh": "tile.cosh",
    "tanh": "tile.tanh",
    "erf": "",
    "erfc": "",
    "pow": "tile.pow",
    "hypot": "",
    "floor": "tile.floor",
    "ceil": "tile.ceil",
    "trunc": "",
    "fabs": "tile.abs",
    "copysign": "",
    "fmod": "",
    "isqrt": "",
    "gcd": "",
    "lcm": "",
    "log_gamma": "",
    "degrees": "",
    "radians": "",
    "isfinite": "",
    "isinf": "",
    "isnan": "tile.isnan",
}
_BY_ID: dict[int, str] = {id(getattr(math, n)): n for n in _MATH if hasattr(math, n)}


def math_function_name(fn: object) -> str | None:
    """The name of ``fn`` when it is one of the foldable `math` functions, else None."""
    name = _BY_ID.get(id(fn))
    return name if name is not None and getattr(math, name) is fn else None


def fold_math(name: str, args: list[object], kwargs: dict[str, object], fail: Callable[[str], NoReturn]) -> object:
    """``math.<name>(*args)`` on compile-time numbers; ``fail`` reports a misuse at the call."""
    if kwargs or not args or not all(is_const(a) for a in args):
        instead = _MATH[name]
        use = f"; on a tile or run-time value use {instead}" if instead else "; it has no tile op"
        fail(f"math.{name}() only folds compile-time numbers in kernel code{use}")
    # The numbers themselves: an IntEnum member (a compile-time value) is an int whose class may define __floor__,
    # __ceil__, __trunc__ or __float__, which math calls and which may return anything (math.ceil gave a tuple).
    exact = [_exact(a) for a in args]
    try:
        value: object = getattr(math, name)(*exact)
    except (ValueError, OverflowError, ZeroDivisionError, TypeError) as err:
        fail(f"math.{name}({', '.join(map(repr, exact))}) fails at compile time: {err}")
    if type(value) not in (int, float, bool):  # math's own functions of exact numbers return exact numbers
        fail(f"math.{name}() returned a {type(value).__name__}, not a number")
    return value


def _exact(a: object) -> int | float | bool:
    """``a`` (a bool, int or float, maybe of a subclass) as the exact builtin number it holds, no method of its class
    run (the base classes' own conversions copy the stored value)."""
    if isinstance(a, bool):
        return bool(a)
    if isinstance(a, int):
        return int.__int__(a)
    return float.__float__(a)  # type: ignore[arg-type]  # is_const: a float
