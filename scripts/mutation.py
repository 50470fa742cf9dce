"""Mutation testing of the modules that carry the project's promises (``nox -s mutation``; see docs/development.md).

A mutant is one small change to one module: a comparison turned into its neighbour (``<`` into ``<=``, ``==`` into
``!=``), an arithmetic or bitwise operator into its partner, ``and`` into ``or``, a ``not`` dropped, an integer
constant plus one, ``True`` into ``False``, a ``raise`` into ``pass``. Each mutant is written into a scratch copy
of the packages' sources, and the target's tests run against it in a fresh pytest; the mutant is *killed* when a
test fails (or the run exceeds its time limit), and *survives* otherwise. A survivor is a bug the suite would let
through, or an equivalent change (the docs argue each known one).

Why a runner of our own rather than mutmut or cosmic-ray: ``tile`` is a namespace package split over six source
trees, which mutmut's copy-and-trampoline layout does not model, and both tools mutate every operator of a module
while the promises here sit in a few functions; this file is short, needs nothing beyond the standard library and
the test dependencies, never edits the work tree, and samples reproducibly (``--sample N --seed S``) so CI can run a
bounded slice on every change while the full run stays one command::

    python scripts/mutation.py                      # every mutant of every target
    python scripts/mutation.py --sample 25          # 25 mutants drawn across the targets (seeded)
    python scripts/mutation.py --target interp-ops --list
    python scripts/mutation.py --target access --match _typecheck_memory.py:281:   # the mutants of one line
    python scripts/mutation.py --target interp-ops --jobs 14   # 14 mutants at once, each in its own copy

Each target's tests run unmutated, then once more under a line tracer (``mutation_trace.py``) that records the tests
reaching each line; a mutant then runs those tests first (``-x``, most kills end there), and the rest only if it
survives them. A mutant no test reaches survives without a run. ``mutation_pool.py`` runs them: with ``--jobs N``,
N at a time, each worker in its own scratch copy; the output and the report keep the mutants' order.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from mutation_pool import ROOT, Pool, Reach, Worker, copy_of, outcome, trace


@dataclass(frozen=True)
class Target:
    """Modules carrying one promise, and the tests that keep it; `functions` (when set) limits the mutants to the
    bodies of the functions and methods of those names (a module of which only a part carries the promise)."""

    modules: tuple[str, ...]
    tests: tuple[str, ...]
    functions: frozenset[str] = frozenset()


# the functions of _typecheck_memory and _typecheck_guards that decide how a kernel's accesses are kept in bounds
# and race-free
ACCESS_FUNCTIONS = frozenset({
    "guard_indices", "_emit_guard", "load_view", "method_partition_load", "block_index", "op_load_tile_like",
    "_output_read", "method_mut_load", "_own_index", "_set_mode", "method_mut_tiles", "tile_schedule", "_unravel",
    "_nonnegative_divide", "method_mut_store", "emit_store",
})  # fmt: skip
IR_TESTS, COMPILER_TESTS = "packages/tile-ir/tests", "packages/tile-compiler/tests"
FRONTEND_TESTS, CORE_TESTS = "packages/tile-frontend/tests", "packages/tile-core/tests"
TARGETS: dict[str, Target] = {
    "interp-ops": Target(
        tuple(
            f"packages/tile-ir/src/tile/ir/interp/{m}.py"
            for m in ("_arith", "_fused", "_shape", "_convert", "_reduce", "_i1")
        ),
        (
            f"{IR_TESTS}/test_ir_interp_ops.py",
            f"{IR_TESTS}/test_ir_interp_fused.py",
            f"{IR_TESTS}/test_ir_interp_ops_checked.py",
            f"{IR_TESTS}/test_ir_interp_ops_edges.py",
            f"{IR_TESTS}/test_ir_interp_i1.py",
            f"{IR_TESTS}/test_ir_interp_kernels.py",
            f"{IR_TESTS}/test_ir_interp_properties.py",
            f"{COMPILER_TESTS}/test_compiler_corpus_interp.py",
        ),
    ),
    "interp-races": Target(
        ("packages/tile-ir/src/tile/ir/interp/_races.py", "packages/tile-ir/src/tile/ir/interp/_hb.py"),
        (
            f"{IR_TESTS}/test_ir_interp_races.py",
            f"{IR_TESTS}/test_ir_interp_ordering.py",
            f"{IR_TESTS}/test_ir_interp_race_histories.py",
            f"{FRONTEND_TESTS}/test_frontend_race_detector.py",
        ),
    ),
    "guards": Target(
        ("packages/tile-compiler/src/tile/compiler/_guards.py",),
        (
            f"{COMPILER_TESTS}/test_compiler_guards.py",
            f"{COMPILER_TESTS}/test_compiler_typecheck.py",
            f"{FRONTEND_TESTS}/test_frontend_faults.py",
            "tests/adversarial/test_adversarial_kernels.py",
        ),
    ),
    # which accesses of a kernel are proven, left to the launcher or checked in the kernel, and which tiles of an
    # output a block may read and write (own tile, out.tiles(), never both)
    "access": Target(
        (
            "packages/tile-compiler/src/tile/compiler/_typecheck_memory.py",
            "packages/tile-compiler/src/tile/compiler/_typecheck_guards.py",
        ),
        (
            f"{COMPILER_TESTS}/test_compiler_typecheck.py",
            f"{COMPILER_TESTS}/test_compiler_diagnostics.py",
            f"{COMPILER_TESTS}/test_compiler_perf_forms.py",
            f"{COMPILER_TESTS}/test_compiler_subtiles.py",
            f"{COMPILER_TESTS}/test_compiler_corpus_interp.py",
            f"{FRONTEND_TESTS}/test_frontend_subtiles.py",
            "tests/adversarial/test_adversarial_kernels.py",
            "tests/adversarial/test_adversarial_subtiles.py",
        ),
        ACCESS_FUNCTIONS,
    ),
    "ownership": Target(
        ("packages/tile-frontend/src/tile/frontend/_ownership.py", "packages/tile-frontend/src/tile/frontend/_lend.py"),
        (
            f"{FRONTEND_TESTS}/test_frontend_misuse.py",
            f"{FRONTEND_TESTS}/test_frontend_ownership_fuzz.py",
            f"{FRONTEND_TESTS}/test_frontend_launch.py",
            f"{FRONTEND_TESTS}/test_frontend_tensors.py",
            f"{FRONTEND_TESTS}/test_frontend_placement.py",
            "tests/adversarial/test_adversarial_handles.py",
        ),
    ),
    "frees": Target(
        ("packages/tile-core/src/tile/core/_buffer.py",),
        (
            f"{CORE_TESTS}/test_core_simulated.py",
            f"{CORE_TESTS}/test_core_misuse.py",
            f"{CORE_TESTS}/test_core_launch_calls.py",
            "packages/tile-async/tests/test_aio_core_sim.py",
        ),
    ),
}

_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.And: ast.Or, ast.Or: ast.And,
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """The `index`-th mutation point of `module` (a path relative to the repository root).

    `lines` are the source lines whose execution runs the mutated code (the node's own and its statement's first);
    `in_function` is False for module and class bodies, which run at import, outside any one test.
    """

    target: str
    module: str
    index: int
    line: int
    change: str
    lines: tuple[int, ...] = ()
    in_function: bool = True

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.change}"


class _Mutator(ast.NodeTransformer):
    """Walks a module; numbers every mutation point, and applies the one numbered `apply` (if any)."""

    def __init__(self, apply: int | None = None, functions: frozenset[str] = frozenset()) -> None:
        self.apply = apply
        self.functions = functions
        self.points: list[tuple[int, str, tuple[int, ...], bool]] = []
        self._statements: list[ast.stmt] = []
        self._depth = 0  # functions entered
        self._chosen = 0  # functions entered whose name is in `functions`

    def visit(self, node: ast.AST) -> ast.AST:
        if not isinstance(node, ast.stmt):
            return cast(ast.AST, super().visit(node))
        self._statements.append(node)
        try:
            return cast(ast.AST, super().visit(node))
        finally:
            self._statements.pop()

    def _point(self, node: ast.AST, change: str) -> bool:
        if self.functions and not self._chosen:
            return False
        first = getattr(node, "lineno", 0)
        lines = set(range(first, (getattr(node, "end_lineno", None) or first) + 1))
        if self._statements:
            lines.add(self._statements[-1].lineno)
        self.points.append((first, change, tuple(sorted(lines)), self._depth > 0))
        return len(self.points) - 1 == self.apply

    # annotations, docstrings and decorators carry no behaviour worth a mutant
    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            node.value = cast(ast.expr, self.visit(node.value))
        return node

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        node.defaults = [cast(ast.expr, self.visit(d)) for d in node.defaults]
        node.kw_defaults = [cast(ast.expr, self.visit(d)) if d is not None else None for d in node.kw_defaults]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        chosen = node.name in self.functions
        self._chosen += chosen
        self._depth += 1
        try:
            node.args = cast(ast.arguments, self.visit(node.args))
            node.body = [cast(ast.stmt, self.visit(s)) for s in node.body]
        finally:
            self._chosen -= chosen
            self._depth -= 1
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            swap = _SWAPS.get(type(op))
            if swap and self._point(node, f"{type(op).__name__} -> {swap.__name__}"):
                node.ops[i] = swap()
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        swap = _SWAPS.get(type(node.op))
        if swap and self._point(node, f"{type(node.op).__name__} -> {swap.__name__}"):
            node.op = swap()
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        swap = _SWAPS.get(type(node.op))
        if swap and self._point(node, f"{type(node.op).__name__}= -> {swap.__name__}="):
            node.op = swap()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        swap = _SWAPS[type(node.op)]
        if self._point(node, f"{type(node.op).__name__} -> {swap.__name__}"):
            node.op = swap()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._point(node, "not x -> x"):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            if self._point(node, f"{value} -> {not value}"):
                return ast.copy_location(ast.Constant(not value), node)
        elif isinstance(value, int) and self._point(node, f"{value} -> {value + 1}"):
            return ast.copy_location(ast.Constant(value + 1), node)
        return node

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        self.generic_visit(node)
        if self._point(node, "raise -> pass"):
            return ast.copy_location(ast.Pass(), node)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node  # a docstring
        return self.generic_visit(node)


def mutants(names: list[str]) -> list[Mutant]:
    """Every mutant of the named targets, in a stable order."""
    found = []
    for name in names:
        for module in TARGETS[name].modules:
            mutator = _Mutator(functions=TARGETS[name].functions)
            mutator.visit(ast.parse((ROOT / module).read_text()))
            found += [
                Mutant(name, module, i, line, change, lines, in_function)
                for i, (line, change, lines, in_function) in enumerate(mutator.points)
            ]
    return found


def _mutated_source(mutant: Mutant) -> str:
    mutator = _Mutator(apply=mutant.index, functions=TARGETS[mutant.target].functions)
    tree = ast.fix_missing_locations(mutator.visit(ast.parse((ROOT / mutant.module).read_text())))
    return ast.unparse(tree)


def _check(worker: Worker, job: tuple[Mutant, Reach]) -> str:
    """Write `mutant` into `worker`'s copy, run its tests there, and put the module back."""
    mutant, reach = job
    path = copy_of(worker.root, mutant.module)
    original = path.read_text()
    path.write_text(_mutated_source(mutant))
    try:
        first = reach.tests_for(mutant.module, mutant.lines, mutant.in_function)
        return outcome(list(TARGETS[mutant.target].tests), first, reach.seconds, worker.copies)
    finally:
        path.write_text(original)


