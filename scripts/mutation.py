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
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("packages/tile-*/src"))


@dataclass(frozen=True)
class Target:
    """Modules carrying one promise, and the tests that keep it."""

    modules: tuple[str, ...]
    tests: tuple[str, ...]


TARGETS: dict[str, Target] = {
    "interp-ops": Target(
        tuple(f"packages/tile-ir/src/tile/ir/interp/{m}.py" for m in ("_arith", "_shape", "_convert", "_reduce")),
        ("packages/tile-ir/tests/test_ir_interp_ops.py", "packages/tile-ir/tests/test_ir_interp_ops_checked.py"),
    ),
    "interp-races": Target(
        ("packages/tile-ir/src/tile/ir/interp/_races.py", "packages/tile-ir/src/tile/ir/interp/_hb.py"),
        ("packages/tile-ir/tests/test_ir_interp_races.py", "packages/tile-ir/tests/test_ir_interp_ordering.py"),
    ),
    "guards": Target(
        ("packages/tile-compiler/src/tile/compiler/_guards.py",),
        ("packages/tile-compiler/tests/test_compiler_guards.py",),
    ),
    "ownership": Target(
        ("packages/tile-frontend/src/tile/frontend/_ownership.py", "packages/tile-frontend/src/tile/frontend/_lend.py"),
        ("packages/tile-frontend/tests/test_frontend_misuse.py", "tests/adversarial/test_adversarial_handles.py"),
    ),
    "frees": Target(
        ("packages/tile-core/src/tile/core/_buffer.py",),
        ("packages/tile-core/tests/test_core_simulated.py", "packages/tile-core/tests/test_core_misuse.py"),
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
    """The `index`-th mutation point of `module` (a path relative to the repository root)."""

    target: str
    module: str
    index: int
    line: int
    change: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.change}"


class _Mutator(ast.NodeTransformer):
    """Walks a module; numbers every mutation point, and applies the one numbered `apply` (if any)."""

    def __init__(self, apply: int | None = None) -> None:
        self.apply = apply
        self.points: list[tuple[int, str]] = []

    def _point(self, node: ast.AST, change: str) -> bool:
        self.points.append((getattr(node, "lineno", 0), change))
        return len(self.points) - 1 == self.apply

    # annotations, docstrings and decorators carry no behaviour worth a mutant
    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        if node.value is not None:
            node.value = self.visit(node.value)
        return node

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        node.defaults = [self.visit(d) for d in node.defaults]
        node.kw_defaults = [self.visit(d) if d is not None else None for d in node.kw_defaults]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.args = self.visit(node.args)
        node.body = [self.visit(s) for s in node.body]
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
            mutator = _Mutator()
            mutator.visit(ast.parse((ROOT / module).read_text()))
            found += [Mutant(name, module, i, line, change) for i, (line, change) in enumerate(mutator.points)]
    return found


def _mutated_source(mutant: Mutant) -> str:
    mutator = _Mutator(apply=mutant.index)
    tree = ast.fix_missing_locations(mutator.visit(ast.parse((ROOT / mutant.module).read_text())))
    return ast.unparse(tree)


def _pytest(tests: tuple[str, ...], sources: list[Path], timeout: float) -> tuple[int, float]:
    """Run `tests` with `sources` first on the path; return (exit status, seconds); a timeout is status -1."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(s) for s in sources), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - start
    return done.returncode, time.monotonic() - start


def run(selected: list[Mutant], report: Path | None) -> int:
    """Run `selected` mutants; print each outcome and the kill rate; return 0, or 1 when any mutant survived."""
    scratch = Path(tempfile.mkdtemp(prefix="tile_mutation_"))
    try:
        copies = []
        for src in SOURCES:
            copy = scratch / src.parent.name / "src"
            shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
            copies.append(copy)
        baselines: dict[str, float] = {}
        for name in sorted({m.target for m in selected}):
            status, seconds = _pytest(TARGETS[name].tests, copies, timeout=900)
            if status != 0:
                print(f"{name}: the tests fail before any mutation (exit {status}); fix them first")
                return 2
            baselines[name] = seconds
        survivors, results = [], []
        for n, mutant in enumerate(selected, 1):
            path = scratch / Path(mutant.module).relative_to("packages")
            original = path.read_text()
            path.write_text(_mutated_source(mutant))
            try:
                status, _ = _pytest(TARGETS[mutant.target].tests, copies, timeout=60 + 4 * baselines[mutant.target])
            finally:
                path.write_text(original)
            outcome = "survived" if status == 0 else ("timeout (killed)" if status == -1 else "killed")
            print(f"[{n}/{len(selected)}] {outcome:16} {mutant}", flush=True)
            results.append({**mutant.__dict__, "outcome": outcome})
            if status == 0:
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
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--report", type=Path, help="write every outcome to this JSON file")
    args = parser.parse_args(argv)
    selected = mutants(args.target or sorted(TARGETS))
    if args.sample is not None and args.sample < len(selected):
        selected = sorted(random.Random(args.seed).sample(selected, args.sample), key=lambda m: (m.module, m.index))
    if args.list:
        for mutant in selected:
            print(mutant)
        print(f"{len(selected)} mutants")
        return 0
    return run(selected, args.report)


if __name__ == "__main__":
    sys.exit(main())
