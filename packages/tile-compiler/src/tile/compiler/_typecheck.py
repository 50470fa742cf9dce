"""Stage ``typecheck``: a resolved kernel and its specialization to a typed, fully inlined kernel IR.

The checker interprets the kernel body abstractly: compile-time values (literals, ``Const`` parameters, const
generics, shapes) are folded; everything else becomes typed Tile-IR-shaped ops (`tile.compiler._kir`). Helpers
are inlined at each call; ``if`` on a constant keeps one branch; ``if`` on a runtime bool, ``for``/``while`` become
structured ops whose results are the variables the branches/bodies reassign (memory tokens included, so the
order of stores and loads survives control flow). Invariant: every error is a CompileError at the user's node.
"""

from __future__ import annotations

import ast
import builtins
import copy
from collections.abc import Callable
from dataclasses import dataclass, field

from tile.compiler._diagnostics import CompileError, SourceLoc
from tile.compiler._kir import Block, KernelIR, Value
from tile.compiler._parse import KernelAST, parse
from tile.compiler._resolve import ResolvedKernel, resolve
from tile.compiler._spec import KernelABI, Specialization, Target
from tile.compiler._typecheck_arith import I1, I32, is_const, type_name
from tile.compiler._typecheck_entry import build_entry
from tile.compiler._typecheck_expr import ExprMixin
from tile.compiler._typecheck_memory import ENTRY_TOKEN, RAW_TOKEN
from tile.compiler._typecheck_values import Emitter, PartitionV, TensorV, TileIndex, TileIter
from tile.compiler._types import DType, TileType, TokenType, Type
from tile.compiler.lang._function import is_function

__all__ = ["TypedKernel", "typecheck"]

_MAX_INLINE_DEPTH = 32
_RET = "$ret"
Exit = str | None  # None: falls through; "return" | "break" | "continue"


@dataclass(eq=False)
class TypedKernel:
    """The typed kernel IR of one entry and its ABI."""

    name: str
    ir: KernelIR
    abi: KernelABI
    spec: Specialization
    target: Target

    def dump(self) -> str:
        """Text of the typed kernel IR (``TILE_DUMP=typed``)."""
        return self.ir.dump()


@dataclass
class _Loop:
    kind: str  # "for" | "loop"
    names: list[str]
    types: list[Type]
    next_iv: Value | None = None


@dataclass
class _Frame:
    kernel: KernelAST
    resolved: ResolvedKernel
    env: dict[str, object]
    loops: list[_Loop] = field(default_factory=list)


