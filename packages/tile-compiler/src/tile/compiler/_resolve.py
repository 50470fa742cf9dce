"""Stage ``resolve``: parameter annotations parsed into `ParamInfo`, free names bound, the Python subset checked.

Invariants: after this stage every parameter has a kind (tensor, mut, const, scalar, ptr, or tuple: a tuple of
tensors or of outputs, ``tuple[Tensor[...], ...]``); every name the body reads
is either a local (assigned somewhere in the function, Python's rule) or bound in ``names`` to the object found in
the closure, the module globals or the builtins at compile time, each such read (and each read of a module's
attribute) being a value or code, else refused (`tile.compiler._captures`); every statement and expression is in the
supported subset, so later stages only meet node types they handle. Errors point at the offending node. A cached
resolution is reused only while every read still finds the same object.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from types import MappingProxyType, ModuleType
from typing import Any, get_args, get_origin

from tile.compiler._captures import MISSING, Read, check_read, held, reads_of
from tile.compiler._diagnostics import CompileError
from tile.compiler._parse import KernelAST
from tile.compiler._types import DTYPES, DType
from tile.compiler.lang._annotations import ConstAnnotation, MutAnnotation, PtrAnnotation, TensorAnnotation

__all__ = ["ParamInfo", "ResolvedKernel", "annotations_of", "pinned", "resolve", "tuple_element"]

_SCALARS: Mapping[object, DType] = {int: DTYPES["i32"], float: DTYPES["f32"], bool: DTYPES["i1"]}

_ALLOWED = (
    ast.FunctionDef,
    ast.arguments,
    ast.arg,
    ast.Return,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.For,
    ast.While,
    ast.If,
    ast.Expr,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.IfExp,
    ast.Compare,
    ast.Call,
    ast.keyword,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Name,
    ast.Tuple,
    ast.List,
    ast.Slice,
    ast.Load,
    ast.Store,
    ast.boolop,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.expr_context,
    ast.JoinedStr,
    ast.FormattedValue,
)
_WHAT = {
    ast.Try: "try/except",
    ast.With: "with",
    ast.Lambda: "lambda",
    ast.ClassDef: "class definitions",
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.Await: "await",
    ast.Raise: "raise",
    ast.Delete: "del",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.Assert: "assert",
    ast.NamedExpr: "the walrus operator",
    ast.Starred: "star-unpacking",
}


@dataclass(frozen=True)
class ParamInfo:
    """A kernel parameter: its kind, dtype and declared shape (tensors) as written in the annotation."""

    name: str
    kind: str  # "tensor" | "mut" | "const" | "scalar" | "ptr" | "tuple"
    dtype: DType | None  # None for a dtype generic (see dtype_generic) and for Const/untyped parameters
    shape: tuple[int | str, ...] = ()
    const_kind: type | None = None
    node: ast.arg | None = None
    dtype_generic: str | None = None
    # A tuple parameter (``tuple[Tensor[...], ...]``): the kind of each element, "tensor" or "mut"; dtype and shape
    # are the elements'. Its length is a compile-time value of the specialization (``spec.const(name)``).
    element: str | None = None

    def elements(self, count: int) -> tuple[ParamInfo, ...]:
        """The element parameters ``name[0] .. name[count-1]`` of a tuple parameter (each a tensor or mut)."""
        assert self.element is not None, "only tuple parameters have elements"
        return tuple(replace(self, name=f"{self.name}[{i}]", kind=self.element, element=None) for i in range(count))


@dataclass(eq=False)
class ResolvedKernel:
    """A kernel (or helper) with parsed parameters and its free names bound."""

    kernel: KernelAST
    params: tuple[ParamInfo, ...]
    locals: frozenset[str]
    names: Mapping[str, Any]
    # Every compile-time read of a global, closure variable or module attribute (see `tile.compiler._captures`).
    reads: tuple[Read, ...] = ()
    # The module attributes read, by (id of the module's dict, name): the objects recorded in ``reads``.
    attributes: Mapping[tuple[int, str], Any] = field(default_factory=dict)

    def attribute(self, base: object, name: str, default: Any = MISSING) -> Any:
        """``base.name`` as this resolution read it (a module attribute it recorded), else read now (``default``
        where it has none; without one, AttributeError)."""
        if isinstance(base, ModuleType):
            found = self.attributes.get((id(vars(base)), name), MISSING)
            if found is not MISSING:
                return found
        return getattr(base, name) if default is MISSING else getattr(base, name, default)

    @property
    def name(self) -> str:
        """The function's name."""
        return self.kernel.name

    def dump(self) -> str:
        """Parameters and bound names as text (``TILE_DUMP=resolved``)."""
        lines = [f"kernel {self.name}"]
        lines += [f"  param {p.name}: {p.kind} {p.dtype!r} {p.shape}" for p in self.params]
        lines += [f"  name {n} -> {v!r}" for n, v in sorted(self.names.items())]
        return "\n".join(lines)


