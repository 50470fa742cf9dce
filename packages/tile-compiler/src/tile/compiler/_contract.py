"""Floating-point contraction: ``a * b + c`` becomes one Tile IR ``fma`` (what nvcc's default ``--fmad=true`` does).

tileiras does not contract a ``mulf`` feeding an ``addf``/``subf`` by itself: without this pass an online softmax's
``s * scale - m`` costs an FMUL and an FADD per element where cuTile Python (which contracts in its front end) issues
one FFMA, and the f32 pipe is what bounds a flash-attention inner loop on Hopper.

Rewrites, per block (regions included), where ``m = mulf(a, b)`` has exactly one use in the whole kernel:

* ``addf(m, c)`` and ``addf(c, m)``  ->  ``fma(a, b, c)``
* ``subf(m, c)``                     ->  ``fma(a, b, negf(c))``
* ``subf(c, m)``                     ->  ``fma(negf(a), b, c)``

Invariants: the ``mulf`` and the ``addf``/``subf`` are in the same block (an outer product is never pulled into a
loop), have the same result type and the same modes (``flush_to_zero`` equal, rounding the default
``nearest_even`` on both: a directed rounding asks for two exactly rounded steps); the ``fma`` takes those modes.
The rounding differs from the two-step form only by the product's rounding error (the fused result is the more
exact one). ``CompileOptions.fp_contract=False`` (``@tile.entry(fp_contract=False)``) turns the pass off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from tile.compiler._kir import Block, KernelIR, Op, Value

__all__ = ["contract_fma"]

_FUSED = ("addf", "subf")


def contract_fma(kernel: KernelIR) -> int:
    """Fuse single-use ``mulf`` results into the ``addf``/``subf`` that consume them; returns how many were fused."""
    body = kernel.body
    uses = Counter(v.id for op in _ops(body) for v in op.flat_operands())
    top = max((v.id for v in (*kernel.params, *_values(body))), default=0)
    return _contract_block(body, uses, iter(range(top + 1, 1 << 62)))


def _contract_block(block: Block, uses: Counter[int], fresh: Iterator[int]) -> int:
    fused = 0
    for op in block.ops:
        for region in op.regions:
            fused += _contract_block(region, uses, fresh)
    producers = {op.results[0].id: op for op in block.ops if op.name == "mulf" and len(op.results) == 1}
    out: list[Op] = []
    dead: set[int] = set()
    for op in block.ops:
        mul, negate = _match(op, producers, uses)
        if mul is None:
            out.append(op)
            continue
        a, b = mul.operands[0], mul.operands[1]
        m = mul.results[0]
        c = op.operands[1] if op.operands[0] is m else op.operands[0]
        assert isinstance(a, Value)  # elementwise operands are single values
        assert isinstance(b, Value)
        assert isinstance(c, Value)
        if negate == "acc":
            c = _negate(c, op, out, fresh)
        elif negate == "lhs":
            a = _negate(a, op, out, fresh)
        attrs = {k: v for k, v in op.attrs.items() if k in ("rounding_mode", "flush_to_zero")}
        out.append(Op("fma", [a, b, c], op.results, attrs, loc=op.loc, inlined_from=op.inlined_from))
        dead.add(id(mul))
        fused += 1
    block.ops = [op for op in out if id(op) not in dead]
    return fused


def _match(op: Op, producers: dict[int, Op], uses: Counter[int]) -> tuple[Op | None, str]:
    """The single-use ``mulf`` this ``addf``/``subf`` can absorb, and which operand then needs a ``negf``."""
    if op.name not in _FUSED or len(op.operands) != 2 or len(op.results) != 1:
        return None, ""
    for position, v in enumerate(op.operands):
        if not isinstance(v, Value):
            continue
        mul = producers.get(v.id)
        if mul is None or uses[v.id] != 1 or not _same_modes(mul, op):
            continue
        if mul.results[0].type != op.results[0].type:  # never a broadcast (those are explicit ops)
            continue
        if op.name == "addf":
            return mul, ""
        return mul, "acc" if position == 0 else "lhs"
    return None, ""


def _same_modes(mul: Op, op: Op) -> bool:
    def modes(o: Op) -> tuple[object, bool]:
        return o.attrs.get("rounding_mode", "nearest_even"), bool(o.attrs.get("flush_to_zero", False))

    rounding, ftz = modes(op)
    return rounding == "nearest_even" and modes(mul) == (rounding, ftz)


def _negate(v: Value, at: Op, out: list[Op], fresh: Iterator[int]) -> Value:
    neg = Value(next(fresh), v.type)
    out.append(Op("negf", [v], [neg], {}, loc=at.loc, inlined_from=at.inlined_from))
    return neg


def _ops(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from _ops(region)


def _values(block: Block) -> Iterator[Value]:
    yield from block.args
    for op in block.ops:
        yield from op.results
        for region in op.regions:
            yield from _values(region)
