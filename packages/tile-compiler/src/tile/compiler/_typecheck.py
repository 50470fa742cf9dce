"""Stage ``typecheck``: a resolved kernel and its specialization to a typed, fully inlined kernel IR.

The checker interprets the kernel body abstractly: compile-time values (literals, ``Const`` parameters, const
generics, shapes) are folded; everything else becomes typed Tile-IR-shaped ops (`tile.compiler._kir`). Helpers
are inlined at each call; ``if`` on a constant keeps one branch; ``if`` on a runtime bool, ``for``/``while`` become
structured ops whose results are the variables the branches/bodies reassign (memory tokens included, so the
order of stores and loads survives control flow). Invariant: every error is a CompileError at the user's node.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from tile.compiler._contract import contract_fma
from tile.compiler._diagnostics import CompileError, SourceLoc
from tile.compiler._kir import Block, KernelIR, Value
from tile.compiler._math_modes import apply_defaults
from tile.compiler._parse import KernelAST, parse
from tile.compiler._resolve import ResolvedKernel, resolve
from tile.compiler._spec import KernelABI, Specialization, Target, hint_for
from tile.compiler._typecheck_arith import I1, is_const, type_name
from tile.compiler._typecheck_carry import leaf_count, struct_of
from tile.compiler._typecheck_entry import build_entry
from tile.compiler._typecheck_loops import Exit, LoopFrame, LoopMixin
from tile.compiler._typecheck_values import Emitter, TensorV, TileIndex
from tile.compiler._types import DType, TileType, TokenType, Type

__all__ = ["TypedKernel", "typecheck"]

_MAX_INLINE_DEPTH = 32
_RET = "$ret"


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
class _Frame:
    kernel: KernelAST
    resolved: ResolvedKernel
    env: dict[str, object]
    loops: list[LoopFrame] = field(default_factory=list)


class Checker(LoopMixin):
    """Walks a kernel's statements, emitting typed ops."""

    def __init__(
        self,
        resolved: ResolvedKernel,
        target: Target,
        *,
        unchecked: bool = False,
        debug_guards: bool = False,
        own_grid: bool = False,
    ) -> None:
        self.kernel = resolved.kernel
        self.resolved = resolved
        self.env = {}
        self.loops: list[LoopFrame] = []
        self.node = None
        self.call_sites: tuple[SourceLoc, ...] = ()
        self.em = Emitter()
        self.in_range = {}
        self.entry_block = self.em.block
        self.grid_values = {}
        self.index_constants = {}
        self.host_values = {}
        self.below_count = {}
        self.nonnegative = set()
        self.index_bounds = {}
        self.host_guards = {}
        self.owned_tiles = {}
        self.unchecked = unchecked  # from the compile options only: a helper inlined here follows the entry
        self.arch = "default" if target.is_cpu else target.arch
        self.assert_guards = target.is_cpu or debug_guards  # see `_emit_guard`
        self.own_grid = own_grid  # one block per output tile: a tiles() walk runs once (see Specialization)

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
        structs = [struct_of(live[0][2][n]) for n in names]
        leaf_names = [n for n, st in zip(names, structs, strict=True) for _ in range(leaf_count(st))]
        flats = [
            [leaf for n, st in zip(names, structs, strict=True) for leaf in self.flat_leaves(n, env[n], st)]
            for _, _, env in live
        ]
        # A leaf that is one compile-time object on every path (a tensor in a tuple) stays as it is.
        fixed = [
            all(f[i] is flats[0][i] for f in flats) and not isinstance(flats[0][i], Value)
            for i in range(len(leaf_names))
        ]
        picked = [i for i in range(len(leaf_names)) if not fixed[i]]
        types = [self._merge_type(leaf_names[i], [f[i] for f in flats]) for i in picked]
        for (block, _, _), flat in zip(live, flats, strict=True):
            with self.in_block(block):
                values = [self.coerce_to(leaf_names[i], flat[i], t) for i, t in zip(picked, types, strict=True)]
                self.em.emit("yield", [values], [])
        results = iter(self.em.emit("if", [c], types, {}, [branches[0][0], branches[1][0]]))
        merged = [flats[0][i] if fixed[i] else next(results) for i in range(len(leaf_names))] if live else []
        self.env.update(self.bind_carried(names, structs, merged))
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


def typecheck(
    resolved: ResolvedKernel, spec: Specialization, target: Target, version: tuple[int, int] | None = None
) -> TypedKernel:
    """Type-check and inline ``resolved`` for ``spec`` and ``target``; ``version`` is the bytecode version the kernel
    will be written at (None: the newest; ops it cannot encode are refused at the user's line).

    Raises
    ------
    CompileError
        At the user's source position, for anything the kernel language rejects.
    """
    o = spec.options
    ch = Checker(resolved, target, unchecked=o.unchecked, debug_guards=o.debug_guards, own_grid=spec.own_grid)
    ch.bytecode_version = version
    try:
        params, slots = build_entry(ch, spec)
        tensors = [v for v in ch.env.values() if isinstance(v, TensorV)]
        outputs = [v for v in tensors if v.mut]
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
    apply_defaults(ch.em.block, spec.options.flush_to_zero, spec.options.approx)
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in resolved.name)
    hints = _entry_hints(spec, ch.arch)
    ir = KernelIR(name, params, ch.em.block, hints)
    if spec.options.fp_contract:
        contract_fma(ir)
    schemes = tuple((t.name, t.mode or "own") for t in outputs)
    # What the code's addressing assumes of each argument beyond the slots (a launcher checks them once per layout).
    tiles = tuple((t.name, t.tile) for t in outputs)
    static = tuple(
        (t.name, tuple(e if type(e) is int else None for e in t.extents))
        for t in tensors
        if any(type(e) is int for e in t.extents)
    )
    abi = KernelABI(
        name, tuple(slots), tuple(ch.host_guards), schemes, waits_prior_grid=o.pdl, tiles=tiles, static_extents=static
    )
    return TypedKernel(name, ir, abi, spec, target)


def _entry_hints(spec: Specialization, arch: str) -> dict[str, dict[str, int]]:
    o = spec.options
    inner = {
        k: v
        for k, v in (
            ("occupancy", hint_for(o.occupancy, arch)),
            ("num_cta_in_cga", hint_for(o.num_cta_in_cga, arch)),
            ("num_worker_warps_per_cta", hint_for(o.num_worker_warps, arch)),
        )
        if v is not None
    }
    return {arch: inner} if inner else {}


__all__ += ["Checker", "TokenType"]
