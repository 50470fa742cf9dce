"""Typing of structured ops: region arguments, terminator operands and results must agree.

for: args = (iv: the bounds' scalar int type, carried...), carried = init = result types = continue operands.
loop: args = init types; continue operands = init types; break operands = result types.
if: condition is a scalar i1 tile; each branch's yield operands = result types.
reduce/scan: args = (element_i, accumulator_i) rank-0 tiles; yield operands = N rank-0 tiles; one identity
per operand.
"""

from __future__ import annotations

from tile.ir._attrs import ArrayAttr
from tile.ir._ir import Block, Operation
from tile.ir._types import ScalarType, TileType, Type, i1, scalar

__all__ = ["region_problems"]


def _types(values: list[object]) -> list[Type]:
    return [v.type for v in values]  # type: ignore[attr-defined]  # values are tile.ir Values


def _terminator_types(block: Block, names: tuple[str, ...]) -> list[list[Type]]:
    return [_types(list(op.operands)) for op in _terminators(block) if op.name in names]


def _terminators(block: Block) -> list[Operation]:
    found = []
    for op in block.ops:
        if op.name in ("yield", "continue", "break"):
            found.append(op)
        if op.name == "if":
            for region in op.regions:
                for inner in region.blocks:
                    found += [t for t in _terminators(inner) if t.name in ("continue", "break")]
    return found


def _mismatch(block: Block, terminator: str, want: list[Type]) -> list[str]:
    found = _terminator_types(block, (terminator,))
    return [
        f"{terminator} operands {[str(x) for x in t]} must match {[str(x) for x in want]}" for t in found if t != want
    ]


def _for(op: Operation) -> list[str]:
    lb, ub, step = (v.type for v in op.operands[:3])
    carried = _types(list(op.operands[3:]))
    problems = []
    if not (lb == ub == step and isinstance(lb, TileType) and lb.rank == 0 and isinstance(lb.element, ScalarType)):
        problems.append(f"for bounds and step must share one scalar integer tile type, got {lb}, {ub}, {step}")
    if _types(list(op.results)) != carried:
        problems.append("for results must have the types of the carried init values")
    for block in op.regions[0].blocks:
        if _types(list(block.args)) != [lb, *carried]:
            problems.append("for body arguments must be (induction variable, carried values...)")
        problems += [
            f"continue operands {t} must match carried types {carried}"
            for t in _terminator_types(block, ("continue",))
            if t != carried
        ]
    return problems


def _loop(op: Operation) -> list[str]:
    carried = _types(list(op.operands))
    results = _types(list(op.results))
    problems = []
    for block in op.regions[0].blocks:
        if _types(list(block.args)) != carried:
            problems.append("loop body arguments must have the carried init types")
        problems += [
            f"continue operands {t} must match {carried}"
            for t in _terminator_types(block, ("continue",))
            if t != carried
        ]
        problems += [
            f"break operands {t} must match results {results}"
            for t in _terminator_types(block, ("break",))
            if t != results
        ]
    return problems


def _if(op: Operation) -> list[str]:
    cond = op.operands[0].type
    results = _types(list(op.results))
    problems = [] if cond == scalar(i1) else [f"if condition must be tile<i1>, got {cond}"]
    for region in op.regions:
        for block in region.blocks:
            if block.args:
                problems.append("if branches take no arguments")
            last = block.ops[-1] if block.ops else None
            if last is not None and last.name == "yield" and _types(list(last.operands)) != results:
                problems.append(f"yield operands {_types(list(last.operands))} must match if results {results}")
    return problems


def _combiner(op: Operation) -> list[str]:
    operands = op.operands
    identities = op.attributes.get("identities")
    problems = []
    if isinstance(identities, ArrayAttr) and len(identities.elements) != len(operands):
        problems.append(f"needs one identity per operand ({len(operands)}), got {len(identities.elements)}")
    elems = [scalar(t.element) for t in _types(list(operands)) if isinstance(t, TileType)]
    for block in op.regions[0].blocks:
        want = [e for e in elems for _ in range(2)]
        if _types(list(block.args)) != want:
            problems.append(f"body arguments must be (element, accumulator) pairs {want}")
        last = block.ops[-1] if block.ops else None
        if last is not None and last.name == "yield" and _types(list(last.operands)) != elems:
            problems.append(f"body must yield {elems}")
    return problems


_RULES = {"for": _for, "loop": _loop, "if": _if, "reduce": _combiner, "scan": _combiner}


def region_problems(op: Operation) -> list[str]:
    """Return the region typing problems of a structured op (empty for other ops)."""
    rule = _RULES.get(op.name)
    if rule is None or len(op.regions) != {"if": 2}.get(op.name, 1):
        return []
    return rule(op)
