"""Element types each op accepts, per side (operands or results), as tileiras 13.5's verifier has them.

Arithmetic takes ``INTS`` or ``FLOATS`` (`_verify_types` applies those). The rows of `ELEMENTS` cover the ops
whose sets differ, each measured with tileirdisasm 13.5 over every element type:

- i4 exists for storage and shuffling only: ``trunci``/``exti``, ``select``, ``reshape``, ``permute``, ``cat``,
  ``extract``, ``broadcast`` and ``pack``/``unpack`` take it. Constants, bitcasts, ``iota``, ``itof`` sources
  and ``ftoi`` results do not, and neither do pointers (`_verify_typedefs`);
- ``select`` cannot operate on f4E2M1FN (a sub-byte type); ``itof`` cannot produce f8E8M0FNU; ``bitcast``
  takes no tf32 (tileiras counts it 19 bits wide); ``fpowi`` raises f16/bf16/f32/f64 to an i1..i32 power;
- ``reduce``/``scan`` over i4, tf32 or 8-bit floats pass tileirdisasm but tileiras cannot compile them.

Pointer elements are refused everywhere except where the spec takes any tile or a pointer tile: `POINTERS` names,
per op, the sides (operand groups or ``"results"``) that may hold ``tile<ptr<...>>`` values, and `pointer_problems`
applies it to every op of the catalog, so an op added without an entry takes numbers only. tileiras' own verifier
refuses the rest (arithmetic, math, comparisons, conversions other than the pointer casts, bitcast, pack/unpack,
reductions, mma, iota, constants), and the interpreter has no semantics for them.

`F32_ROUNDINGS` lists the rounding modes that are f32-only modifiers per op (``approx``, and ``full`` for
``divf``); ``flush_to_zero`` is f32-only on every op that has it.
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._enums import RoundingMode
from tile.ir._ir import Operation, Value
from tile.ir._types import SCALARS, PointerType, ScalarType, TileType
from tile.ir.ops import CATALOG

__all__ = ["ELEMENTS", "ELEMENT_RULES", "FLOATS", "INTS", "POINTERS", "pointer_problems"]

INTS = ("i1", "i8", "i16", "i32", "i64")
FLOATS = ("f16", "bf16", "f32", "f64")
_ALL = frozenset(s.name for s in SCALARS)
_NO_I4 = _ALL - {"i4"}
_COMBINABLE = frozenset(INTS + FLOATS)
_NO_COMBINE = "tileiras 13.5 fails to compile it, with no detail; convert to f32 (or i8) first"
ELEMENTS: dict[str, dict[str, tuple[frozenset[str], str]]] = {
    # op: {side ("operands", "results" or one operand group): (allowed element names, why the others are refused)}
    "constant": {"results": (_NO_I4, "i4 is a storage type; build the constant as i8 and trunci it")},
    "bitcast": {  # tileiras counts tf32 as 19 bits wide, so no type has its width
        "operands": (_NO_I4 - {"tf32"}, "i4 is a storage type and tf32 has no same-width partner; convert first"),
        "results": (_NO_I4 - {"tf32"}, "i4 is a storage type and tf32 has no same-width partner; convert first"),
    },
    "itof": {
        "operands": (frozenset(INTS), "exti an i4 source to i8 first"),
        "results": (_ALL - {"f8E8M0FNU", "i1", "i4", "i8", "i16", "i32", "i64"}, "convert to another float, then ftof"),
    },
    "ftoi": {"results": (frozenset(INTS), "convert to i8, then trunci to i4")},
    "iota": {"results": (frozenset(INTS), "count in i8 and trunci to i4")},
    "select": {"results": (_ALL - {"f4E2M1FN"}, "f4E2M1FN is sub-byte; select on a wider type and convert")},
    "fpowi": {
        "source": (frozenset(FLOATS), "use f16, bf16, f32 or f64"),
        "exponent": (frozenset(INTS) - {"i64"}, "the exponent is at most 32 bits; trunci it"),
    },
    # tileirdisasm accepts the others, but tileiras 13.5 fails to compile them ("failed to compile Tile IR program")
    "reduce": {"operands": (_COMBINABLE, _NO_COMBINE)},
    "scan": {"operands": (_COMBINABLE, _NO_COMBINE)},
}

_SHUFFLE = frozenset({"source", "results"})  # data movement: the element type passes through unchanged
_CARRIED = frozenset({"operands", "initValues", "results"})  # control flow carries values of any type
POINTERS: dict[str, frozenset[str]] = {
    # op: the sides that may hold pointer tiles (every other side of every op takes numbers only)
    "offset": frozenset({"ptr", "results"}),
    "load_ptr_tko": frozenset({"source"}),
    "store_ptr_tko": frozenset({"destination"}),
    "atomic_rmw_tko": frozenset({"pointers"}),
    "atomic_cas_tko": frozenset({"pointers"}),
    "int_to_ptr": frozenset({"results"}),
    "ptr_to_int": frozenset({"source"}),
    "ptr_to_ptr": _SHUFFLE,
    "get_global": frozenset({"results"}),
    "alloca": frozenset({"results"}),
    "make_tensor_view": frozenset({"base"}),
    "assume": frozenset({"value", "results"}),  # div_by on pointers is how alignment is stated
    "select": frozenset({"val_if_true", "val_if_false", "results"}),
    "broadcast": _SHUFFLE,
    "reshape": _SHUFFLE,
    "permute": _SHUFFLE,
    "extract": _SHUFFLE,
    "cat": frozenset({"lhs", "rhs", "results"}),
    "insert": frozenset({"source", "destination", "results"}),
    "print_tko": frozenset({"args"}),  # the spec's print takes any tile
    **dict.fromkeys(("if", "for", "loop", "yield", "continue", "break"), _CARRIED),
}


def pointer_problems(op: Operation) -> list[str]:
    """Pointer tiles on a side of `op` that `POINTERS` does not open to them (any op of the catalog)."""
    allowed = POINTERS.get(op.name, frozenset())
    opdef = CATALOG[op.name]
    sides = [(spec.name, op.operand_group(i)) for i, spec in enumerate(opdef.operands)]
    problems = []
    for side, values in [*sides, ("results", list(op.results))]:
        if side in allowed or (side != "results" and "operands" in allowed):
            continue
        for value in values:
            elem = value.type.element if isinstance(value.type, TileType) else None
            if isinstance(elem, PointerType):
                what = "result" if side == "results" else f"operand '{side}'"
                problems.append(
                    f"{op.name} does not take pointer tiles ({what} is {value.type}); "
                    "convert with ptr_to_int first, or use offset for pointer arithmetic"
                )
                break
    return problems


_R = RoundingMode
F32_ROUNDINGS: dict[str, frozenset[RoundingMode]] = {
    "divf": frozenset({_R.APPROX, _R.FULL}),
    "sqrt": frozenset({_R.APPROX}),
    "exp": frozenset({_R.APPROX}),
    "tanh": frozenset({_R.APPROX}),
}


def _f32_modifiers(op: Operation) -> list[str]:
    """``flush_to_zero`` and the approx/full roundings exist only for f32 results."""
    t = op.results[0].type if op.results else None
    elem = t.element if isinstance(t, TileType) else None
    if not isinstance(elem, ScalarType) or elem.name == "f32":
        return []
    problems = []
    if op.attributes.get("flush_to_zero") is True:
        problems.append(f"flush_to_zero works only on f32, got {elem.name}; drop it")
    mode = op.attributes.get("rounding_mode")
    if mode in F32_ROUNDINGS.get(op.name, frozenset()):
        problems.append(f"rounding_mode {mode} works only on f32, got {elem.name}; use the default rounding")
    return problems


def _side(op: Operation, side: str) -> list[Value]:
    if side == "operands":
        return list(op.operands)
    if side == "results":
        return list(op.results)
    return op.operands_named(side)


def _elements(op: Operation) -> list[str]:
    problems = []
    for side, (allowed, hint) in ELEMENTS[op.name].items():
        for value in _side(op, side):
            elem = value.type.element if isinstance(value.type, TileType) else None
            if isinstance(elem, ScalarType) and elem.name in _ALL and elem.name not in allowed:
                what = {"operands": "operand", "results": "result"}.get(side, side)
                problems.append(f"{op.name} does not take a {elem.name} {what} ({hint})")
    return problems


ELEMENT_RULES: dict[str, Callable[[Operation], list[str]]] = dict.fromkeys(ELEMENTS, _elements)
_FTZ_OPS = {name for name, opdef in CATALOG.items() if any(a.name == "flush_to_zero" for a in opdef.attrs)}
ELEMENT_RULES |= dict.fromkeys(_FTZ_OPS | set(F32_ROUNDINGS), _f32_modifiers)
