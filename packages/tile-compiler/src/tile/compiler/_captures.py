"""What a kernel reads from its module globals and closures when it is compiled, and whether that still holds.

The rule (total): every global, closure variable or module attribute that a kernel, or a helper it reaches, reads at
compile time is one of

(a) a *value*, compiled in and keyed by value: ``int``, ``float``, ``bool``, ``str``, ``None``, a dtype, an enum
    member, or a ``tuple``/``frozenset`` of values (nested to any depth);
(b) *code or a namespace*, followed as such: a module, a class (an enum class too), a function, a ``@tile.function``
    helper or kernel (anything wrapping a function), or a kernel-language object (an op, a dtype, an annotation);
(c) anything else (a list, a dict, a numpy array, an arbitrary object): refused with a `CompileError` at the line
    that reads it, since it could change between calls without the compiled kernel knowing.

`Captures` records, for each such read, where it came from (the module's dict, a closure cell) and the object found.
`Captures.fresh` is the per-launch test: each holder still holds the same object (identity, the steady state), else
an equal value of the same type, with the very same enum members in it (then it is adopted, so the next test hits by
identity again; another enum class of the same name is another value). A name that came from
the builtins is recorded as absent from the globals, so a global that later shadows it is noticed too. `Captures.key`
is the part of the compile-cache key these reads make: values by value, code and namespaces by name.
"""

from __future__ import annotations

import ast
import builtins
import enum
import hashlib
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tile.compiler._diagnostics import CompileError, SourceLoc
from tile.compiler._parse import Closure
from tile.compiler._types import DType

__all__ = ["MISSING", "Captures", "Read", "captures", "check_read", "held", "reads_of", "value_key"]

MISSING: Any = object()
"""What a holder holds for a name it lacks (a builtin not shadowed by a global, an emptied closure cell)."""

Read = tuple[Any, str, Any]
"""One compile-time read: (holder, name, object found): the holder is a module's dict or a closure cell."""

# Each value type (exactly that class: a subclass may compare or hash as it likes) and its key text.
_SCALARS: Mapping[type, Callable[[Any], str]] = {
    bool: lambda v: f"b{v}",
    int: lambda v: f"i{v}",
    float: lambda v: f"f{float.hex(v)}",
    str: lambda v: f"s{v!r}",
    type(None): lambda v: "N",
    DType: lambda v: f"d{v.name}",
}


def value_key(value: object, classes: dict[int, int] | None = None) -> str | None:
    """``value`` as text that equals another's exactly when both compile the same (type and value), or None when it
    is not a value of rule (a). A float is keyed by its bits (``-0.0`` is not ``0.0``). An enum member is keyed by
    its class's name, its name and its own value where that is a value; with ``classes`` (`enum_class_number`'s
    numbering of one kernel's reads) also by which of the kernel's enum classes it belongs to."""
    cls = type(value)
    if isinstance(value, enum.Enum):  # before int: an IntEnum member is its class's member, not a number
        # No module name (see `Captures.key`), but the member's own value: an edited enum class in another file
        # changes the key; and the class's number among the reads: another class of the same name is another value.
        inner = value_key(value.value)
        number = f"#{enum_class_number(classes, cls)}" if classes is not None else ""
        return f"e{cls.__qualname__}{number}.{value.name}" + (f"={inner}" if inner is not None else "")
    if cls is tuple or cls is frozenset:
        parts = [value_key(v, classes) for v in value]  # type: ignore[attr-defined]  # a tuple or frozenset
        if None in parts:
            return None
        text = ",".join(sorted(parts) if cls is frozenset else parts)  # type: ignore[arg-type]  # no None left
        return f"({text})" if cls is tuple else f"{{{text}}}"
    scalar = _SCALARS.get(cls)
    return scalar(value) if scalar is not None else None


def enum_class_number(classes: dict[int, int], cls: type) -> int:
    """``cls``'s number in ``classes`` (ids of the enum classes met so far, numbered in the order met; the caller
    holds them), a new number when first met: two reads of one class share it, two classes of one name do not."""
    return classes.setdefault(id(cls), len(classes))


def _members(value: object) -> frozenset[int]:
    """The ids of the enum members in a value (in tuples and frozensets too): its key names a member by its class's
    name, which another class may share, so an equal key is the same value only with the very same members."""
    if isinstance(value, enum.Enum):
        return frozenset({id(value)})
    if type(value) is tuple or type(value) is frozenset:
        return frozenset().union(*(_members(v) for v in value))
    return frozenset()


def _followed(value: object) -> bool:
    """Rule (b): code or a namespace, resolved by the compiler as such (which refuses what it cannot call)."""
    if isinstance(value, types.ModuleType) or callable(value):  # a module, class, function, helper, kernel, op
        return True
    from tile.compiler.lang._ops import LangOp

    module = type(value).__module__
    return isinstance(value, LangOp) or module.startswith("tile.compiler") or module == "typing"