_CACHE: weakref.WeakKeyDictionary[KernelAST, ResolvedKernel] = weakref.WeakKeyDictionary()


def resolve(tree: KernelAST) -> ResolvedKernel:
    """Resolve parameters and names of a parsed kernel or helper.

    Raises
    ------
    CompileError
        For a construct outside the kernel subset, a missing or malformed annotation, or an undefined name.
    """
    pins = _PINNED.get()
    if pins is not None and (pin := pins.get(id(tree))) is not None and pin.kernel is tree:
        return pin  # a compile pinned to a snapshot: the very reads its key was made of
    if (hit := _CACHE.get(tree)) is not None and all(held(h, n) is v for h, n, v in hit.reads):
        out = hit
    else:  # (a global or closure variable it read since rebound: resolve again, with the new object)
        out = _CACHE[tree] = _resolve(tree)
    if pins is not None:
        pins[id(tree)] = out  # a tree the snapshot did not reach: this compile keeps the one resolution
    return out


def _resolve(tree: KernelAST) -> ResolvedKernel:
    _check_subset(tree)
    params = tuple(_param(tree, a, i) for i, a in enumerate(tree.tree.args.args))
    generics = {item for p in params for item in p.shape if isinstance(item, str)}
    generics |= {p.dtype_generic for p in params if p.dtype_generic}
    local_names = frozenset(_assigned(tree.tree)) | {p.name for p in params} | generics
    found = list(reads_of(tree.tree, local_names, tree.closure, tree.globals))  # each holder read once, here
    # The bound names and module attributes are the very objects the reads recorded (what the key is made of).
    names: dict[str, Any] = {}
    attributes: dict[tuple[int, str], Any] = {}
    for node, _, (holder, name, value) in found:
        if isinstance(node, ast.Name):
            names.setdefault(name, getattr(builtins, name) if value is MISSING else value)
        else:
            attributes.setdefault((id(holder), name), value)
    _check_defined(tree, local_names, names)
    for node, name, read in found:
        check_read(name, read[2], tree.loc(node))
    reads = tuple(read for _, _, read in found)
    return ResolvedKernel(tree, params, local_names, names, reads, attributes)


_PINNED: ContextVar[dict[int, ResolvedKernel] | None] = ContextVar("tile_pinned_resolutions", default=None)


@contextlib.contextmanager
def pinned(resolutions: Iterable[ResolvedKernel]) -> Iterator[None]:
    """Within the block (this thread or task), `resolve` returns these resolutions for their trees and keeps the first
    resolution of any other tree: a compile reads each global once, from the snapshot its key was made of."""
    token = _PINNED.set({id(r.kernel): r for r in resolutions})
    try:
        yield
    finally:
        _PINNED.reset(token)


def _check_subset(tree: KernelAST) -> None:
    fn = tree.tree
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise CompileError(
            "kernel parameters must be plain positional parameters (no *args, **kwargs or '/')",
            tree.loc(args.vararg or args.kwarg or fn),
        )
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, ast.FunctionDef):
            raise CompileError(
                "nested function definitions are not supported in kernels; define a "
                "@tile.function helper at module level",
                tree.loc(node),
            )
        if not isinstance(node, _ALLOWED):
            what = _WHAT.get(type(node), type(node).__name__)
            hint = "; use tile.assert_(cond, msg)" if isinstance(node, ast.Assert) else ""
            raise CompileError(f"{what} is not supported in kernel code{hint}", tree.loc(node))
        if (isinstance(node, ast.For) and node.orelse) or (isinstance(node, ast.While) and node.orelse):
            raise CompileError("'else' on a loop is not supported in kernel code", tree.loc(node))


_ANNOTATIONS: weakref.WeakKeyDictionary[Any, Mapping[str, Any]] = weakref.WeakKeyDictionary()
_ANNOTATIONS_LOCK = threading.Lock()


