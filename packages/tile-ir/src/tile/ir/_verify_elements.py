"""Element types each op accepts, per side (operands or results), as tileiras 13.5's verifier has them.

Arithmetic takes ``INTS`` or ``FLOATS`` (`_verify_types` applies those). The rows of `ELEMENTS` cover the ops
whose sets differ, each measured with tileirdisasm 13.5 over every element type:

- i4 exists for storage and shuffling only: ``trunci``/``exti``, ``select``, ``reshape``, ``permute``, ``cat``,
  ``extract``, ``broadcast`` and ``pack``/``unpack`` take it. Constants, bitcasts, ``itof`` sources and
  ``ftoi`` results do not, and neither do pointers (`_verify_typedefs`);
- ``select`` cannot operate on f4E2M1FN (a sub-byte type); ``itof`` cannot produce f8E8M0FNU.
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._ir import Operation
from tile.ir._types import SCALARS, ScalarType, TileType

__all__ = ["ELEMENTS", "ELEMENT_RULES", "FLOATS", "INTS"]

INTS = ("i1", "i8", "i16", "i32", "i64")
FLOATS = ("f16", "bf16", "f32", "f64")
_ALL = frozenset(s.name for s in SCALARS)
_NO_I4 = _ALL - {"i4"}
ELEMENTS: dict[str, dict[str, tuple[frozenset[str], str]]] = {
    # op: {side: (allowed element names, why the others are refused)}
    "constant": {"results": (_NO_I4, "i4 is a storage type; build the constant as i8 and trunci it")},
    "bitcast": {
        "operands": (_NO_I4, "i4 is a storage type; exti it first"),
        "results": (_NO_I4, "i4 is a storage type; bitcast to i8 and trunci"),
    },
    "itof": {
        "operands": (frozenset(INTS), "exti an i4 source to i8 first"),
        "results": (_ALL - {"f8E8M0FNU", "i1", "i4", "i8", "i16", "i32", "i64"}, "convert to another float, then ftof"),
    },
    "ftoi": {"results": (frozenset(INTS), "convert to i8, then trunci to i4")},
    "select": {"results": (_ALL - {"f4E2M1FN"}, "f4E2M1FN is sub-byte; select on a wider type and convert")},
}


def _elements(op: Operation) -> list[str]:
    problems = []
    for side, (allowed, hint) in ELEMENTS[op.name].items():
        values = op.operands if side == "operands" else op.results
        for value in values:
            elem = value.type.element if isinstance(value.type, TileType) else None
            if isinstance(elem, ScalarType) and elem.name in _ALL and elem.name not in allowed:
                what = "operand" if side == "operands" else "result"
                problems.append(f"{op.name} does not take a {elem.name} {what} ({hint})")
    return problems


ELEMENT_RULES: dict[str, Callable[[Operation], list[str]]] = dict.fromkeys(ELEMENTS, _elements)
