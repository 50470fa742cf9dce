"""Expressions of the kernel subset: names, constants, operators, attributes, subscripts and calls.

Invariant: evaluation order is Python's (left to right), and an expression either yields an abstract value (see
`tile.compiler._typecheck_values`) or raises a CompileError at its own node.
"""

from __future__ import annotations

import ast
import builtins
import enum
import operator
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn, cast

from tile.compiler._diagnostics import CompileError, SourceLoc
from tile.compiler._fold_math import fold_math, math_function_name
from tile.compiler._guards import Bound
from tile.compiler._kir import Value
from tile.compiler._parse import KernelAST
from tile.compiler._resolve import ResolvedKernel
from tile.compiler._typecheck_arith import I1, I32, is_const, type_name
from tile.compiler._typecheck_gather import GatherMixin
from tile.compiler._typecheck_values import BoundMethod, PartitionV, SubtilesV, TensorV, TileIndex
from tile.compiler._types import DType, TileType
from tile.compiler.lang._function import is_function
from tile.compiler.lang._ops import METHODS, OPS, LangOp

__all__ = ["ExprMixin"]

_UNARY_FOLD: dict[type[ast.unaryop], Callable[[Any], object]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
    ast.Invert: operator.invert,
}
_FOLDABLE_BUILTINS: dict[str, Callable[..., object]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "bool": bool,
    "len": len,
}


def number_of(value: object) -> object:
    """A compile-time read as the kernel uses it: an ``IntEnum`` member (or one of an enum mixing in float) is the
    exact number it holds, in tuples too. Its class's methods (``__add__``, ``__lt__``, ``__bool__``, ``__floor__``...)
    would otherwise run in the folds and return anything, even the compiler's own values they were compared with."""
    if isinstance(value, enum.Enum) and isinstance(value, (int, float)):
        return int.__int__(value) if isinstance(value, int) else float.__float__(value)
    if type(value) is tuple:
        return tuple(number_of(v) for v in value)
    return value