def run(selected: list[Mutant], report: Path | None, jobs: int = 1) -> int:
    """Run `selected` mutants, `jobs` at a time; print each outcome (in `selected`'s order) and the kill rate;
    return 0, or 1 when any mutant survived."""
    scratch = Path(tempfile.mkdtemp(prefix="tile_mutation_"))
    try:
        pool = Pool(scratch, min(jobs, max(len(selected), 1)))
        tracer = pool.workers[0]
        reaches: dict[str, Reach] = {}
        for name in sorted({m.target for m in selected}):
            target = TARGETS[name]
            reach = trace(name, list(target.tests), target.modules, tracer.root, tracer.copies)
            if reach is None:
                print(f"{name}: the tests fail before any mutation; fix them first")
                return 2
            reaches[name] = reach
        survivors, results = [], []
        outcomes = pool.map(_check, [(m, reaches[m.target]) for m in selected])
        for n, (mutant, result) in enumerate(zip(selected, outcomes, strict=True), 1):
            print(f"[{n}/{len(selected)}] {result:29} {mutant}", flush=True)
            results.append({**mutant.__dict__, "outcome": result})
            if result.startswith("survived"):
                survivors.append(mutant)
        killed = len(selected) - len(survivors)
        print(f"\nkilled {killed} of {len(selected)} mutants ({100 * killed / max(len(selected), 1):.1f}%)")
        for mutant in survivors:
            print(f"  survivor: {mutant}    | {_source_line(mutant)}")
        if report is not None:
            report.write_text(json.dumps(results, indent=1))
        return 1 if survivors else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _source_line(mutant: Mutant) -> str:
    return (ROOT / mutant.module).read_text().splitlines()[mutant.line - 1].strip()


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="repeatable; default: all")
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn at random (seeded)")
    parser.add_argument("--seed", type=int, default=0, help="the draw of --sample (default 0)")
    parser.add_argument("--match", action="append", help="only mutants whose description contains this (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--report", type=Path, help="write every outcome to this JSON file")
    parser.add_argument("--jobs", type=int, default=1, help="run this many mutants at once (default 1)")
    args = parser.parse_args(argv)
    selected = mutants(args.target or sorted(TARGETS))
    if args.match:
        selected = [m for m in selected if any(text in str(m) for text in args.match)]
    if args.sample is not None and args.sample < len(selected):
        selected = sorted(random.Random(args.seed).sample(selected, args.sample), key=lambda m: (m.module, m.index))
    if args.list:
        for mutant in selected:
            print(mutant)
        print(f"{len(selected)} mutants")
        return 0
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return run(selected, args.report, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
