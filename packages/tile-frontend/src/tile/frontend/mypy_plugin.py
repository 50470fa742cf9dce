"""A mypy plugin that reads the kernel language's annotations, so ``mypy --strict`` checks kernels.

Enable it in the mypy configuration (``pyproject.toml``)::

    [tool.mypy]
    plugins = ["tile.frontend.mypy_plugin"]

A kernel parameter's annotation is a value of the kernel language, not a Python type: ``Tensor[f32, "B"]`` names a
dtype and a shape whose items are extents, ``-1`` or const-generic names. The plugin reads each such annotation as
the class in `tile.frontend.kernel_types` that describes the value inside the kernel:

=============================  =================================================
annotation                     type inside the kernel
=============================  =================================================
``Tensor[dtype, shape]``       `TensorParam` (``partition``, ``ptr``, ``shape``)
``Mut[Tensor[dtype, shape]]``  `MutParam` (``store``, ``load``, ``tiles``, ...)
``Const[int]`` (float, bool)   ``int`` (``float``, ``bool``)
``Ptr[dtype]``                 `Pointer`
a dtype (``a: f32``)           `Tile` (a 0-d tile)
=============================  =================================================

Inside kernel code a call of a kernel-language function (``tile.exp2(x, flush_to_zero=True)``, ``tile.truediv``,
``tile.mma``, ...) is checked against its row of the op catalog (``tile.compiler.lang.OPS``): a keyword the row does
not take (a misspelt ``flush_to_zero``) is an error, and the ops whose families always give one tile return `Tile`
(the others, such as ``tile.block_id`` or a multi-operand ``tile.reduce``, stay ``Any``). A method the kernel
language's table names only to refuse it (``x.subtiles(...)`` on an input, which owns no tile; ``z.gather(...)`` on an
output, which other blocks may be writing) is reported with the compiler's advice.

``Tensor`` with no arguments stays the host `tile.frontend.Tensor` class. A const generic that a kernel body uses by
name (``BM`` in ``x.partition((BM, BK))``) is declared for type checkers at module level, ``BM: int``: a declaration
without a value, so Python binds nothing and the compiler binds the name from the kernel's annotations as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from mypy.nodes import CallExpr, FuncItem, Import, ImportFrom, MemberExpr, MypyFile, NameExpr, TypeInfo
from mypy.plugin import AnalyzeTypeContext, MethodContext, Plugin
from mypy.types import AnyType, CallableType, Instance, Type, TypeOfAny

__all__ = ["TilePlugin", "plugin"]

_KERNEL_TYPES = "tile.frontend.kernel_types"
_LANG = "tile.compiler.lang"
_DTYPES: tuple[str, ...] = ("i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "tf32")
_DTYPES += ("f64", "f8e4m3fn", "f8e5m2", "bool_")
_ANNOTATIONS = f"{_LANG}._annotations"
_HOST_TENSOR = "tile.frontend._tensor.Tensor"


def _kernel_type(name: str) -> Callable[[AnalyzeTypeContext], Type]:
    def analyze(ctx: AnalyzeTypeContext) -> Type:
        return ctx.api.named_type(f"{_KERNEL_TYPES}.{name}", [])

    return analyze


def _tensor(ctx: AnalyzeTypeContext) -> Type:
    if not ctx.type.args:  # the host class, as an ordinary annotation
        return ctx.api.named_type(_HOST_TENSOR, [])
    return ctx.api.named_type(f"{_KERNEL_TYPES}.TensorParam", [])


def _const(ctx: AnalyzeTypeContext) -> Type:
    if len(ctx.type.args) != 1:
        ctx.api.fail("write Const[int], Const[float] or Const[bool]", ctx.context)
        return ctx.api.named_type("builtins.int", [])
    return ctx.api.analyze_type(ctx.type.args[0])


_HOOKS: dict[str, Callable[[AnalyzeTypeContext], Type]] = {
    _HOST_TENSOR: _tensor,
    f"{_ANNOTATIONS}.Tensor": _tensor,
    f"{_ANNOTATIONS}.Mut": _kernel_type("MutParam"),
    f"{_ANNOTATIONS}.Ptr": _kernel_type("Pointer"),
    f"{_ANNOTATIONS}.Const": _const,
    **{f"{_LANG}.{dtype}": _kernel_type("Tile") for dtype in _DTYPES},
}


def _in_kernel_code(ctx: MethodContext) -> bool:
    """Whether the call is in a function taking kernel values (a kernel or a helper), read from its signature."""
    scope = getattr(ctx.api, "scope", None)  # the TypeChecker behind the plugin interface
    # mypy 2 names it current_function; mypy 1 top_non_lambda_function.
    current = getattr(scope, "current_function", None) or getattr(scope, "top_non_lambda_function", None)
    function = current() if callable(current) else None
    signature = function.type if isinstance(function, FuncItem) else None
    if not isinstance(signature, CallableType):
        return False
    kernel_arg = [t for t in signature.arg_types if isinstance(t, Instance) and t.type.module_name == _KERNEL_TYPES]
    return bool(kernel_arg)


def _tile_type(ctx: MethodContext) -> Type:
    # The checker's own lookup walks from the top package, which `tile` (a namespace package) is not.
    modules = getattr(ctx.api, "modules", {})
    symbol = modules[_KERNEL_TYPES].names.get("Tile") if _KERNEL_TYPES in modules else None
    return (
        Instance(symbol.node, [])
        if symbol is not None and isinstance(symbol.node, TypeInfo)
        else AnyType(TypeOfAny.special_form)
    )


def _host_or_kernel_call(ctx: MethodContext) -> Type:
    """``tile.zeros/ones/full/arange``: a host `Tensor` from Python, a `Tile` inside kernel code."""
    return _tile_type(ctx) if _in_kernel_code(ctx) else ctx.default_return_type


# Op families (``LangOp.family``) whose result is always one tile. Left out: index arithmetic that kernels also use as
# plain ints (maximum/minimum, cdiv), the grid (a tuple), reduce/scan with a function (a tuple for several operands),
# and the statements (print, assert_, scatter).
_TILE_FAMILIES = frozenset(
    {"unary_float", "unary", "arith", "binary_float", "fma", "where", "clamp", "isnan", "bitcast", "astype"}
    | {"reshape", "broadcast_to", "expand_dims", "permute", "transpose", "cat", "extract", "reduce", "argreduce"}
    | {"scan", "mma", "matmul", "load_tile_like", "gather", "atomic", "atomic_cas"}
)


@functools.cache
def _catalog() -> Mapping[str, Any]:
    """The op catalog, imported at the first kernel-language call: the plugin itself needs no Tile package.

    Per-package type checks load the plugin by path in environments without tile-compiler; a kernel-language call
    can only appear where it is installed, and if it is not, calls go unchecked (``Any``) rather than failing mypy.
    """
    try:
        from tile.compiler.lang import OPS
    except ImportError:
        return {}
    return OPS


def _lang_call(ctx: MethodContext) -> Type:
    """``tile.<op>(...)`` in kernel code: unknown keywords are errors; tile-valued families return `Tile`."""
    call = ctx.context
    if not isinstance(call, CallExpr) or not _in_kernel_code(ctx):
        return ctx.default_return_type
    callee = call.callee
    if not isinstance(callee, (NameExpr, MemberExpr)):  # e.g. an op picked from a dict: nothing names it
        return ctx.default_return_type
    name = (callee.fullname or callee.name).rsplit(".", 1)[-1]
    op = _catalog().get(name)
    if op is None:  # a LangOp under another name: nothing to check it against
        return ctx.default_return_type
    takes = [p.name for p in op.params if not p.variadic]
    for keyword in (k for k in call.arg_names if k is not None):
        if keyword not in takes:
            ctx.api.fail(f"tile.{op.name}() takes no keyword argument '{keyword}'; it takes {', '.join(takes)}", call)
    return _tile_type(ctx) if op.family in _TILE_FAMILIES else ctx.default_return_type


def _refused(advice: str) -> Callable[[MethodContext], Type]:
    def report(ctx: MethodContext) -> Type:
        ctx.api.fail(advice, ctx.context)
        return ctx.default_return_type

    return report


# Calls the compiler refuses with a message of its own: reported by mypy with the same advice.
_REFUSED: dict[str, str] = {
    f"{_KERNEL_TYPES}.TensorParam.subtiles": (
        "an input owns no tile: subtiles() cuts the tile a block owns of a Mut output; read an input anywhere with "
        "x.partition(shape).load(index)"
    ),
    f"{_KERNEL_TYPES}.MutParam.gather": (
        "a Mut output cannot be gathered from: other blocks may be writing any element of it; outputs are read and "
        "written only through their own tiles (z.load(), z.store(t)); gather from an input tensor parameter"
    ),
}
_METHOD_HOOKS: dict[str, Callable[[MethodContext], Type]] = {
    "tile.frontend._create.HostOrKernelOp.__call__": _host_or_kernel_call,
    "tile.compiler.lang._ops.LangOp.__call__": _lang_call,
    **{name: _refused(advice) for name, advice in _REFUSED.items()},
}


class TilePlugin(Plugin):
    """Reads kernel-language annotations as `tile.frontend.kernel_types` classes (see the module docstring)."""

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        """The hook for a kernel-language annotation name, or None for any other name."""
        return _HOOKS.get(fullname)

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        """The hook making ``tile.zeros(...)`` and its kin a `Tile` inside kernel code, or reporting a refused call."""
        return _METHOD_HOOKS.get(fullname)

    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        """Load `tile.frontend.kernel_types` for the modules that use the kernel language (and only those)."""
        for node in file.imports:
            if isinstance(node, ImportFrom):
                names = [node.id, *(f"{node.id}.{name}" for name, _ in node.names)]
            elif isinstance(node, Import):
                names = [name for name, _ in node.ids]
            else:
                names = []
            if any(n.startswith(("tile.frontend", "tile.compiler.lang")) for n in names):
                return [(10, _KERNEL_TYPES, -1)]
        return []


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class (written against mypy 2.4; mypy 1 names one scope method differently)."""
    return TilePlugin
