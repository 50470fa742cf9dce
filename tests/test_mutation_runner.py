"""scripts/mutation.py (``nox -s mutation``) mutates what its targets name, one point at a time, and only there."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_runner", ROOT / "scripts" / "mutation.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mutation = _runner()


def test_every_target_names_files_that_exist() -> None:
    for name, target in mutation.TARGETS.items():
        for path in (*target.modules, *target.tests):
            assert (ROOT / path).is_file(), f"target {name}: {path} does not exist"


def test_a_mutant_changes_one_point_of_its_module() -> None:
    for mutant in mutation.mutants(["guards"])[:6]:
        original = ast.unparse(ast.parse((ROOT / mutant.module).read_text()))
        mutated = mutation._mutated_source(mutant)
        changed = [(a, b) for a, b in zip(original.splitlines(), mutated.splitlines(), strict=True) if a != b]
        assert len(changed) == 1, f"{mutant}: {changed}"


def test_a_function_filter_keeps_mutants_inside_those_functions() -> None:
    target = mutation.TARGETS["access"]
    (module,) = target.modules
    tree = ast.parse((ROOT / module).read_text())
    inside = {
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in target.functions
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    }
    found = mutation.mutants(["access"])
    assert found
    assert all(m.line in inside for m in found)
    assert {m.index for m in found} == set(range(len(found)))  # numbered as applied: --match selects by them
