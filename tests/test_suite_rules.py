"""Rules every test of the repository follows, checked on the source (AST) of every test module.

1. **A test checks something.** Its body (nested functions and lambdas included) holds an ``assert``, a call of
   ``pytest.raises`` / ``pytest.warns`` / ``pytest.fail``, a call whose name starts with ``assert``
   (``np.testing.assert_allclose``, ``tol.assert_close``), or a call of a helper that itself checks something: a
   function of the same module, or one imported from a ``helpers_*`` / ``tc_*`` module beside it (followed
   transitively). A test that only runs code "to see it does not crash" states what it expects instead.
2. **An error test checks the message.** ``pytest.raises(E)`` gives ``match=`` or binds the exception
   (``as info``) and reads it afterwards. Exempt: exceptions that carry no message by design
   (``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit`` is read through ``info``).

`test_the_rules_reject_what_they_forbid` feeds the checker bad examples, so the rules themselves can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK_CALLS = frozenset({"raises", "warns", "fail", "deprecated_call"})
MESSAGELESS = frozenset({"CancelledError", "KeyboardInterrupt"})
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _checks(fn: ast.AST, checkers: set[str]) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name and (name.startswith("assert") or name in CHECK_CALLS or name in checkers):
                return True
    return False


def checkers_of(tree: ast.Module, folder: Path | None, seen: frozenset[Path] = frozenset()) -> set[str]:
    """Names of the functions of `tree` (and of the helper modules it imports from `folder`) that check."""
    checkers: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and folder is not None:
            helper = folder / f"{node.module}.py"
            if node.module.startswith(("helpers_", "tc_")) and helper.exists() and helper not in seen:
                theirs = checkers_of(ast.parse(helper.read_text()), folder, seen | {helper})
                checkers |= {alias.asname or alias.name for alias in node.names if alias.name in theirs}
    functions = [n for n in ast.walk(tree) if isinstance(n, Function)]
    grew = True
    while grew:
        before = len(checkers)
        checkers |= {fn.name for fn in functions if fn.name not in checkers and _checks(fn, checkers)}
        grew = len(checkers) > before
    return checkers


def _unread_raises(fn: Function) -> list[int]:
    """Lines of ``pytest.raises(E)`` in `fn` that neither match the message nor read the exception."""
    names_read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    lines = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.With | ast.AsyncWith):
            continue
        for item in node.items:
            call = item.context_expr
            if not (isinstance(call, ast.Call) and _callee(call) == "raises" and call.args):
                continue
            if any(k.arg == "match" for k in call.keywords) or ast.unparse(call.args[0]).split(".")[-1] in MESSAGELESS:
                continue
            bound = item.optional_vars
            if isinstance(bound, ast.Name) and bound.id in names_read:
                continue
            lines.append(node.lineno)
    return lines


def violations(source: str, folder: Path | None = None, where: str = "<test>") -> list[str]:
    """Every break of the two rules in a test module's `source`, as ``where:line: what``."""
    tree = ast.parse(source)
    checkers = checkers_of(tree, folder)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, Function) and node.name.startswith("test"):
            if not _checks(node, checkers):
                found.append(f"{where}:{node.lineno}: {node.name} checks nothing")
            found += [
                f"{where}:{line}: {node.name}: pytest.raises checks only the type" for line in _unread_raises(node)
            ]
    return found


def _test_modules() -> list[Path]:
    return sorted(ROOT.glob("packages/*/tests/**/test_*.py")) + sorted((ROOT / "tests").glob("**/test_*.py"))


def test_every_test_checks_something_and_every_error_test_reads_the_message() -> None:
    modules = _test_modules()
    assert len(modules) > 80  # the glob found the suite
    found = [v for path in modules for v in violations(path.read_text(), path.parent, str(path.relative_to(ROOT)))]
    assert not found, "\n".join(found)


def test_the_rules_reject_what_they_forbid() -> None:
    bad = """
import pytest

def test_runs_only():
    run()

def test_type_only():
    with pytest.raises(ValueError):
        run()

def test_bound_but_unread():
    with pytest.raises(ValueError) as info:
        run()
"""
    good = """
import asyncio
import pytest

def _expect(x):
    assert x

def test_through_a_helper():
    _expect(run())

def test_message_matched():
    with pytest.raises(ValueError, match="why"):
        run()

def test_message_read():
    with pytest.raises(ValueError) as info:
        run()
    check(str(info.value) == "why")
    assert info

def test_cancellation():
    with pytest.raises(asyncio.CancelledError):
        run()
"""
    assert [v.split(": ", 1)[1] for v in violations(bad)] == [
        "test_runs_only checks nothing",
        "test_type_only: pytest.raises checks only the type",
        "test_bound_but_unread: pytest.raises checks only the type",
    ]
    assert violations(good) == []
