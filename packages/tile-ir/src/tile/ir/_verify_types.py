"""Per-op typing rules of the verifier: one small check per op kind, looked up by op name.

Each rule returns a list of problems (empty when the op is well typed). Rules only read the op; structure,
dominance and version availability are checked in `_verifier`.
"""

from __future__ import annotations

from collections.abc import Callable

from tile.ir._ir import Operation
from tile.ir._types import (
    GatherScatterViewType,
    PartitionViewType,
    PointerType,
    ScalarType,
    StridedViewType,
    TileType,
    TokenType,
    Type,
    i1,
)
from tile.ir._verify_atomics import ATOMIC_RULES
from tile.ir._verify_elements import ELEMENT_RULES, FLOATS, INTS, pointer_problems
from tile.ir._verify_memory import MEMORY_RULES, token_problems
from tile.ir._verify_misc import DIVI_RULE, MISC_RULES, PRINT_RULE
from tile.ir._verify_mma import MMA_RULES
from tile.ir._verify_views import VIEW_ACCESS, VIEW_RULES
from tile.ir.ops import CATALOG

__all__ = ["type_problems"]

_FLOAT_SAME = "addf subf mulf divf fma maxf minf remf negf absf ceil floor cos cosh sin sinh tan log log2 exp exp2"
_FLOAT_SAME += " rsqrt sqrt tanh pow atan2"
_INT_SAME = "addi subi muli shli divi remi maxi mini shri andi ori xori mulhii absi negi"


def _elem(t: Type) -> ScalarType | PointerType | None:
    return t.element if isinstance(t, TileType) else None


def _kind_problem(t: Type, kind: str) -> list[str]:
    elem = _elem(t)
    allowed = INTS if kind == "int" else FLOATS
    if not isinstance(elem, ScalarType) or elem.name not in allowed:
        return [f"expects {kind} tiles of {', '.join(allowed)}, got {t}"]
    return []


def _same_all(kind: str) -> Callable[[Operation], list[str]]:
    def rule(op: Operation) -> list[str]:
        types = [v.type for v in op.operands] + [v.type for v in op.results]
        if any(t != types[0] for t in types):
            return [f"all operands and the result must have the same type, got {', '.join(map(str, types))}"]
        return _kind_problem(types[0], kind)

    return rule


def _compare(kind: str) -> Callable[[Operation], list[str]]:
    def rule(op: Operation) -> list[str]:
        lhs, rhs = (v.type for v in op.operands)
        res = op.results[0].type
        if lhs != rhs or not isinstance(lhs, TileType):
            return [f"operands must be tiles of one type, got {lhs} and {rhs}"]
        problems = _kind_problem(lhs, kind)
        if res != lhs.with_element(i1):
            problems.append(f"result must be {lhs.with_element(i1)}, got {res}")
        return problems

    return rule


def _select(op: Operation) -> list[str]:
    cond, yes, no = (v.type for v in op.operands)
    res = op.results[0].type
    if yes != res or no != res or not isinstance(res, TileType):
        return [f"both values and the result must have one tile type, got {yes}, {no} -> {res}"]
    if cond != res.with_element(i1):
        return [f"condition must be {res.with_element(i1)}, got {cond}"]
    return []


def _convert(src_float: bool | None, dst_float: bool | None) -> Callable[[Operation], list[str]]:
    def rule(op: Operation) -> list[str]:
        src, dst = op.operands[0].type, op.results[0].type
        if not isinstance(src, TileType) or not isinstance(dst, TileType) or src.shape != dst.shape:
            return [f"conversion keeps the tile shape: {src} -> {dst}"]
        for t, want in ((src.element, src_float), (dst.element, dst_float)):
            if want is not None and (not isinstance(t, ScalarType) or t.is_float != want):
                return [f"conversion {src} -> {dst} needs {'float' if want else 'integer'} element types"]
        return []

    return rule


def _fpowi(op: Operation) -> list[str]:
    base, exp = (v.type for v in op.operands)
    if base != op.results[0].type or not isinstance(exp, TileType) or not isinstance(base, TileType):
        return ["fpowi: result must have the base's type and the exponent must be a tile"]
    if kinds := _kind_problem(base, "float") + _kind_problem(exp, "int"):  # a pointer tile is neither
        return [f"fpowi: {problem}" for problem in kinds]
    return [] if exp.shape == base.shape else [f"fpowi: exponent shape {exp.shape} differs from {base.shape}"]


def _broadcast(op: Operation) -> list[str]:
    src, dst = op.operands[0].type, op.results[0].type
    if not isinstance(src, TileType) or not isinstance(dst, TileType) or src.element != dst.element:
        return [f"broadcast keeps the element type: {src} -> {dst}"]
    if src.rank != dst.rank or any(s not in (1, d) for s, d in zip(src.shape, dst.shape, strict=True)):
        return [f"broadcast only stretches size-1 dims of the same rank: {src} -> {dst}"]
    return []


