"""scripts/mutation.py (``nox -s mutation``) mutates what its targets name, one point at a time, and only there."""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _runner() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))  # as `python scripts/mutation.py` has it: mutation_pool beside it
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
    found = mutation.mutants(["access"])
    assert {m.module for m in found} == set(target.modules)  # the filter finds its functions in every module
    for module in target.modules:
        tree = ast.parse((ROOT / module).read_text())
        inside = {
            line
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name in target.functions
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
        }
        mine = [m for m in found if m.module == module]
        assert all(m.line in inside for m in mine)
        assert {m.index for m in mine} == set(range(len(mine)))  # numbered as applied: --match selects by them


def test_a_pool_gives_each_running_item_its_own_copy_and_results_in_order(tmp_path: Path) -> None:
    pool = mutation.Pool(tmp_path, 3)
    roots = {w.root for w in pool.workers}
    assert len(roots) == 3
    for worker in pool.workers:  # a full copy of every package's sources, apart from the others'
        assert [c.parent.name for c in worker.copies] == [s.parent.name for s in sys.modules["mutation_pool"].SOURCES]
        assert all(c.is_relative_to(worker.root) and (c / "tile").is_dir() for c in worker.copies)
    busy: set[Path] = set()
    lock = threading.Lock()

    def work(worker: Any, item: int) -> tuple[int, Path]:
        root: Path = worker.root
        with lock:
            assert root not in busy, "two items ran in one worker's copy at once"
            busy.add(root)
        time.sleep(0.01 * (7 - item % 7))  # later items finish first
        with lock:
            busy.discard(root)
        return item, root

    results = list(pool.map(work, range(12)))
    assert [item for item, _ in results] == list(range(12))
    assert {root for _, root in results} == roots  # every worker took a share


def test_a_pool_left_early_does_not_run_the_remaining_items(tmp_path: Path) -> None:
    """An interrupted run (Ctrl-C while printing) must not wait for every queued mutant."""
    pool = mutation.Pool(tmp_path, 1)
    ran: list[int] = []

    def work(worker: Any, item: int) -> int:
        time.sleep(0.01)
        ran.append(item)
        return item

    results = pool.map(work, range(50))
    assert next(results) == 0
    results.close()  # what an exception in the consumer does
    assert len(ran) < 5, ran
