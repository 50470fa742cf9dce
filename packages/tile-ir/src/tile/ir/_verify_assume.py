"""The verifier's rules for ``assume`` predicates (checked against tileirdisasm/tileiras 13.5).

- ``div_by<d[, every, along]>``: ``d`` a power of two up to 2**62; ``every`` and ``along`` come together, name a
  dim of the tile (``0 <= along < rank``) and a count ``0 <= every <= shape[along]``; the value is an integer or
  pointer tile, or a tensor_view (which takes no ``every``/``along``), and a scalar tile takes none either;
- ``same_elements<[n0, n1, ...]>``: one count per dim, each ``0 <= n <= shape[dim]``, on integer or pointer tiles;
- ``bounded<lb, ub>``: integer tiles only, each bound within the element type's signed range, ``lb <= ub``.
"""

from __future__ import annotations

from tile.ir._attrs import Bounded, DivBy, SameElements
from tile.ir._ir import Operation
from tile.ir._types import PointerType, ScalarType, TensorViewType, TileType, Type

__all__ = ["assume_problems"]

_MAX_DIVISOR = 2**62


def _int_or_pointer(t: Type, *, pointers: bool = True) -> bool:
    if not isinstance(t, TileType):
        return False
    elem = t.element
    return (isinstance(elem, ScalarType) and elem.is_int) or (pointers and isinstance(elem, PointerType))


def _div_by(p: DivBy, t: Type) -> list[str]:
    problems = []
    if p.divisor <= 0 or p.divisor & (p.divisor - 1) or p.divisor > _MAX_DIVISOR:
        problems.append(f"div_by divisor {p.divisor} must be a power of two up to 2**62")
    if (p.every is None) != (p.along is None):
        return [*problems, "div_by takes 'every' and 'along' together or neither"]
    if isinstance(t, TensorViewType):
        return problems + (["div_by on a tensor_view takes no 'every'/'along'"] if p.every is not None else [])
    if not _int_or_pointer(t):
        return [*problems, f"div_by applies to integer or pointer tiles and tensor views, got {t}"]
    assert isinstance(t, TileType)
    if p.every is None or p.along is None:
        return problems
    if not 0 <= p.along < t.rank:
        return [*problems, f"div_by along={p.along} must name a dim of {t}"]
    if not 0 <= p.every <= t.shape[p.along]:
        problems.append(f"div_by every={p.every} must be within 0..{t.shape[p.along]} (dim {p.along} of {t})")
    return problems


def _same_elements(p: SameElements, t: Type) -> list[str]:
    if not _int_or_pointer(t):
        return [f"same_elements applies to integer or pointer tiles, got {t}"]
    assert isinstance(t, TileType)
    if len(p.values) != t.rank:
        return [f"same_elements needs one count per dim of {t}, got {list(p.values)}"]
    bad = [i for i, (n, d) in enumerate(zip(p.values, t.shape, strict=True)) if not 0 <= n <= d]
    return [f"same_elements counts must be within 0..dim size, got {list(p.values)} for {t}"] if bad else []


def _bounded(p: Bounded, t: Type) -> list[str]:
    if not _int_or_pointer(t, pointers=False):
        return [f"bounded applies to integer tiles, got {t}"]
    assert isinstance(t, TileType)
    assert isinstance(t.element, ScalarType)
    lo, hi = -(2 ** (t.element.bits - 1)), 2 ** (t.element.bits - 1) - 1
    problems = [
        f"bounded {name} {value} is outside the signed range [{lo}, {hi}] of {t.element}"
        for name, value in (("lower bound", p.lb), ("upper bound", p.ub))
        if value is not None and not lo <= value <= hi
    ]
    if p.lb is not None and p.ub is not None and p.lb > p.ub:
        problems.append(f"bounded lower bound {p.lb} exceeds the upper bound {p.ub}")
    return problems


def assume_problems(op: Operation) -> list[str]:
    """Return the problems of an ``assume`` op: its predicate, and its result having the operand's type."""
    predicate = op.attributes.get("predicate")
    t = op.operands[0].type
    problems = [] if op.results[0].type == t else ["assume yields its operand's type"]
    if isinstance(predicate, DivBy):
        return problems + _div_by(predicate, t)
    if isinstance(predicate, SameElements):
        return problems + _same_elements(predicate, t)
    if isinstance(predicate, Bounded):
        return problems + _bounded(predicate, t)
    return [*problems, f"assume needs a div_by, same_elements or bounded predicate, got {predicate!r}"]
