"""Stage ``parse``: a Python function to its kernel AST, with the file position and namespace it came from.

Invariants: the AST is of the function's own source (dedented), and every node position maps back to the file by
adding ``first_line - 1`` to its line; ``source_hash`` covers the kernel and every ``@tile.function`` helper it can
reach, so editing a helper changes the hash. Parsing is cached per function object.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import textwrap
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast

from tile.compiler._diagnostics import CompileError, SourceLoc
from tile.compiler.lang._function import is_function

__all__ = ["Closure", "KernelAST", "parse"]

_CACHE: weakref.WeakKeyDictionary[Callable[..., object], KernelAST] = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class KernelAST:
    """A parsed kernel or helper: its ``ast.FunctionDef`` and where names in it are looked up."""

    fn: Callable[..., object]
    name: str
    filename: str
    first_line: int
    source: str
    tree: ast.FunctionDef
    globals: Mapping[str, Any]
    closure: Closure
    helpers: list[KernelAST] = field(default_factory=list)

    @property
    def line_offset(self) -> int:
        """What to add to an AST line number to get the file line."""
        return self.first_line - 1

    def loc(self, node: ast.AST) -> SourceLoc:
        """The file location of ``node``."""
        return SourceLoc.of(node, self.filename, self.line_offset, self.name)

    @property
    def source_hash(self) -> str:
        """sha256 over this function's source and, recursively, every helper it reaches."""
        h = hashlib.sha256()
        seen: set[int] = set()
        todo = [self]
        while todo:
            k = todo.pop()
            if id(k) in seen:
                continue
            seen.add(id(k))
            h.update(f"{k.filename}:{k.first_line}:{len(k.source)}\n".encode())
            h.update(k.source.encode())
            todo.extend(k.helpers)
        return h.hexdigest()

    def dump(self) -> str:
        """The kernel AST as text (``TILE_DUMP=ast``)."""
        return f"# {self.name} from {self.filename}:{self.first_line}\n{ast.dump(self.tree, indent=2)}"


class Closure(Mapping[str, Any]):
    """A function's closure variables by name, read live from its cells (a ``nonlocal`` rebinding shows), skipping
    an unbound cell; `cells` gives each name's cell (what `tile.compiler._captures` records a read from)."""

    def __init__(self, cells: dict[str, Any]) -> None:
        self.cells = cells

    def __getitem__(self, name: str) -> Any:
        try:
            return self.cells[name].cell_contents
        except ValueError:  # an unbound cell: the name is simply not available to the kernel
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return (name for name in self.cells if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]  # any object: a non-str is simply not there
        except KeyError:
            return False
        return True


def _closure_of(fn: Callable[..., object]) -> Closure:
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    return Closure(dict(zip(code.co_freevars if code else (), cells, strict=False)))


def parse(fn: Callable[..., object]) -> KernelAST:
    """Parse ``fn`` (a kernel or ``@tile.function`` helper) into a `KernelAST`.

    Raises
    ------
    CompileError
        When the source cannot be read or is not a plain ``def``.
    """
    fn = inspect.unwrap(fn)
    if (hit := _CACHE.get(fn)) is not None:
        return hit
    name = getattr(fn, "__name__", repr(fn))
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError):
        raise CompileError(f"cannot read the source of '{name}'; define kernels and helpers in a .py file") from None
    source = textwrap.dedent("".join(lines))
    module = ast.parse(source)
    tree = module.body[0] if module.body else None
    if not isinstance(tree, ast.FunctionDef):
        loc = SourceLoc(filename, first, 0, None, name, lines[0].rstrip("\n"))
        raise CompileError(f"'{name}' must be a plain 'def' function to be compiled (not a lambda or async def)", loc)
    kernel = KernelAST(
        fn,
        name,
        filename,
        first,
        source,
        tree,
        getattr(fn, "__globals__", {}),
        _closure_of(fn),
    )
    _CACHE[fn] = kernel
    kernel.helpers.extend(parse(h) for h in _reachable_helpers(kernel))
    return kernel


def _reachable_helpers(kernel: KernelAST) -> list[Callable[..., object]]:
    """Helpers named in the body (``helper(...)`` or ``module.helper(...)``), found without evaluating code."""
    found: dict[int, Callable[..., object]] = {}
    for node in ast.walk(kernel.tree):
        obj = _static_lookup(node, kernel)
        if obj is not None and is_function(obj) and obj is not kernel.fn:
            found[id(obj)] = cast("Callable[..., object]", obj)
    return list(found.values())


def _static_lookup(node: ast.AST, kernel: KernelAST) -> object | None:
    if isinstance(node, ast.Name):
        for scope in (kernel.closure, kernel.globals, vars(builtins)):
            if node.id in scope:
                found: object = scope[node.id]
                return found
        return None
    if isinstance(node, ast.Attribute):
        base = _static_lookup(node.value, kernel)
        if isinstance(base, ModuleType):
            return getattr(base, node.attr, None)
    return None