def _count(t: TileType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _reshape(op: Operation) -> list[str]:
    src, dst = op.operands[0].type, op.results[0].type
    if not isinstance(src, TileType) or not isinstance(dst, TileType) or src.element != dst.element:
        return [f"reshape keeps the element type: {src} -> {dst}"]
    return [] if _count(src) == _count(dst) else [f"reshape keeps the element count: {src} -> {dst}"]


def _permute(op: Operation) -> list[str]:
    src, dst = op.operands[0].type, op.results[0].type
    perm = op.attributes.get("permutation", ())
    if not isinstance(src, TileType) or not isinstance(dst, TileType) or not isinstance(perm, tuple):
        return ["permute needs tile operand and result"]
    if sorted(perm) != list(range(src.rank)):
        return [f"permutation {list(perm)} is not a permutation of {src.rank} dims"]
    want = src.with_shape(tuple(src.shape[p] for p in perm))
    return [] if dst == want else [f"permute result must be {want}, got {dst}"]


def _constant(op: Operation) -> list[str]:
    value = op.attributes.get("value")
    res = op.results[0].type
    if getattr(value, "type", None) != res:
        return [f"constant value type {getattr(value, 'type', None)} differs from result type {res}"]
    return dense_size_problems(res, getattr(value, "data", b""))


def dense_size_problems(t: Type, data: bytes) -> list[str]:
    """A dense buffer holds one element (a splat) or every element (i1 bit-packed, tf32 in 3 bytes)."""
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType):
        return [f"a dense constant needs a tile of numbers, got {t}"]
    count = 1
    for d in t.shape:
        count *= d
    bits = t.element.bits
    width = 3 if t.element.name == "tf32" else max(bits // 8, 1)
    full = (count + 7) // 8 if bits == 1 else count * width
    if len(data) not in (1 if bits == 1 else width, full):
        return [f"constant of {t} needs {full} bytes (or one element), got {len(data)}"]
    return []


def _tokens(op: Operation) -> list[str]:
    bad = [v for v in op.operands if not isinstance(v.type, TokenType)]
    return [f"expects token operands, got {bad[0].type}"] if bad else []


_Rule = Callable[[Operation], list[str]]


def _chain(first: _Rule, then: _Rule) -> _Rule:
    return lambda op: first(op) + then(op)


_RULES: dict[str, Callable[[Operation], list[str]]] = {
    **MEMORY_RULES,
    **MISC_RULES,
    **{name: _same_all("float") for name in _FLOAT_SAME.split()},
    **{name: _same_all("int") for name in _INT_SAME.split()},
    "divi": lambda op: _same_all("int")(op) + DIVI_RULE(op),
    "cmpf": _compare("float"),
    "cmpi": _compare("int"),
    "select": _select,
    "fpowi": _fpowi,
    "ftof": lambda op: _convert(True, True)(op) or MISC_RULES["ftof"](op),
    "ftoi": _convert(True, False),
    "itof": _convert(False, True),
    "exti": lambda op: _convert(False, False)(op) or MISC_RULES["exti"](op),
    "trunci": lambda op: _convert(False, False)(op) or MISC_RULES["trunci"](op),
    "broadcast": _broadcast,
    "reshape": _reshape,
    "permute": _permute,
    "print_tko": lambda op: token_problems(op) + PRINT_RULE(op),
    "constant": _constant,
    "join_tokens": _tokens,
    "memory_fence_alias_tko": _tokens,
    **MMA_RULES,
    **VIEW_RULES,
}
for _name, _rule in [
    *ATOMIC_RULES.items(),
    *ELEMENT_RULES.items(),
    *((name, VIEW_RULES[name]) for name in VIEW_ACCESS),
]:
    _RULES[_name] = _chain(_RULES.get(_name, token_problems), _rule)


def type_problems(op: Operation) -> list[str]:
    """Return the typing problems of `op` (empty when it is well typed or has no rule)."""
    rule = _RULES.get(op.name)
    own = rule(op) if rule is not None else []
    return _token_results(op) + _view_operands(op) + pointer_problems(op) + own


def _token_results(op: Operation) -> list[str]:
    opdef = CATALOG[op.name]
    tokens = [r.name for r in opdef.results if "token" in r.name] if not opdef.variadic_results else []
    names = [r.name for r in opdef.results]
    problems = []
    for value, name in zip(op.results, names, strict=False):
        wants_token = name in tokens or (opdef.infer == "token" and len(names) == 1)
        if wants_token and not isinstance(value.type, TokenType):
            problems.append(f"result '{name}' must be a token, got {value.type}")
    return problems


def _view_operands(op: Operation) -> list[str]:
    opdef = CATALOG[op.name]
    problems = []
    for index, spec in enumerate(opdef.operands):
        if spec.name == "view" and index < len(op.segments) and op.segments[index]:
            t = op.operand_group(index)[0].type
            if not isinstance(t, (PartitionViewType, StridedViewType, GatherScatterViewType)):
                problems.append(f"operand 'view' must be a partition, strided or gather/scatter view, got {t}")
    return problems