def _rule(value: object) -> str:
    """``"value"``, ``"code"`` or ``"other"`` (rules a, b, c)."""
    if value_key(value) is not None:
        return "value"
    return "code" if _followed(value) else "other"


def check_read(name: str, value: object, loc: SourceLoc | None) -> None:
    """Refuse a compile-time read of ``value`` (named ``name``) that is neither a value nor code (rule c).

    Raises
    ------
    CompileError
        At ``loc``, saying what to do instead.
    """
    if value is MISSING or _rule(value) != "other":  # MISSING: a builtin, read as such
        return
    raise CompileError(
        f"the kernel reads the mutable global '{name}' (a {type(value).__name__}) at compile time; a change to it "
        f"would not reach the compiled kernel. Pass it as a Const[...] parameter, or make it a tuple (values that "
        f"are ints, floats, bools, strings, None, dtypes, enum members or tuples/frozensets of those are compiled "
        f"in and checked on every call)",
        loc,
    )


def held(holder: Any, name: str) -> Any:
    """What ``holder`` (a dict or a closure cell) holds for ``name`` now, or `MISSING`."""
    if isinstance(holder, dict):
        return holder.get(name, MISSING)
    try:
        return holder.cell_contents
    except ValueError:  # an emptied cell
        return MISSING


class Captures:
    """The compile-time reads of a kernel and its helpers (see the module docstring)."""

    __slots__ = ("_cells", "_dicts", "_resolved")

    def __init__(self, reads: tuple[Read, ...], resolved: tuple[Any, ...] = ()) -> None:
        self._dicts: tuple[Read, ...] = ()
        self._cells: tuple[Read, ...] = ()
        self._resolved = resolved
        self._set(tuple({(id(h), n): (h, n, v) for h, n, v in reads}.values()))

    def resolutions(self) -> tuple[Any, ...]:
        """The `tile.compiler._resolve.ResolvedKernel` of the kernel and of each helper, as this snapshot read them:
        a compile pinned to them (`tile.compiler._resolve.pinned`) compiles exactly the values `key` names."""
        return self._resolved

    def _set(self, reads: tuple[Read, ...]) -> None:
        self._dicts = tuple(r for r in reads if isinstance(r[0], dict))
        self._cells = tuple(r for r in reads if not isinstance(r[0], dict))

    def __len__(self) -> int:
        return len(self._dicts) + len(self._cells)

    def fresh(self) -> bool:
        """Whether every read still finds the same object (by identity), or else an equal value (then adopted)."""
        for holder, name, found in self._dicts:
            if holder.get(name, MISSING) is not found:
                return self._recheck()
        for cell, name, found in self._cells:
            if held(cell, name) is not found:
                return self._recheck()
        return True

    def _recheck(self) -> bool:
        """`fresh` past an identity miss: every changed read must hold an equal value, which is then adopted."""
        reads = (*self._dicts, *self._cells)
        now = tuple((h, n, held(h, n)) for h, n, _ in reads)
        for (_, _, before), (_, _, after) in zip(reads, now, strict=True):
            if before is after:
                continue
            key = value_key(before) if before is not MISSING else None
            if key is None or after is MISSING or key != value_key(after) or _members(before) != _members(after):
                return False  # (both hold their members: their ids name no other object while compared)
        self._set(now)  # adopt the equal values: the next test hits by identity
        return True

    def key(self) -> bytes:
        """What these reads add to the compile-cache key, in the order they were made (the kernel's text fixes it):
        each value by value, other objects by kind and qualified name, the enum classes (read, or of a member read)
        numbered in the order met, so a member of another class of the same name keys apart. No module name enters it
        (the CLI imports a file under another name than the application does); a user module's file is hashed by the
        fingerprint. A snapshot also adds the text of each function it resolved (the kernel and every helper, with its
        first line) and the parameters it read from the annotations: the code it compiles, whatever another read of
        the globals (the fingerprint's) finds."""
        parts = [
            f"code {r.kernel.name}@{r.kernel.first_line}:{hashlib.sha256(r.kernel.source.encode()).hexdigest()}"
            f"({';'.join(_param_key(p) for p in r.params)})"
            for r in self._resolved
        ]
        classes: dict[int, int] = {}  # the enum classes read (as classes or by their members), numbered as met
        for holder, name, found in (*self._dicts, *self._cells):
            text = value_key(found, classes)
            if text is None:
                if found is MISSING:
                    text = "-"
                elif isinstance(found, types.ModuleType):
                    text = "module"
                else:
                    label = getattr(found, "__qualname__", None) or getattr(found, "__name__", None)
                    text = f"{type(found).__qualname__}:{label if isinstance(label, str) else ''}"
                    if isinstance(found, type) and issubclass(found, enum.Enum):
                        text += f"#{enum_class_number(classes, found)}"
            parts.append(f"{'cell ' if not isinstance(holder, dict) else ''}{name}={text}")
        return "\0".join(parts).encode()