class ExprMixin(GatherMixin):
    """Evaluates expressions to abstract values."""

    kernel: KernelAST
    resolved: ResolvedKernel
    node: ast.AST | None
    call_sites: tuple[SourceLoc, ...]

    def fail(self, message: str, node: ast.AST | None = None) -> NoReturn:
        where = node if node is not None else self.node
        loc = self.kernel.loc(where) if where is not None else None
        raise CompileError(message, loc, self.call_sites)

    def at(self, node: ast.AST) -> None:
        """Make ``node`` the current position (for diagnostics and op locations)."""
        self.node = node
        self.em.loc = self.kernel.loc(node)
        self.em.inlined_from = self.call_sites

    def expr(self, node: ast.expr) -> object:
        """Evaluate ``node``."""
        saved = self.node
        self.at(node)
        try:
            method = getattr(self, f"expr_{type(node).__name__.lower()}", None)
            if method is None:
                self.fail(f"{type(node).__name__} expressions are not supported in kernel code")
            return method(node)
        finally:
            if saved is not None:
                self.at(saved)

    def expr_constant(self, node: ast.Constant) -> object:
        if not isinstance(node.value, (bool, int, float, str, type(None))):
            self.fail(f"constant {node.value!r} is not supported in kernel code")
        return node.value

    def expr_name(self, node: ast.Name) -> object:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in self.resolved.locals:
            self.fail(
                f"variable '{node.id}' is used before it is assigned on this path (variables first assigned "
                "inside a loop or one branch of an 'if' are not visible after it)"
            )
        return number_of(self.resolved.names[node.id])

    def expr_tuple(self, node: ast.Tuple) -> object:
        return tuple(self.expr(e) for e in node.elts)

    expr_list = expr_tuple

    def expr_joinedstr(self, node: ast.JoinedStr) -> object:
        parts = [self.expr(v) for v in node.values]
        if not all(isinstance(p, str) or is_const(p) for p in parts):
            self.fail("f-strings may only contain compile-time values; use tile.print(...) to print tiles")
        return "".join(map(str, parts))

    def expr_formattedvalue(self, node: ast.FormattedValue) -> object:
        value = self.expr(node.value)
        if not is_const(value) and not isinstance(value, str):
            self.fail("f-strings may only contain compile-time values; use tile.print(...) to print tiles")
        spec = self.expr(node.format_spec) if node.format_spec else ""
        return format(value, str(spec))

    def expr_binop(self, node: ast.BinOp) -> object:
        return self.binary(node.op, self.expr(node.left), self.expr(node.right))

    def expr_unaryop(self, node: ast.UnaryOp) -> object:
        v = self.expr(node.operand)
        if is_const(v):
            return _UNARY_FOLD[type(node.op)](v)
        t = self.tile_of(v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            return self.op_unary(OPS["negative"], {"x": v})
        if isinstance(node.op, ast.Not) and t.elem != I1:
            self.fail("'not' needs a bool; compare explicitly (x != 0)")
        if not isinstance(t.elem, DType) or t.elem.is_float:
            self.fail("'~' needs an integer or bool tile")
        ones = self.materialize(
            -1 if t.elem.kind == "i" else (1 << t.elem.bits) - 1 if t.elem.kind == "u" else True, t.elem, t.shape
        )
        return self.em.one("xori", [cast(Value, v), ones], t)

    def expr_boolop(self, node: ast.BoolOp) -> object:
        values = [self.expr(v) for v in node.values]
        out = values[0]
        for v in values[1:]:
            if is_const(out) and is_const(v):
                out = (out and v) if isinstance(node.op, ast.And) else (out or v)
                continue
            a, b = (self._as_bool(x) for x in (out, v))
            out = self.em.one("andi" if isinstance(node.op, ast.And) else "ori", [a, b], self.tile_of(a))
        return out

    def _as_bool(self, v: object) -> Value:
        t = self.as_tile(v, I1 if is_const(v) else None, "condition")
        if self.tile_of(t).elem != I1 or self.tile_of(t).shape:
            self.fail(f"'and'/'or' need bool scalars, got {type_name(t)}")
        return t

    def expr_compare(self, node: ast.Compare) -> object:
        if len(node.ops) != 1:
            left = self.expr(node.left)
            rights = [self.expr(c) for c in node.comparators]
            if all(is_const(x) for x in (left, *rights)):
                result = True
                for op, r in zip(node.ops, rights, strict=False):
                    result = result and bool(self.compare(op, left, r))
                    left = r
                return result
            self.fail("chained comparisons of tiles are not supported; combine them with '&'")
        if isinstance(node.ops[0], (ast.Is, ast.IsNot)):
            a, b = self.expr(node.left), self.expr(node.comparators[0])
            return (a is b) if isinstance(node.ops[0], ast.Is) else (a is not b)
        a, b = self.expr(node.left), self.expr(node.comparators[0])
        if isinstance(node.ops[0], (ast.In, ast.NotIn)):
            return self._membership(node.ops[0], a, b)
        if _static(a) or _static(b):
            return self._compare_static(node.ops[0], a, b)
        return self.compare(node.ops[0], a, b)

    def _compare_static(self, op: ast.cmpop, a: object, b: object) -> bool:
        """``==``/``!=`` of compile-time objects (dtypes, strings, None): a compile-time bool."""
        if not isinstance(op, (ast.Eq, ast.NotEq)):
            self.fail(f"{type_name(a)} and {type_name(b)} can only be compared with '==' or '!=' (at compile time)")
        for v in (a, b):
            if not (_static(v) or is_const(v)):
                self.fail(
                    f"cannot compare {type_name(a)} with {type_name(b)}: a dtype, string or None compares only with "
                    "compile-time values (e.g. x.dtype == tile.f32)"
                )
        return (a == b) is isinstance(op, ast.Eq)

    def _membership(self, op: ast.cmpop, a: object, b: object) -> bool:
        """``a in (...)`` over compile-time values (``x.dtype in (tile.f16, tile.bf16)``): a compile-time bool."""
        items = b.coords if isinstance(b, TileIndex) else tuple(b) if type(b) is frozenset else b
        if not isinstance(items, tuple) or not all(_static(v) or is_const(v) for v in (a, *items)):
            self.fail(
                "'in' works on compile-time values only, e.g. x.dtype in (tile.f16, tile.bf16); "
                f"got {type_name(a)} in {type_name(b)}"
            )
        return (a in items) is isinstance(op, ast.In)

    def expr_ifexp(self, node: ast.IfExp) -> object:
        cond = self.expr(node.test)
        if is_const(cond) or cond is None:
            return self.expr(node.body if cond else node.orelse)
        return self.op_where(OPS["where"], {"cond": cond, "x": self.expr(node.body), "y": self.expr(node.orelse)})

    def expr_subscript(self, node: ast.Subscript) -> object:
        base = self.expr(node.value)
        index = self.expr(node.slice) if not isinstance(node.slice, ast.Slice) else None
        if isinstance(base, TileIndex):
            base = base.coords
        if isinstance(base, tuple):
            if isinstance(node.slice, ast.Slice):
                lo, hi, step = (
                    self.expr(x) if x is not None else None
                    for x in (node.slice.lower, node.slice.upper, node.slice.step)
                )
                return base[slice(cast(Any, lo), cast(Any, hi), cast(Any, step))]
            if type(index) is not int or not -len(base) <= index < len(base):
                got = f"a runtime {type_name(index)}" if isinstance(index, Value) else repr(index)
                self.fail(
                    f"tuple index must be a compile-time int in range(-{len(base)}, {len(base)}), got {got}; a tuple "
                    "of tensors is indexed by a constant or by the variable of `for g in range(len(t))`, which is "
                    "unrolled at compile time"
                )
            return base[index]
        if isinstance(base, Value):
            self.fail("tiles cannot be indexed; use tile.extract(x, index, shape) or a reduction")
        return self.fail(f"{type_name(base)} cannot be indexed")

    def expr_attribute(self, node: ast.Attribute) -> object:  # noqa: PLR0911  # one return per receiver kind
        base = self.expr(node.value)
        name = node.attr
        if isinstance(base, ModuleType) or (isinstance(base, type) and issubclass(base, enum.Enum)):
            return self._namespace_attr(base, name)
        if isinstance(base, Value) and isinstance(base.type, TileType):
            return self._tile_attr(base, base.type, name)
        if isinstance(base, TensorV):
            return self._tensor_attr(base, name)
        if is_const(base):
            return self.fail(
                f"a {type(base).__name__} constant has no attribute '{name}'; make it a tile first, "
                f"e.g. tile.full((), {base!r}, tile.f32)"
            )
        if isinstance(base, PartitionV):
            if name == "num_tiles":
                # Queried where the view is made, not in the loop at hand: guards comparing counts stay loop-invariant.
                counts = self.at_depth(
                    self.em.birth.get(base.view.id, 0),
                    lambda: self.em.emit("get_index_space_shape", [base.view], [TileType(I32)] * len(base.tile)),
                )
                for d, c in enumerate(counts):
                    self.host_values[c.id] = Bound("count", base.tensor.name, *base.tensor_dim(d))
                return tuple(counts)
            if name == "tile_shape":
                return base.tile
            return self._method(base, "partition", name)
        if isinstance(base, SubtilesV):
            if name == "num_tiles":
                return base.counts
            if name == "tile_shape":
                return base.tile
            return self._method(base, "subtiles", name)
        return self.fail(f"{type_name(base)} has no attribute '{name}' in kernel code")

    def _namespace_attr(self, base: ModuleType | type[enum.Enum], name: str) -> object:
        """``module.name`` (an op, a helper, a value), or ``Enum.MEMBER`` (a compile-time enum member)."""
        if isinstance(base, ModuleType):
            if not hasattr(base, name):
                self.fail(f"module '{base.__name__}' has no attribute '{name}'")
            return number_of(self.resolved.attribute(base, name))  # the object the compile's snapshot recorded
        if name not in base.__members__:
            self.fail(f"enum '{base.__name__}' has no member '{name}'")
        return number_of(base.__members__[name])

    def _tile_attr(self, v: Value, t: TileType, name: str) -> object:
        props = {"shape": t.shape, "ndim": t.rank, "dtype": t.elem}
        if name in props:
            return props[name]
        if name == "T":
            return self.op_permute(OPS["transpose"], {"x": v, "axes": None})
        return self._method(v, "tile", name)

    def _tensor_attr(self, t: TensorV, name: str) -> object:
        if name == "dtype":
            return t.dtype
        if name == "ndim":
            return t.rank
        if name == "shape":
            return t.tile if t.mut else t.extents
        if name == "extents":
            return t.extents
        return self._method(t, "mut" if t.mut else "tensor", name)

    def _method(self, recv: object, kind: str, name: str) -> BoundMethod:
        family = METHODS[kind].get(name)
        if family is None:
            what = {
                "tile": "a tile",
                "tensor": "a tensor",
                "partition": "a partition",
                "mut": "a Mut output",
                "subtiles": "z.subtiles(...)",
            }[kind]
            hint = "; only Mut outputs can be stored to" if name == "store" else ""
            if name == "store" and isinstance(recv, PartitionV) and recv.tensor.mut:
                hint = (
                    f"; a view of the output '{recv.tensor.name}' reads any tile but writes none, since another "
                    "block owns it: store this block's own tile with z.store(t), a chunk of it with "
                    "z.subtiles(shape).store(t, index), or a tile a `for idx in z.tiles()` walk hands this block "
                    "with z.store(t, at=idx)"
                )
            self.fail(f"{what} has no method '{name}'{hint}")
        return BoundMethod(recv, name, family)

    # -- calls ----------------------------------------------------------------------------------------------
    def expr_call(self, node: ast.Call) -> object:
        fn = self.expr(node.func)
        args: list[object] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.fail("star-arguments are not supported in kernel code", a)
            args.append(self.expr(a))
        kwargs: dict[str, object] = {}
        for k in node.keywords:
            if k.arg is None:
                self.fail("**kwargs are not supported in kernel code", k)
            kwargs[k.arg] = self.expr(k.value)
        self.at(node)
        return self.call(fn, args, kwargs)

    def call(self, fn: object, args: list[object], kwargs: dict[str, object]) -> object:  # noqa: PLR0911  # dispatch
        """Call a kernel-language function, method, helper, dtype or foldable builtin."""
        if isinstance(fn, LangOp):
            return self.call_op(fn, args, kwargs)
        if isinstance(fn, BoundMethod):
            if fn.family in OPS:
                return self.call_op(OPS[fn.family], [fn.receiver, *args], kwargs)
            return getattr(self, f"method_{fn.family}")(fn.receiver, args, kwargs)
        if is_function(fn):
            return self.call_helper(fn, args, kwargs)
        if isinstance(fn, DType):
            if len(args) != 1 or kwargs:
                self.fail(f"tile.{fn.name}(x) takes one value")
            return self.op_astype(OPS["astype"], {"x": args[0], "dtype": fn})
        if fn is builtins.print:
            self.fail("use tile.print(...) to print from a kernel")
        if fn is builtins.range:
            self.fail("range() is only supported as the iterable of a 'for' loop")
        for name, impl in _FOLDABLE_BUILTINS.items():
            if fn is getattr(builtins, name):
                if not all(is_const(a) or isinstance(a, tuple) for a in args) or kwargs:
                    hint = {
                        "min": "tile.minimum or tile.min",
                        "max": "tile.maximum or tile.max",
                        "abs": "tile.abs",
                        "int": ".astype(tile.i32)",
                        "float": ".astype(tile.f32)",
                    }.get(name, "a tile op")
                    self.fail(f"builtin {name}() only works on compile-time values here; use {hint}")
                return impl(*args)
        if (math_name := math_function_name(fn)) is not None:
            return fold_math(math_name, args, kwargs, self.fail)
        label = getattr(fn, "__qualname__", None) or type_name(fn)
        return self.fail(
            f"'{label}' cannot be called in kernel code: only tile.* functions, methods of tiles and tensors, "
            "and @tile.function helpers can"
        )

    def call_op(self, op: LangOp, args: list[object], kwargs: dict[str, object]) -> object:
        """Bind arguments to ``op``'s parameters and apply its family rule."""
        bound: dict[str, Any] = {}
        params = list(op.params)
        rest: list[object] = []
        for i, value in enumerate(args):
            if i < len(params) and params[i].variadic:
                rest = list(args[i:])
                break
            if i >= len(params):
                self.fail(f"tile.{op.name}() takes {len(params)} arguments but {len(args)} were given")
            bound[params[i].name] = value
        for k, value in kwargs.items():
            if k not in {p.name for p in params} or k in bound:
                why = "got multiple values for" if k in bound else "got an unexpected keyword argument"
                self.fail(f"tile.{op.name}() {why} '{k}'")
            bound[k] = value
        for p in params:
            if p.variadic:
                bound[p.name] = tuple(rest)
            elif p.name not in bound:
                if p.required:
                    self.fail(f"tile.{op.name}() is missing the argument '{p.name}'")
                bound[p.name] = p.default
        return getattr(self, f"op_{op.family}")(op, bound)

    def bind_simple(
        self,
        name: str,
        params: tuple[str, ...],
        defaults: tuple[object, ...],
        args: list[object],
        kw: dict[str, object],
    ) -> dict[str, object]:
        op = LangOp(name, "method", tuple(_param(p, params, defaults, i) for i, p in enumerate(params)))
        out: dict[str, object] = {}
        self._bind_into(op, args, kw, out)
        return out

    def _bind_into(self, op: LangOp, args: list[object], kw: dict[str, object], out: dict[str, object]) -> None:
        if len(args) > len(op.params):
            self.fail(f".{op.name}() takes {len(op.params)} arguments but {len(args)} were given")
        for p, v in zip(op.params, args, strict=False):
            out[p.name] = v
        for k, v in kw.items():
            if k not in {p.name for p in op.params} or k in out:
                self.fail(f".{op.name}() got an unexpected keyword argument '{k}'")
            out[k] = v
        for p in op.params:
            if p.name not in out:
                if p.required:
                    self.fail(f".{op.name}() is missing the argument '{p.name}'")
                out[p.name] = p.default


def _static(v: object) -> bool:
    """A compile-time object that compares with ``==`` at compile time: a dtype, a string, an enum member or None."""
    return isinstance(v, (DType, str, enum.Enum)) or v is None


def _param(name: str, params: tuple[str, ...], defaults: tuple[object, ...], i: int) -> Any:
    from tile.compiler.lang._ops import Param

    first_default = len(params) - len(defaults)
    return Param(name, defaults[i - first_default]) if i >= first_default else Param(name)