class Checker(ExprMixin):
    """Walks a kernel's statements, emitting typed ops."""

    def __init__(self, resolved: ResolvedKernel, target: Target) -> None:
        self.kernel = resolved.kernel
        self.resolved = resolved
        self.env = {}
        self.loops: list[_Loop] = []
        self.node = None
        self.call_sites: tuple[SourceLoc, ...] = ()
        self.em = Emitter()
        self.unchecked = resolved.unchecked
        self.arch = "default" if target.is_cpu else target.arch

    # -- statements -------------------------------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> Exit:
        """Check a statement list; stop at the first statement that leaves it."""
        for i, node in enumerate(body):
            if (
                isinstance(node, ast.If)
                and i + 1 < len(body)
                and self._returns(node.body) != self._returns(node.orelse)
            ):
                return self.stmt(self._fold_rest(node, body[i + 1 :]))
            if (exit_ := self.stmt(node)) is not None:
                return exit_
        return None

    def _returns(self, body: list[ast.stmt]) -> bool:
        if not body:
            return False
        last = body[-1]
        if isinstance(last, ast.Return):
            return True
        return isinstance(last, ast.If) and self._returns(last.body) and self._returns(last.orelse)

    def _fold_rest(self, node: ast.If, rest: list[ast.stmt]) -> ast.If:
        """``if c: return`` followed by ``rest`` is ``if c: return else: rest`` (Tile IR has no early exit)."""
        new = copy.copy(node)
        if self._returns(node.body):
            new.orelse = [*node.orelse, *rest]
        else:
            new.body = [*node.body, *rest]
        return new

    def stmt(self, node: ast.stmt) -> Exit:
        """Check one statement."""
        self.at(node)
        method = getattr(self, f"stmt_{type(node).__name__.lower()}", None)
        if method is None:
            self.fail(f"{type(node).__name__} statements are not supported in kernel code")
        result: Exit = method(node)
        return result

    def stmt_pass(self, node: ast.Pass) -> Exit:
        return None

    def stmt_expr(self, node: ast.Expr) -> Exit:
        self.expr(node.value)
        return None

    def stmt_assign(self, node: ast.Assign) -> Exit:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)
        return None

    def stmt_annassign(self, node: ast.AnnAssign) -> Exit:
        if node.value is None:
            return None
        value = self.expr(node.value)
        ann = self.expr(node.annotation)
        if isinstance(ann, DType):
            value = self.as_tile(value, ann)
        self.assign(node.target, value)
        return None

    def stmt_augassign(self, node: ast.AugAssign) -> Exit:
        if not isinstance(node.target, ast.Name):
            self.fail("only variables can be updated in place; tiles are immutable", node.target)
        current = self.expr(ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target))
        self.assign(node.target, self.binary(node.op, current, self.expr(node.value)))
        return None

    def assign(self, target: ast.expr, value: object) -> None:
        """Bind ``target`` (a name or a tuple of names) to ``value``."""
        if isinstance(value, TileIndex) and not isinstance(target, ast.Name):
            value = value.coords
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                n = len(value) if isinstance(value, tuple) else "a non-tuple"
                self.fail(f"cannot unpack {n} values into {len(target.elts)} names", target)
            for t, v in zip(target.elts, value, strict=False):
                self.assign(t, v)
        else:
            self.fail(
                "only names can be assigned in kernel code; tiles are immutable (build a new tile instead)", target
            )

    def stmt_return(self, node: ast.Return) -> Exit:
        if self.loops:
            self.fail("'return' inside a loop is not supported; leave the loop with 'break' first")
        if node.value is not None:
            value = self.expr(node.value)
            if self.call_sites == () and value is not None:
                self.fail("an entry kernel returns nothing; write results with out.store(tile)", node.value)
            self.env[_RET] = value
        return "return"

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

    def _loop(self, what: str) -> _Loop:
        if not self.loops:
            self.fail(f"'{what}' outside a loop")
        return self.loops[-1]

    def _carried(self, loop: _Loop) -> list[Value]:
        return [self.coerce_to(n, self.env.get(n), t) for n, t in zip(loop.names, loop.types, strict=True)]

    def coerce_to(self, name: str, value: object, ty: Type) -> Value:
        """``value`` as a runtime value of ``ty`` (constants materialize; anything else must match)."""
        if isinstance(value, Value) and value.type == ty:
            return value
        if is_const(value) and isinstance(ty, TileType) and isinstance(ty.elem, DType):
            return self.materialize(value, ty.elem, ty.shape)
        shown = str(ty) if not name.startswith("$") else "a memory token"
        return self.fail(
            f"variable '{name}' changes type: it is {shown} at the start of the loop or branch but "
            f"{type_name(value)} here; give it one type on every path (e.g. initialize with tile.zeros(...))"
        )

    # -- if -------------------------------------------------------------------------------------------------
    def stmt_if(self, node: ast.If) -> Exit:
        cond = self.expr(node.test)
        if is_const(cond) or cond is None or isinstance(cond, str):
            return self.stmts(node.body if cond else node.orelse)
        c = self.as_tile(cond, what="condition")
        if self.tile_of(c).elem != I1 or self.tile_of(c).shape:
            self.fail(
                f"an 'if' condition must be a bool scalar, got {type_name(c)}; compare explicitly "
                "(e.g. x != 0), or use tile.where for tiles",
                node.test,
            )
        before = dict(self.env)
        branches: list[tuple[Block, Exit, dict[str, object]]] = []
        for body in (node.body, node.orelse):
            block = Block()
            self.env = dict(before)
            with self.in_block(block):
                exit_ = self.stmts(body)
            branches.append((block, exit_, self.env))
        self.env = before
        self.at(node)
        live = [b for b in branches if b[1] in (None, "return")]
        names = self._merged_names(before, [b[2] for b in live])
        types = [self._merge_type(n, [b[2][n] for b in live]) for n in names]
        for block, _, env in live:
            with self.in_block(block):
                self.em.emit("yield", [[self.coerce_to(n, env[n], t) for n, t in zip(names, types, strict=False)]], [])
        results = self.em.emit("if", [c], types, {}, [branches[0][0], branches[1][0]])
        self.env.update(zip(names, results, strict=False))
        for n in [n for n in self._constant_merges(before, [b[2] for b in live]) if n not in names]:
            self.env[n] = live[0][2][n]
        if not live:  # both branches left the loop body; what follows is unreachable but must still terminate
            return None
        return "return" if all(b[1] == "return" for b in live) and len(live) == 2 else None

    def _merged_names(self, before: dict[str, object], envs: list[dict[str, object]]) -> list[str]:
        if not envs:
            return []
        common = set(envs[0]).intersection(*envs[1:])
        changed = [n for n in common if any(e[n] is not before.get(n, _MISSING) for e in envs)]
        return sorted(n for n in changed if not self._same_constant([e[n] for e in envs]))

    def _constant_merges(self, before: dict[str, object], envs: list[dict[str, object]]) -> list[str]:
        if not envs:
            return []
        common = set(envs[0]).intersection(*envs[1:])
        return [
            n
            for n in common
            if (self._same_constant([e[n] for e in envs]) and n not in before)
            or (n in before and self._same_constant([e[n] for e in envs]) and envs[0][n] is not before[n])
        ]

    def _same_constant(self, values: list[object]) -> bool:
        first = values[0]
        if all(v is first for v in values):
            return not isinstance(first, Value)
        return all(is_const(v) and type(v) is type(first) and v == first for v in values)

    def _merge_type(self, name: str, values: list[object]) -> Type:
        runtime = [v for v in values if isinstance(v, Value)]
        if runtime:
            return runtime[0].type
        if all(is_const(v) for v in values):
            return TileType(self.const_dtype(values[0], None))
        return self.fail(
            f"variable '{name}' holds a {type_name(values[0])} that differs between branches; only tiles, "
            "scalars and numbers can be chosen at run time"
        )

    # -- loops ----------------------------------------------------------------------------------------------
    def _loop_vars(self, body: list[ast.stmt], exclude: str = "") -> list[str]:
        assigned = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names = sorted(n for n in assigned if n in self.env and n != exclude)
        skip = {ENTRY_TOKEN} if self.unchecked else {ENTRY_TOKEN, RAW_TOKEN}
        tokens = sorted(k for k in self.env if k.startswith("$tok:") and k not in skip)
        return names + (tokens if self._touches_memory(body) else [])

    def _reads_input(self, call: ast.Call) -> bool:
        """``p.load(...)`` / ``tile.load_tile_like(x, z)`` reading a read-only input (no token chain needed)."""
        func = call.func
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
            if isinstance(node.func, ast.Name) and is_function(self.resolved.names.get(node.func.id)):
                return True
            if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name):
                continue
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                owner = self.resolved.names.get(node.func.value.id)
                if owner is not None and is_function(getattr(owner, node.func.attr, None)):
                    return True
        return False

    def _loop_inits(self, names: list[str]) -> tuple[list[Value], list[Type]]:
        inits: list[Value] = []
        for n in names:
            v = self.env[n]
            if is_const(v):
                v = self.materialize(v)
            if not isinstance(v, Value):
                self.fail(f"'{n}' holds a {type_name(v)} and cannot be reassigned inside a loop")
            inits.append(v)
        return inits, [v.type for v in inits]

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

    def stmt_for(self, node: ast.For) -> Exit:
        if not isinstance(node.target, ast.Name):
            self.fail("the loop variable must be a single name", node.target)
        bounds, bind = self._iteration(node)
        self.at(node)
        ivdt = I32
        for b in bounds:
            if isinstance(b, Value) and isinstance(b.type, TileType) and b.type.elem == _I64:
                ivdt = _I64
        lb, ub, step = (
            self.scalar_index(b, "range bound") if not is_const(b) else self.materialize(b, ivdt) for b in bounds
        )
        lb, ub, step = (self.convert(v, ivdt) for v in (lb, ub, step))
        names = self._loop_vars(node.body, node.target.id)
        inits, types = self._loop_inits(names)
        if self._uses_break(node.body):
            return self._for_as_loop(node, (lb, ub, step), names, inits, types, bind=bind)
        iv = self.em.value(TileType(ivdt))
        block = Block([iv] + [self.em.value(t) for t in types])
        outer = self.env
        self.env = dict(outer, **dict(zip(names, block.args[1:], strict=True)))
        self.loops.append(_Loop("for", names, types))
        with self.in_block(block):
            self.env[node.target.id] = bind(iv) if bind else iv
            if self.stmts(node.body) is None:
                self.em.emit("continue", [self._carried(self.loops[-1])], [])
        self.loops.pop()
        self.env = outer
        self.at(node)
        results = self.em.emit("for", [lb, ub, step, inits], types, {}, [block])
        self.env.update(zip(names, results, strict=False))
        return None

    def _for_as_loop(
        self,
        node: ast.For,
        bounds: tuple[Value, Value, Value],
        names: list[str],
        inits: list[Value],
        types: list[Type],
        *,
        bind: Callable[[Value], object] | None,
    ) -> Exit:
        lb, ub, step = bounds
        ivt = lb.type
        assert isinstance(node.target, ast.Name)  # checked by stmt_for
        block = Block([self.em.value(ivt)] + [self.em.value(t) for t in types])
        iv, carried = block.args[0], block.args[1:]
        outer = self.env
        self.env = dict(outer, **dict(zip(names, carried, strict=True)))
        with self.in_block(block):
            self._exit_unless(self.compare_tiles(ast.Lt, iv, ub), list(block.args))
            self.env[node.target.id] = bind(iv) if bind else iv
            loop = _Loop("loop", names, types, self.elementwise(ast.Add, iv, step, "+"))
            self.loops.append(loop)
            if self.stmts(node.body) is None:
                self.em.emit("continue", [[loop.next_iv, *self._carried(loop)]], [])  # type: ignore[list-item]  # set above
            self.loops.pop()
        self.env = outer
        self.at(node)
        results = self.em.emit("loop", [[lb, *inits]], [ivt, *types], {}, [block])
        self.env.update(zip(names, results[1:], strict=False))
        return None

    def _exit_unless(self, cond: Value, carried: list[Value]) -> None:
        then, other = Block(), Block()
        with self.in_block(then):
            self.em.emit("yield", [[]], [])
        with self.in_block(other):
            self.em.emit("break", [carried], [])
        self.em.emit("if", [cond], [], {}, [then, other])

    def stmt_while(self, node: ast.While) -> Exit:
        names = self._loop_vars(node.body)
        inits, types = self._loop_inits(names)
        block = Block([self.em.value(t) for t in types])
        outer = self.env
        self.env = dict(outer, **dict(zip(names, block.args, strict=False)))
        with self.in_block(block):
            cond = self.expr(node.test)
            if is_const(cond) and not cond:
                self.env = outer
                return None
            if not is_const(cond):
                c = self.as_tile(cond, what="loop condition")
                if self.tile_of(c).elem != I1 or self.tile_of(c).shape:
                    self.fail(f"a 'while' condition must be a bool scalar, got {type_name(c)}", node.test)
                self._exit_unless(c, list(block.args))
            self.loops.append(_Loop("loop", names, types))
            if self.stmts(node.body) is None:
                self.em.emit("continue", [self._carried(self.loops[-1])], [])
            self.loops.pop()
        self.env = outer
        self.at(node)
        results = self.em.emit("loop", [inits], types, {}, [block])
        self.env.update(zip(names, results, strict=False))
        return None

    # -- helpers --------------------------------------------------------------------------------------------
    def call_helper(self, fn: object, args: list[object], kwargs: dict[str, object]) -> object:
        if len(self.call_sites) >= _MAX_INLINE_DEPTH:
            self.fail(f"helpers nest deeper than {_MAX_INLINE_DEPTH} calls (recursion is not supported)")
        site = self.kernel.loc(self.node) if self.node is not None else None
        helper = resolve(parse(fn))  # type: ignore[arg-type]  # marked helpers are callables
        env = self._bind_helper(helper, args, kwargs)
        saved = _Frame(self.kernel, self.resolved, self.env, self.loops)
        tokens = {k: v for k, v in self.env.items() if k.startswith("$tok:")}
        self.kernel, self.resolved, self.env, self.loops = helper.kernel, helper, {**env, **tokens}, []
        self.call_sites = (site, *self.call_sites) if site else self.call_sites
        try:
            self.stmts(helper.kernel.tree.body)
            result = self.env.get(_RET)
            tokens = {k: v for k, v in self.env.items() if k.startswith("$tok:")}
        finally:
            self.call_sites = self.call_sites[1:] if site else self.call_sites
            self.kernel, self.resolved, self.env, self.loops = saved.kernel, saved.resolved, saved.env, saved.loops
        self.env.update(tokens)
        return result

    def _bind_helper(self, helper: ResolvedKernel, args: list[object], kwargs: dict[str, object]) -> dict[str, object]:
        names = [p.name for p in helper.params]
        if len(args) > len(names):
            self.fail(f"{helper.name}() takes {len(names)} arguments but {len(args)} were given")
        env = dict(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k not in names or k in env:
                self.fail(f"{helper.name}() got an unexpected keyword argument '{k}'")
            env[k] = v
        defaults = helper.kernel.tree.args.defaults
        for p, d in zip(names[len(names) - len(defaults) :], defaults, strict=False):
            if p not in env:
                env[p] = ast.literal_eval(d)
        if missing := [n for n in names if n not in env]:
            self.fail(f"{helper.name}() is missing the argument '{missing[0]}'")
        return env


_MISSING = object()
_MEMORY_CALLS = frozenset({"store", "load", "gather", "scatter", "load_tile_like"})
_I64 = __import__("tile.compiler._types", fromlist=["DTYPES"]).DTYPES["i64"]


def typecheck(resolved: ResolvedKernel, spec: Specialization, target: Target) -> TypedKernel:
    """Type-check and inline ``resolved`` for ``spec`` and ``target``.

    Raises
    ------
    CompileError
        At the user's source position, for anything the kernel language rejects.
    """
    ch = Checker(resolved, target)
    try:
        params, slots = build_entry(ch, spec)
        ch.stmts(resolved.kernel.tree.body)
    except CompileError:
        raise
    except Exception as exc:  # any checker bug is reported at the user's line, never as a crash
        loc = ch.kernel.loc(ch.node) if ch.node is not None else None
        raise CompileError(
            f"internal compiler error ({type(exc).__name__}: {exc}) while compiling this line; this is a bug in "
            "tile.compiler, please report it with the kernel",
            loc,
            ch.call_sites,
        ) from exc
    ch.em.emit("return", [[]], [])
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in resolved.name)
    hints = _entry_hints(spec, ch.arch)
    ir = KernelIR(name, params, ch.em.block, hints)
    return TypedKernel(name, ir, KernelABI(name, tuple(slots)), spec, target)


def _entry_hints(spec: Specialization, arch: str) -> dict[str, dict[str, int]]:
    o = spec.options
    inner = {
        k: v
        for k, v in (
            ("occupancy", o.occupancy),
            ("num_cta_in_cga", o.num_cta_in_cga),
            ("num_worker_warps_per_cta", o.num_worker_warps),
        )
        if v is not None
    }
    return {arch: inner} if inner else {}


__all__ += ["Checker", "TokenType"]
