"""The proof obligation behind ``KernelABI.waits_prior_grid``, checked on the lowered Tile IR of every PDL kernel.

A kernel whose ABI says it waits for the grids before it is launched with programmatic stream serialization: it may
*start* while its predecessor still runs, and only its grid-dependency wait (``gdc_wait_tko``, PTX
``griddepcontrol.wait``) holds its memory accesses back until the predecessor completed and its writes are visible.
Tile IR orders memory accesses by their token chains, not by source order, so the launch is safe only if every load,
store and atomic is token-ordered after that wait. The typechecker builds it so (every chain starts at the wait's
token: `tile.compiler._typecheck_entry`); `check_entry_wait` verifies the result, so a code path that ever started a
chain elsewhere (a fresh ``make_token``, an access with no token, an access chained after ``print`` or
``launch_dependents``) is refused at compile time instead of launched early with a race.

The rule, on the function's ops: the first op is the one ``gdc_wait_tko``; every memory access takes a token; and
every other *root* (an op with no region that makes a token from no token: ``make_token``, ``print_tko``,
``gdc_launch_dependents_tko``, an access without a token) feeds nothing, except the index guard's fault store
(`GuardMixin._fault_unless`: a ``make_token`` whose one use is a store of a constant to the constant never-mapped
address, itself feeding nothing). Tokens are otherwise made only from tokens (accesses, ``join_tokens``, and
region ops and block arguments carrying them), so every access's chain then leads back to the wait.
"""

from __future__ import annotations

from collections import defaultdict

from tile import ir
from tile.compiler._errors import TileError

__all__ = ["MEMORY_OPS", "PdlOrderError", "check_entry_wait"]

MEMORY_OPS = frozenset(
    ("load_view_tko", "store_view_tko", "load_ptr_tko", "store_ptr_tko", "atomic_rmw_tko", "atomic_cas_tko")
)
"""Tile IR's memory accesses: each must be token-ordered after a PDL kernel's entry wait."""

_FAULT_ADDRESS = 16  # the guard's never-mapped address (tile.compiler._typecheck_guards._FAULT_ADDRESS)


class PdlOrderError(TileError, RuntimeError):
    """A compiler bug: a kernel compiled for programmatic dependent launch has a memory access that is not ordered
    after its entry wait (launching it early would race its predecessor). Raised instead of emitting the kernel."""


def check_entry_wait(fn: ir.Function) -> None:
    """Raise `PdlOrderError` unless every memory access of ``fn`` is token-ordered after its first op, the wait."""
    ops = list(fn.walk())
    if not ops or ops[0].name != "gdc_wait_tko" or ops[0] is not fn.body.ops[0]:
        _fail(fn, f"its first op is {ops[0].name if ops else 'missing'}, not the entry wait gdc_wait_tko")
    uses: dict[int, list[ir.Operation]] = defaultdict(list)
    for op in ops:
        for value in op.operands:
            if value is not None:
                uses[id(value)].append(op)
    for op in ops:
        has_token = any(v is not None and isinstance(v.type, ir.TokenType) for v in op.operands)
        if op.name in MEMORY_OPS and not has_token:
            _fail(fn, f"{op.name} takes no token, so nothing orders it after the entry wait")
        tokens = [r for r in op.results if isinstance(r.type, ir.TokenType)]
        if op is ops[0] or op.regions or has_token or not tokens:
            continue
        used = [u for r in tokens for u in uses[id(r)]]
        if used and not (op.name == "make_token" and len(used) == 1 and _is_fault_store(used[0], uses)):
            _fail(fn, f"the token of {op.name} (not the entry wait's) orders {used[0].name}")


def _is_fault_store(op: ir.Operation, uses: dict[int, list[ir.Operation]]) -> bool:
    """The index guard's fault: a store of a constant to the constant never-mapped address, whose token is unused."""
    if op.name != "store_ptr_tko" or any(uses[id(r)] for r in op.results):
        return False
    pointer, value = op.operands[0], op.operands[1]
    cast = pointer.defining_op
    address = cast.operands[0].defining_op if cast is not None and cast.name == "int_to_ptr" else None
    stored = value.defining_op
    return (
        address is not None
        and address.name == "constant"
        and _constant_int(address) == _FAULT_ADDRESS
        and stored is not None
        and stored.name == "constant"
    )


def _constant_int(op: ir.Operation) -> int | None:
    data = getattr(op.attributes.get("value"), "data", None)
    return int.from_bytes(bytes(data), "little", signed=True) if isinstance(data, (bytes, bytearray)) else None


def _fail(fn: ir.Function, why: str) -> None:
    raise PdlOrderError(
        f"internal compiler error in {fn.name}: compiled for programmatic dependent launch (pdl=True) but {why}; "
        "launching it before its predecessor ends would race. Compile it without pdl and report this bug"
    )