def _param_key(p: Any) -> str:
    """A `tile.compiler._resolve.ParamInfo` as text (its kind, dtype, shape and the rest; not its AST node)."""
    dtype = p.dtype.name if p.dtype is not None else "-"
    const = p.const_kind.__qualname__ if p.const_kind is not None else "-"
    return f"{p.name}:{p.kind}:{dtype}:{p.shape!r}:{const}:{p.dtype_generic}:{p.element}"


def reads_of(
    tree: ast.FunctionDef, local_names: frozenset[str], closure: Closure, module_globals: Mapping[str, Any]
) -> Iterator[tuple[ast.AST, str, Read]]:
    """Each compile-time read of ``tree``: the node that makes it, the name as written and the read. Free names are
    looked up in the closure, then the globals, then the builtins (recorded as absent from the globals); attributes
    of modules reached so are reads of the module's dict (``cfg.SUB``). Decorators are not read at compile time,
    so they are skipped. An undefined name is not yielded (`resolve` reports it)."""
    decorators = {id(n) for d in tree.decorator_list for n in ast.walk(d)}
    found: dict[int, object] = {}  # id(node) -> the object a Name or module Attribute node denotes
    attributes: list[ast.Attribute] = []
    for node in ast.walk(tree):
        if id(node) in decorators:
            continue
        if isinstance(node, ast.Attribute):
            attributes.append(node)
        if not isinstance(node, ast.Name) or node.id in local_names:
            continue
        name = node.id  # each holder read once per node: the object recorded is the object the node denotes
        if (value := held(closure.cells[name], name) if name in closure.cells else MISSING) is not MISSING:
            found[id(node)] = value
            yield node, name, (closure.cells[name], name, value)
        elif (value := module_globals.get(name, MISSING)) is not MISSING:
            found[id(node)] = value
            yield node, name, (module_globals, name, value)
        elif hasattr(builtins, name):
            found[id(node)] = getattr(builtins, name)
            yield node, name, (module_globals, name, MISSING)
    # ast.walk is breadth-first, so a chain's inner attributes come later: resolve them inside-out.
    for node in reversed(attributes):
        base = found.get(id(node.value))
        if isinstance(base, types.ModuleType) and (value := vars(base).get(node.attr, MISSING)) is not MISSING:
            found[id(node)] = value
            yield node, f"{base.__name__}.{node.attr}", (vars(base), node.attr, value)


_ATTEMPTS = 16
"""How many times `captures` takes its snapshot again when another thread rebinds a global while it reads."""


def captures(fn: Callable[..., object]) -> Captures:
    """The compile-time reads of kernel ``fn`` and of every helper it reaches: one snapshot, in which every read of a
    holder's name found the same object (taken again while another thread's rebinding splits it), with the
    resolutions that made it (`Captures.resolutions`: a compile pinned to them reads nothing else).

    Raises
    ------
    CompileError
        When one of them is neither a value nor code (rule c), at the line that reads it, or the kernel does not
        parse or resolve (the message the compile would give), or when the globals kept changing while read.
    """
    from tile.compiler._parse import parse
    from tile.compiler._resolve import resolve
    from tile.compiler.lang._function import is_function

    root = parse(fn)
    for _ in range(_ATTEMPTS):
        reads: list[Read] = []
        resolved: dict[int, Any] = {}  # id(tree) -> its ResolvedKernel (which keeps the tree alive)
        todo = [root]
        while todo:
            tree = todo.pop()
            if id(tree) in resolved:
                continue
            found = resolved[id(tree)] = resolve(tree)
            reads.extend(found.reads)
            # The helpers its reads reach now (the parse's list of helpers is from the first parse: a global may move).
            todo.extend(parse(v) for _, _, v in found.reads if is_function(v))
        if _agree(reads):
            return Captures(tuple(reads), tuple(resolved.values()))
    raise CompileError(
        f"the compile-time globals of kernel '{root.name}' kept changing while they were read ({_ATTEMPTS} tries): "
        "another thread rebinds a global or closure variable the kernel or a helper reads. Rebind it before the "
        "call, or pass the value as a Const[...] parameter",
        root.loc(root.tree),
    )


def _agree(reads: list[Read]) -> bool:
    """Whether every read of one holder's name found the very same object (no rebinding between two of them)."""
    seen: dict[tuple[int, str], object] = {}
    return all(seen.setdefault((id(h), n), v) is v for h, n, v in reads)