def annotations_of(fn: Callable[..., object]) -> Mapping[str, Any]:
    """The evaluated parameter annotations of ``fn`` (unwrapped), evaluated once per function object: every reader
    (tile.frontend's parameters at decoration, each compile) gets the very same ones. String annotations (``from
    __future__ import annotations``) are evaluated in the function's globals; evaluated again later, a global rebound
    since (``BM = 32``) would give the compiler another tile shape than the launcher partitions by.

    Raises
    ------
    Exception
        Whatever evaluating an annotation string raises (not remembered: the next call tries again).
    """
    fn = inspect.unwrap(fn)
    found = _ANNOTATIONS.get(fn)
    if found is None:
        evaluated = MappingProxyType(dict(inspect.get_annotations(fn, eval_str=True)))
        with _ANNOTATIONS_LOCK:  # two first readers racing: the first one's evaluation is everyone's
            found = _ANNOTATIONS.setdefault(fn, evaluated)
    return found


def _annotations(tree: KernelAST) -> Mapping[str, Any]:
    try:
        return annotations_of(tree.fn)
    except Exception as exc:  # any failure while evaluating a user's annotation string
        raise CompileError(f"cannot evaluate the annotations of '{tree.name}': {exc}", tree.loc(tree.tree)) from None


def _param(tree: KernelAST, arg: ast.arg, index: int) -> ParamInfo:
    ann = _annotations(tree).get(arg.arg, inspect.Parameter.empty)
    # A tile.frontend.kernel_types class (a helper's `px: PartitionView`) describes the value for type checkers only.
    if ann is inspect.Parameter.empty or getattr(ann, "__tile_kernel_type__", False) is True:
        return ParamInfo(arg.arg, "untyped", None, node=arg)
    if isinstance(ann, (TensorAnnotation, MutAnnotation)):
        return _tensor_param(arg, ann)
    if (element := tuple_element(ann)) is not None:
        inner = _tensor_param(arg, element)
        return replace(inner, kind="tuple", element=inner.kind)
    if get_origin(ann) in (tuple, list):
        raise CompileError(
            f"parameter '{arg.arg}' is a tuple of tensors: write tuple[Tensor[dtype, shape], ...] or "
            f"tuple[Mut[Tensor[dtype, tile_shape]], ...] (one element type, any length), got {ann!r}",
            tree.loc(arg.annotation or arg),
        )
    if isinstance(ann, ConstAnnotation):
        return ParamInfo(arg.arg, "const", None, const_kind=ann.kind, node=arg)
    if isinstance(ann, PtrAnnotation):
        return ParamInfo(arg.arg, "ptr", ann.dtype, node=arg)
    if isinstance(ann, DType) or ann in _SCALARS:
        return ParamInfo(arg.arg, "scalar", ann if isinstance(ann, DType) else _SCALARS[ann], node=arg)
    raise CompileError(
        f"parameter '{arg.arg}' has an unsupported annotation {ann!r}; use Tensor[dtype, shape], "
        "Mut[Tensor[dtype, tile_shape]], tuple[Tensor[dtype, shape], ...], Const[int], Ptr[dtype] or a scalar type "
        "(int, float, tile.f32)",
        tree.loc(arg.annotation or arg),
    )


def tuple_element(ann: object) -> TensorAnnotation | MutAnnotation | None:
    """The element annotation of ``tuple[Tensor[...], ...]`` / ``tuple[Mut[...], ...]``, else None."""
    args = get_args(ann)
    homogeneous = get_origin(ann) is tuple and len(args) == 2 and args[1] is Ellipsis
    return args[0] if homogeneous and isinstance(args[0], (TensorAnnotation, MutAnnotation)) else None


def _tensor_param(arg: ast.arg, ann: TensorAnnotation | MutAnnotation) -> ParamInfo:
    t = ann if isinstance(ann, TensorAnnotation) else ann.tensor
    kind = "tensor" if isinstance(ann, TensorAnnotation) else "mut"
    generic = t.dtype if isinstance(t.dtype, str) else None
    dtype = t.dtype if isinstance(t.dtype, DType) else None
    return ParamInfo(arg.arg, kind, dtype, t.shape, node=arg, dtype_generic=generic)


def _assigned(fn: ast.FunctionDef) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _check_defined(tree: KernelAST, local_names: frozenset[str], names: Mapping[str, Any]) -> None:
    """Refuse the first free name found nowhere (not in the closure, the module globals or the builtins)."""
    decorators = {id(n) for d in tree.tree.decorator_list for n in ast.walk(d)}  # not read at compile time
    for node in ast.walk(tree.tree):
        if id(node) in decorators:
            continue
        if isinstance(node, ast.Name) and node.id not in local_names and node.id not in names:
            raise CompileError(f"name '{node.id}' is not defined", tree.loc(node))
