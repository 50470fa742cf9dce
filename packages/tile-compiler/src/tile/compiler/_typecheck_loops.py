"""Loops of the kernel subset: ``for`` over ``range(...)`` or ``out.tiles()``, ``while``, ``break``, ``continue``.

A ``for`` over a tuple, or over a constant range whose variable indexes a tuple, is unrolled at compile time instead
(see ``tile.compiler._typecheck_unroll``).

A loop carries every variable that exists before it and is reassigned inside it (and the memory tokens of outputs
it may touch) as Tile IR loop values; their types may not change. A ``for`` containing ``break`` becomes a Tile IR
``loop`` with an explicit induction variable, since Tile IR's ``for`` cannot be left early. Invariant: every loop
body block ends with ``continue`` (or ``break``), whatever path the user's code takes.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tile.compiler._guards import Bound
from tile.compiler._kir import Block, Value
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._run_once import run_once
from tile.compiler._store_scope import StoreScope
from tile.compiler._typecheck_arith import I1, I32, is_const, type_name
from tile.compiler._typecheck_carry import CarryMixin, Struct
from tile.compiler._typecheck_memory import ENTRY_TOKEN, RAW_TOKEN, TileDim
from tile.compiler._typecheck_unroll import unroll_values
from tile.compiler._typecheck_values import PartitionV, TensorV, TileIter
from tile.compiler._types import DTYPES, DType, TileType, Type
from tile.compiler.lang._function import is_function

__all__ = ["Exit", "LoopFrame", "LoopMixin"]

_MEMORY_CALLS = frozenset({"store", "load", "gather", "scatter", "load_tile_like"})
_I64 = DTYPES["i64"]
Exit = str | None  # None: falls through; "return" | "break" | "continue"


@dataclass
class LoopFrame:
    kind: str  # "for" | "loop"
    names: list[str]
    types: list[Type]  # flat: one per carried value (a tuple variable carries one per leaf)
    structs: list[Struct]
    next_iv: Value | None = None
    stores: StoreScope | None = None  # a plain for loop's output chains, for loop-parallel stores


class LoopMixin(CarryMixin):
    """Loop statements and the loop-carried variables they thread."""

    loops: list[LoopFrame]
    own_grid: bool
    nonnegative: set[int]

    def stmts(self, body: list[ast.stmt]) -> Exit:
        """Check a statement list (implemented by the checker)."""
        raise NotImplementedError

    def assign(self, target: ast.expr, value: object) -> None:
        """Bind ``target`` to ``value`` (implemented by the checker)."""
        raise NotImplementedError

    def stmt_break(self, node: ast.Break) -> Exit:
        loop = self._loop("break")
        if loop.kind == "for":
            raise AssertionError("for loops with break are checked as loop ops")  # _uses_break guarantees this
        values = self._carried(loop)
        self.em.emit("break", [[loop.next_iv, *values] if loop.next_iv is not None else values], [])
        return "break"

    def stmt_continue(self, node: ast.Continue) -> Exit:
        loop = self._loop("continue")
        values = self._carried(loop)
        self.em.emit("continue", [[loop.next_iv, *values] if loop.next_iv is not None else values], [])
        return "continue"

    def _loop(self, what: str) -> LoopFrame:
        if not self.loops:
            self.fail(f"'{what}' outside a loop")
        return self.loops[-1]

    def _carried(self, loop: LoopFrame) -> list[Value]:
        return self.carried_values(loop.names, loop.types, loop.structs)

    # -- if -------------------------------------------------------------------------------------------------
    def _loop_vars(self, body: list[ast.stmt], exclude: str = "") -> list[str]:
        assigned = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names = sorted(n for n in assigned if n in self.env and n != exclude)
        # Safe kernels have no raw-pointer ops, so nothing advances those chains; an atomic (unchecked kernels only)
        # advances every chain, the entry's included.
        skip = set() if self.unchecked else {ENTRY_TOKEN, RAW_TOKEN}
        tokens = sorted(k for k in self.env if k.startswith("$tok:") and k not in skip)
        return names + (tokens if self._touches_memory(body) else [])

    def _reads_input(self, call: ast.Call) -> bool:
        """``p.load(...)`` / ``tile.load_tile_like(x, z)`` / ``x.gather(...)`` reading a read-only input (no token
        chain needed)."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "gather" and isinstance(func.value, ast.Name):
            recv = self.env.get(func.value.id)
            return isinstance(recv, TensorV) and not recv.mut
        if isinstance(func, ast.Attribute) and func.attr == "load_tile_like" and call.args:
            first = call.args[0]
            recv = self.env.get(first.id) if isinstance(first, ast.Name) else None
            return isinstance(recv, TensorV) and not recv.mut
        if not isinstance(func, ast.Attribute) or func.attr != "load" or not isinstance(func.value, ast.Name):
            return False
        recv = self.env.get(func.value.id)
        return isinstance(recv, PartitionV) and not recv.tensor.mut

    def _touches_memory(self, body: list[ast.stmt]) -> bool:
        """Whether a loop body may access outputs or raw memory (then their tokens are loop-carried)."""
        for node in (n for s in body for n in ast.walk(s)):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if (name in _MEMORY_CALLS or name.startswith("atomic_")) and not self._reads_input(node):
                return True
            if isinstance(node.func, ast.Name) and _helper_touches(self.resolved.names.get(node.func.id)):
                return True
            if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name):
                continue
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                owner = self.resolved.names.get(node.func.value.id)
                if owner is not None and _helper_touches(self.resolved.attribute(owner, node.func.attr, None)):
                    return True
        return False

    def _uses_break(self, body: list[ast.stmt]) -> bool:
        def visit(nodes: list[ast.stmt]) -> bool:
            for s in nodes:
                if isinstance(s, ast.Break):
                    return True
                if isinstance(s, ast.If) and (visit(s.body) or visit(s.orelse)):
                    return True
            return False

        return visit(body)

    def _range(self, node: ast.For) -> tuple[object, object, object]:
        it = node.iter
        fn = self.expr(it.func) if isinstance(it, ast.Call) else None
        if fn is not builtins.range or not isinstance(it, ast.Call) or it.keywords or not 1 <= len(it.args) <= 3:
            self.fail("kernel 'for' loops iterate over range(stop), range(start, stop) or range(start, stop, step)", it)
        args = [self.expr(a) for a in it.args]
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if is_const(step) and step <= 0:  # type: ignore[operator]  # a number
            self.fail(f"the range step must be positive, got {step}", it)
        return start, stop, step

    def _iteration(self, node: ast.For) -> tuple[tuple[object, object, object], Callable[[Value], object] | None]:
        it = node.iter
        if isinstance(it, ast.Call) and self.expr(it.func) is builtins.range:
            return self._range(node), None
        source = self.expr(it)
        if not isinstance(source, TileIter):
            self.fail("kernel 'for' loops iterate over range(stop), range(start, stop[, step]) or out.tiles()", it)
        self.at(node)
        return self.tile_schedule(source)

    @contextmanager
    def in_loop_body(self, block: Block) -> Iterator[Block]:
        """Fill a loop body one loop level deeper (values defined outside stay hoistable, see `guard_indices`)."""
        em = self.em
        em.hoist.append(em.block)
        em.depth += 1
        em.birth.update((a.id, em.depth) for a in block.args)
        try:
            with self.in_block(block):
                yield block
        finally:
            em.depth -= 1
            em.hoist.pop()

    def _counts_tiles(self, bounds: tuple[object, object, object]) -> TileDim | None:
        """The partition dim a ``range(lo, ub, step)`` loop stays inside: ``ub`` is ``p.num_tiles[d]`` or at most it
        (``tile.minimum(n, p.num_tiles[d])``), and the variable starts at a constant ``lo >= 0``."""
        return self.count_dim(bounds[1]) if self._nonnegative(bounds) else None

    def _nonnegative(self, bounds: tuple[object, object, object]) -> bool:
        """``range(lo, ub, step)`` with ``lo >= 0`` (a constant, or ``tile.maximum(v, c)`` with a constant ``c >= 0``)
        and a constant ``step > 0``: its variable stays in [0, ub)."""
        lo, _, step = bounds
        known = (type(lo) is int and lo >= 0) or (isinstance(lo, Value) and lo.id in self.nonnegative)
        return known and type(step) is int and step > 0

    def _trusted(self, bounds: tuple[object, object, object], ivdt: DType) -> tuple[bool, DType]:
        """Whether the variable of ``range(lo, ub, step)`` provably stays in [lo, ub), and the dtype that needs.

        The variable advances by ``iv + step`` in its own integer type, and the last value below ``ub`` plus ``step``
        must not wrap around: a wrapped (negative) index would pass as proven and reach memory unguarded. ``ub`` is
        at most its type's maximum (or a constant), so a step of 1 never wraps; a larger constant step gets a 64-bit
        variable where 32 bits could wrap. Anything else is not trusted (its accesses get guards).
        """
        if not self._nonnegative(bounds):
            return False, ivdt
        _, ub, step = bounds
        top = ub if type(ub) is int else 2 ** (ivdt.bits - 1) - 1
        for dt in (ivdt, _I64):
            if dt.bits >= ivdt.bits and top - 1 + step <= 2 ** (dt.bits - 1) - 1:  # type: ignore[operator]  # ints
                return True, dt
        return False, ivdt

    def _index_dtype(self, bounds: tuple[object, object, object], node: ast.For) -> DType:
        """The loop variable's dtype before `_trusted` widens it: i64 when a bound is i64 or a constant that i32 cannot
        hold (``range(2**31, n)`` must not start at the i32 wrap of ``2**31``, -2**31, which passes ``lo >= 0``)."""
        ivdt = I32
        for b in bounds:
            if isinstance(b, Value) and isinstance(b.type, TileType) and b.type.elem == _I64:
                ivdt = _I64
            if type(b) is int and not -(2**31) <= b < 2**31:
                if not -(2**63) <= b < 2**63:
                    self.fail(f"the range bound {b} does not fit a 64-bit index", node.iter)
                ivdt = _I64
        return ivdt

    def _defined_range(
        self, node: ast.For, bounds: tuple[object, object, object], untrusted: bool, values: tuple[Value, Value, Value]
    ) -> tuple[Value, Value, Value, DType | None]:
        """The ``for`` bounds of a ``range`` loop (``untrusted``: not proven in range, not a tiles() walk) that Tile IR
        defines: a run-time step checked positive (`_positive_step`; a tiles() walk steps by the block count, at
        least 1), and an i32 loop whose step may pass 1 counted in i64, with the dtype to truncate its variable to.

        The last value below ``ub`` plus such a step can pass ``2**31 - 1``, and Tile IR's ``for`` never leaves
        ``[lb, ub)`` (the interpreter stops there; a GPU loop that wrapped would go on from ``-2**31``, and a
        compiler may assume it does not). In i64 it cannot wrap, and the variable, in ``[lb, ub)``, truncates exactly.
        A loop with ``break`` is a ``loop`` whose ``iv + step`` wraps as the interpreter's does.
        """
        lb, ub, step = values
        if untrusted and not is_const(bounds[2]):
            ub, step = self._positive_step(lb, ub, step)
        if not untrusted or self.tile_of(lb).dtype != I32 or bounds[2] == 1 or self._uses_break(node.body):
            return lb, ub, step, None
        lb, ub, step = (self.convert(v, _I64) for v in (lb, ub, step))
        return lb, ub, step, I32

    @staticmethod
    def _may_wrap(bounds: tuple[object, object, object], trusted: bool, ranged: bool, ivdt: DType) -> bool:
        """A 64-bit ``range`` loop (``ranged``: not a tiles() walk, not an i32 loop `_defined_range` counts in i64)
        not proven in range whose step may pass 1: the ``for``'s
        ``iv + step`` after its last value could pass ``2**63 - 1`` (``range(a, 2**63 - 1, 2**62)``), and there is no
        wider type to count in as `_defined_range` does for i32. Tile IR's ``for`` never leaves ``[lb, ub)`` (a GPU
        loop that wrapped would go on from below ``lb``, and a compiler may assume it does not and fold the guards on
        the variable), so such a loop is a ``loop`` whose next value stops at ``ub`` (`next_index`)."""
        return ranged and not trusted and ivdt == _I64 and bounds[2] != 1

    def _positive_step(self, lb: Value, ub: Value, step: Value) -> tuple[Value, Value]:
        """A run-time ``range`` step checked positive in the kernel (the interpreter refuses a ``for`` step below 1,
        Tile IR leaves it undefined, and a compiler may then assume the variable stays in ``[lb, ub)`` and fold away
        the bounds checks on it): a step below 1 stops the kernel (unchecked kernels: no check) and, so the ``for``
        never sees it, becomes 1 over the empty range ``[lb, lb)``."""
        t = self.tile_of(step)
        ok = self.compare_tiles(ast.Gt, step, self.materialize(0, t.dtype))
        if not self.unchecked:
            self._trap_unless(ok, "range() step must be positive (it is a run-time value below 1)")
        one = self.materialize(1, t.dtype)
        return self.em.one("select", [ok, ub, lb], t), self.em.one("select", [ok, step, one], t)

    def stmt_for(self, node: ast.For) -> Exit:
        if (values := unroll_values(self, node)) is None:  # type: ignore[arg-type]  # self is the Checker
            return self._for_loop(node)
        for value in values:
            self.at(node)
            self.assign(node.target, value)
            self.stmts(node.body)  # nothing leaves it early (see _typecheck_unroll)
        return None

    def _check_target(self, node: ast.For) -> None:
        """Refuse a loop variable that is not one new name. Python leaves the loop's last value in it; a kernel loop's
        variable is not visible after the loop, so a name live before it would go on holding its value from before
        (a different index than the program says)."""
        if not isinstance(node.target, ast.Name):
            self.fail("the loop variable must be a single name", node.target)
        if node.target.id in self.env:
            self.fail(
                f"the loop variable '{node.target.id}' is already a variable here (after the loop Python would leave "
                "the loop's last value in it, the kernel its value from before the loop); give the loop variable a "
                "new name",
                node.target,
            )

    def _for_loop(self, node: ast.For) -> Exit:
        self._check_target(node)
        assert isinstance(node.target, ast.Name)  # checked just above
        bounds, bind = self._iteration(node)
        self.at(node)
        ivdt = self._index_dtype(bounds, node)
        trusted, ivdt = self._trusted(bounds, ivdt) if bind is None else (False, ivdt)
        lb, ub, step = (
            self.scalar_index(b, "range bound") if not is_const(b) else self.materialize(b, ivdt) for b in bounds
        )
        lb, ub, step = (self.convert(v, ivdt) for v in (lb, ub, step))
        lb, ub, step, narrow = self._defined_range(node, bounds, bind is None and not trusted, (lb, ub, step))
        ivdt = self.tile_of(lb).dtype
        counted = self._counts_tiles(bounds) if trusted else None
        # The variable of range(lo >= 0, ub, step > 0) stays in [0, ub) (when it cannot wrap, see _trusted): checking
        # "ub <= tile count" once before the loop covers every partition access it indexes.
        bounded = trusted
        names = self._loop_vars(node.body, node.target.id)
        inits, types, structs = self.carried_inits(names)
        if self._uses_break(node.body) or self._may_wrap(bounds, trusted, bind is None and narrow is None, ivdt):
            frame = LoopFrame("loop", names, types, structs)
            return self._for_as_loop(node, (lb, ub, step), frame, inits, bind=bind, counted=counted)
        iv = self.em.value(TileType(ivdt))
        if counted is not None or bounded:
            self.in_range[iv.id] = (counted, ub)
            top = bounds[1]
            host = self.host_values.get(top.id) if isinstance(top, Value) else None
            host = Bound("const", value=top) if type(top) is int else host
            if host is None and counted is not None:  # below a value at most a tile count: below that count
                host = Bound("count", *counted)
            if host is not None:  # [0, a host-known bound): guards on it are the launcher's
                self.index_bounds[iv.id] = host
        block = Block([iv] + [self.em.value(t) for t in types])
        outer = self.env
        carried = self.bind_carried(names, structs, block.args[1:])
        self.env = dict(outer, **carried)
        # A store at a distinct tile per iteration needs no order against the other iterations' (see StoreScope);
        # the loop variable is distinct per iteration in the tiles() schedule and in a range it cannot wrap around in.
        distinct = bind is not None or trusted
        frame = LoopFrame("for", names, types, structs)
        self.loops.append(frame)
        scope = None
        with self.in_loop_body(block):
            self.env[node.target.id] = target = bind(iv) if bind else self.convert(iv, narrow) if narrow else iv
            if distinct:
                frame.stores = scope = StoreScope(block, target, *self._output_chains(outer, carried))
            if self.stmts(node.body) is None:
                self.em.emit("continue", [self._carried(self.loops[-1])], [])
        self.loops.pop()
        if scope is not None:
            scope.finish()
        self.env = outer
        self.at(node)
        results = self.em.emit("for", [lb, ub, step, inits], types, {}, [block])
        if bind is not None and self.own_grid:  # one block per tile: the walk's one iteration, without the loop
            run_once(self.em.block, lambda a, b: self.compare_tiles(ast.Lt, a, b))
        self.env.update(self.bind_carried(names, structs, results))
        return None

    @staticmethod
    def _output_chains(
        outer: dict[str, object], carried: dict[str, object]
    ) -> tuple[dict[str, Value], dict[str, Value]]:
        """Per carried output chain: its token before the loop and the body's block argument."""
        keys = [k for k in carried if k.startswith("$tok:") and k not in (ENTRY_TOKEN, RAW_TOKEN)]
        before = {k: v for k in keys if isinstance(v := outer.get(k), Value)}
        return before, {k: v for k in before if isinstance(v := carried[k], Value)}

    def store_scope(self) -> StoreScope | None:
        """The innermost loop's `StoreScope` (None outside loops, in helpers and in while/break loops)."""
        return self.loops[-1].stores if self.loops else None

    def _for_as_loop(
        self,
        node: ast.For,
        bounds: tuple[Value, Value, Value],
        frame: LoopFrame,
        inits: list[Value],
        *,
        bind: Callable[[Value], object] | None,
        counted: TileDim | None,
    ) -> Exit:
        lb, ub, step = bounds
        ivt = lb.type
        assert isinstance(node.target, ast.Name)  # checked by stmt_for
        names, types, structs = frame.names, frame.types, frame.structs
        block = Block([self.em.value(ivt)] + [self.em.value(t) for t in types])
        iv, carried = block.args[0], block.args[1:]
        if counted is not None:
            self.in_range[iv.id] = (counted, ub)
        outer = self.env
        self.env = dict(outer, **self.bind_carried(names, structs, carried))
        with self.in_loop_body(block):
            self._exit_unless(self.compare_tiles(ast.Lt, iv, ub), list(block.args))
            self.env[node.target.id] = bind(iv) if bind else iv
            loop = LoopFrame("loop", names, types, structs, self.next_index(iv, ub, step))
            self.loops.append(loop)
            if self.stmts(node.body) is None:
                self.em.emit("continue", [[loop.next_iv, *self._carried(loop)]], [])  # type: ignore[list-item]  # set above
            self.loops.pop()
        self.env = outer
        self.at(node)
        results = self.em.emit("loop", [[lb, *inits]], [ivt, *types], {}, [block])
        self.env.update(self.bind_carried(names, structs, results[1:]))
        return None

    def _exit_unless(self, cond: Value, carried: list[Value]) -> None:
        then, other = Block(), Block()
        with self.in_block(then):
            self.em.emit("yield", [[]], [])
        with self.in_block(other):
            self.em.emit("break", [carried], [])
        self.em.emit("if", [cond], [], {}, [then, other])

    def stmt_while(self, node: ast.While) -> Exit:
        # The condition runs on every iteration, so what it touches (an atomic taking a lock) is carried like the
        # body's, and the exit leaves with the values after it: ops after the loop stay ordered after the last test.
        names = self._loop_vars([ast.Expr(node.test), *node.body])
        inits, types, structs = self.carried_inits(names)
        block = Block([self.em.value(t) for t in types])
        outer = self.env
        self.env = dict(outer, **self.bind_carried(names, structs, block.args))
        with self.in_loop_body(block):
            cond = self.expr(node.test)
            if is_const(cond) and not cond:
                self.env = outer
                return None
            if not is_const(cond):
                c = self.as_tile(cond, what="loop condition")
                if self.tile_of(c).elem != I1 or self.tile_of(c).shape:
                    self.fail(f"a 'while' condition must be a bool scalar, got {type_name(c)}", node.test)
                self._exit_unless(c, self._carried(LoopFrame("loop", names, types, structs)))
            self.loops.append(LoopFrame("loop", names, types, structs))
            if self.stmts(node.body) is None:
                self.em.emit("continue", [self._carried(self.loops[-1])], [])
            self.loops.pop()
        self.env = outer
        self.at(node)
        results = self.em.emit("loop", [inits], types, {}, [block])
        self.env.update(self.bind_carried(names, structs, results))
        return None

    # -- helpers --------------------------------------------------------------------------------------------


def _helper_touches(fn: object, seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``@tile.function`` ``fn`` may access memory: a memory or atomic call in its body, or a helper that may,
    or anything that cannot be told (a helper calling itself, a body that does not parse). Not a helper: False."""
    if not is_function(fn) or not callable(fn):
        return False
    if id(fn) in seen:
        return True
    try:
        resolved = resolve(parse(fn))
    except Exception:  # a helper that fails to compile fails at its call; here it only "may touch memory"
        return True
    for node in ast.walk(resolved.kernel.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _MEMORY_CALLS or name.startswith("atomic_"):
            return True
        inner = resolved.names.get(func.id) if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            inner = resolved.attribute(resolved.names.get(func.value.id), func.attr, None)
        if _helper_touches(inner, seen | {id(fn)}):
            return True
    return False
