"""The catalog of kernel-language functions: one declarative row per op, read by the type checker and lowering.

Invariants: every name a user calls as ``tile.<name>(...)`` inside a kernel is a `LangOp` from `OPS`; a row gives
the Python parameter list (with defaults), the op family (which selects the checker/lowering rule) and the Tile IR
op names it lowers to (float spelling first, integer spelling second where they differ). Calling a `LangOp` from
ordinary Python raises `KernelOnlyError` (a ``TypeError``): these are kernel-only, except the rows in `_HOST`
(``tile.cdiv``), which compute the same thing on Python ints, since a launch's grid is computed with them.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tile.compiler._errors import TileError

__all__ = ["METHODS", "OPS", "KernelOnlyError", "LangOp", "Param"]


class KernelOnlyError(TileError, TypeError):
    """A kernel-language function called from ordinary Python (outside ``@tile.entry`` / ``@tile.function``)."""


_REQUIRED: Any = object()


@dataclass(frozen=True)
class Param:
    """One Python parameter of a kernel-language function; ``default`` is `_REQUIRED` when it has none."""

    name: str
    default: Any = _REQUIRED
    variadic: bool = False

    @property
    def required(self) -> bool:
        """True when the caller must pass it."""
        return self.default is _REQUIRED and not self.variadic


@dataclass(frozen=True)
class LangOp:
    """A kernel-language function: ``tile.exp``, ``tile.sum``, ``tile.mma``, ...

    Attributes
    ----------
    name
        The user-facing name (``tile.<name>``).
    family
        The rule family the compiler applies (``"unary_float"``, ``"reduce"``, ...).
    params
        The Python parameter list.
    ir
        Tile IR op names: for numeric families ``(float_op, int_op)``; ``""`` where a kind is not supported.
    doc
        One line for the docs table.
    """

    name: str
    family: str
    params: tuple[Param, ...]
    ir: tuple[str, ...] = ()
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __call__(self, *args: object, **kwargs: object) -> Any:
        host = _HOST.get(self.name)
        if host is not None:
            return host(self.name, *args, **kwargs)
        raise KernelOnlyError(
            f"tile.{self.name}() can only be called inside a @tile.entry kernel or a @tile.function helper"
        )

    def __repr__(self) -> str:
        return f"<tile.{self.name}>"


def _p(spec: str) -> tuple[Param, ...]:
    """Parse ``"x, axis=None, *args"`` into Params (defaults are Python literals)."""
    out: list[Param] = []
    for raw in filter(None, (s.strip() for s in spec.split(","))):
        if raw.startswith("*"):
            out.append(Param(raw[1:], variadic=True))
        elif "=" in raw:
            name, default = raw.split("=")
            out.append(Param(name, eval(default, {})))  # literals from the table above only
        else:
            out.append(Param(raw))
    return tuple(out)


_UNARY_FLOAT = (
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "sinh",
    "cosh",
    "tanh",
    "floor",
    "ceil",
)
# Float math takes Tile IR's modes where its op has them (see tile.compiler._math_modes; others refuse them).
_MODES1 = "x, rounding=None, flush_to_zero=None"
_MODES2 = "x, y, rounding=None, flush_to_zero=None"
_LIKE = "x, z, latency=None, allow_tma=None"
_ROWS: list[tuple[str, str, str, tuple[str, ...], str]] = [
    *((n, "unary_float", _MODES1, (n, ""), f"elementwise {n} of a float tile") for n in _UNARY_FLOAT),
    ("abs", "unary", "x", ("absf", "absi"), "elementwise absolute value"),
    ("negative", "unary", "x", ("negf", "negi"), "elementwise negation"),
    *(
        (
            n,
            "binary",
            "x, y, flush_to_zero=None, propagate_nan=None",
            ir,
            f"elementwise {n} (broadcasting); of floats, a NaN operand gives the other one unless propagate_nan=True",
        )
        for n, ir in (("maximum", ("maxf", "maxi")), ("minimum", ("minf", "mini")))
    ),
    ("add", "arith", _MODES2, ("addf", "addi"), "x + y, with a rounding mode or flush-to-zero for floats"),
    ("sub", "arith", _MODES2, ("subf", "subi"), "x - y, with a rounding mode or flush-to-zero for floats"),
    ("mul", "arith", _MODES2, ("mulf", "muli"), "x * y, with a rounding mode or flush-to-zero for floats"),
    ("truediv", "arith", _MODES2, ("divf", ""), "x / y of float tiles, with a rounding mode (approx) or flush-to-zero"),
    ("pow", "binary_float", "x, y", ("pow", ""), "elementwise x ** y of float tiles"),
    ("atan2", "binary_float", "x, y", ("atan2", ""), "elementwise atan2(x, y)"),
    ("fma", "fma", "x, y, z, rounding=None, flush_to_zero=None", ("fma", ""), "fused x * y + z of float tiles"),
    ("where", "where", "cond, x, y", ("select",), "pick x where cond is true, else y (broadcasting)"),
    ("clamp", "clamp", "x, lo, hi", ("maxf", "maxi"), "minimum(maximum(x, lo), hi)"),
    ("isnan", "isnan", "x", ("cmpf",), "true where x is NaN"),
    ("bitcast", "bitcast", "x, dtype", ("bitcast",), "reinterpret the bits as dtype (same width)"),
    ("astype", "astype", "x, dtype", (), "convert a tile's elements to dtype"),
    ("full", "full", "shape, value, dtype=None", ("constant",), "a tile filled with value"),
    ("zeros", "full", "shape, dtype=None", ("constant",), "a tile of zeros"),
    ("ones", "full", "shape, dtype=None", ("constant",), "a tile of ones"),
    ("arange", "arange", "n, dtype=None", ("iota",), "the tile [0, 1, ..., n-1] (n a power of two)"),
    ("reshape", "reshape", "x, shape", ("reshape",), "same elements, new shape"),
    ("broadcast_to", "broadcast_to", "x, shape", ("broadcast",), "stretch size-1 dims to shape"),
    ("expand_dims", "expand_dims", "x, axis", ("reshape",), "insert a size-1 dim at axis"),
    ("permute", "permute", "x, axes", ("permute",), "reorder dims"),
    ("transpose", "transpose", "x, axes=None", ("permute",), "reverse dims (or reorder by axes)"),
    (
        "cat",
        "cat",
        "x, y=None, axis=None",
        ("cat",),
        "concatenate two tiles along axis: (x, y, axis) or ((x, y), axis)",
    ),
    (
        "extract",
        "extract",
        "x, index, shape",
        ("extract",),
        "the sub-tile of shape at tile index (outside the tile: compile error or trap)",
    ),
    ("sum", "reduce", "x, axis=None, keepdims=False", ("addf", "addi"), "sum along axis"),
    ("prod", "reduce", "x, axis=None, keepdims=False", ("mulf", "muli"), "product along axis"),
    *(
        (
            n,
            "reduce",
            "x, axis=None, keepdims=False, propagate_nan=None",
            ir,
            f"{what} along axis; NaNs skipped unless propagate_nan=True",
        )
        for n, ir, what in (("max", ("maxf", "maxi"), "maximum"), ("min", ("minf", "mini"), "minimum"))
    ),
    ("argmax", "argreduce", "x, axis=None, keepdims=False", ("gt",), "index of the maximum along axis"),
    ("argmin", "argreduce", "x, axis=None, keepdims=False", ("lt",), "index of the minimum along axis"),
    ("reduce", "reduce_fn", "x, axis, fn, identity, keepdims=False", ("reduce",), "reduce with a combiner"),
    ("cumsum", "scan", "x, axis=0, reverse=False", ("addf", "addi"), "inclusive prefix sum along axis"),
    ("cumprod", "scan", "x, axis=0, reverse=False", ("mulf", "muli"), "inclusive prefix product along axis"),
    ("scan", "scan_fn", "x, axis, fn, identity, reverse=False", ("scan",), "inclusive scan with a combiner"),
    ("mma", "mma", "a, b, acc", ("mmaf", "mmai"), "acc + a @ b (matrix multiply-accumulate)"),
    ("matmul", "matmul", "a, b", ("mmaf", "mmai"), "a @ b with the default accumulator dtype"),
    ("load_tile_like", "load_tile_like", _LIKE, ("load_view_tko",), "the tile of x at z's block position"),
    ("block_id", "grid", "", ("get_tile_block_id",), "this block's (x, y, z) position in the grid"),
    ("num_blocks", "grid", "", ("get_num_tile_blocks",), "the grid's (x, y, z) size"),
    ("cdiv", "cdiv", "a, b", (), "ceil(a / b) for ints; also on the host, on Python ints, to size a grid"),
    ("gather", "gather", "ptrs, mask=None, padding=0", ("load_ptr_tko",), "load through a pointer tile (unchecked)"),
    ("scatter", "scatter", "ptrs, value, mask=None", ("store_ptr_tko",), "store through a pointer tile (unchecked)"),
    *(
        (f"atomic_{m}", "atomic", "ptrs, value, mask=None", (m,), f"atomic {m} through a pointer tile (unchecked)")
        for m in ("add", "min", "max", "xchg", "and", "or", "xor")
    ),
    ("atomic_cas", "atomic_cas", "ptrs, expected, value, mask=None", ("atomic_cas_tko",), "atomic compare-and-swap"),
    ("print", "print", "*args, sep=' ', end='\\n'", ("print_tko",), "print from the device (printf-style values)"),
    ("printf", "printf", "fmt, *args", ("print_tko",), "printf from the device with a C format string"),
    ("assert_", "assert", "cond, msg=''", ("assert",), "trap when any element of cond is false"),
    ("static_assert", "static_assert", "cond, msg=''", (), "fail compilation when the constant cond is false"),
    (
        "launch_dependents",
        "launch_dependents",
        "",
        ("gdc_launch_dependents_tko",),
        "let a kernel launched after this one with PDL start now (a scheduling hint; no ordering)",
    ),
]


def _host_cdiv(name: str, a: object, b: object) -> int:
    """``tile.cdiv(a, b)`` on the host: ceil(a / b) of two Python ints (a grid size), as the kernel computes it."""
    ints: list[int] = []
    for v in (a, b):
        try:
            if isinstance(v, bool):
                raise TypeError
            ints.append(operator.index(v))  # type: ignore[arg-type]  # int, numpy ints: anything with __index__
        except TypeError:
            raise KernelOnlyError(
                f"tile.{name}() outside a kernel takes ints (to size a grid), got {type(v).__name__}"
            ) from None
    if ints[1] == 0:
        raise ZeroDivisionError(f"tile.{name}({ints[0]}, 0): division by zero")
    return -(-ints[0] // ints[1])


# Ops that also have a host meaning on plain Python values (ports of cuTile code size grids with ct.cdiv).
_HOST: Mapping[str, Any] = MappingProxyType({"cdiv": _host_cdiv})

OPS: Mapping[str, LangOp] = MappingProxyType({n: LangOp(n, fam, _p(ps), ir, doc) for n, fam, ps, ir, doc in _ROWS})

# Methods, by the receiver kind; the value is the row in OPS (or a family of its own) that implements them.
METHODS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "tile": MappingProxyType(
            {
                n: n
                for n in (
                    "astype",
                    "reshape",
                    "broadcast_to",
                    "expand_dims",
                    "permute",
                    "transpose",
                    "sum",
                    "prod",
                    "max",
                    "min",
                    "argmax",
                    "argmin",
                    "cumsum",
                    "cumprod",
                    "extract",
                )
            }
        ),
        "tensor": MappingProxyType(
            {"partition": "partition", "ptr": "ptr", "subtiles": "tensor_subtiles", "gather": "tensor_gather"}
        ),
        "partition": MappingProxyType({"load": "partition_load"}),
        "mut": MappingProxyType(
            {
                "store": "mut_store",
                "load": "mut_load",
                "tiles": "mut_tiles",
                "partition": "partition",
                "ptr": "ptr",
                "subtiles": "mut_subtiles",
                "gather": "mut_gather",
            }
        ),
        "subtiles": MappingProxyType({"load": "subtiles_load", "store": "subtiles_store"}),
    }
)
