"""The kernel language: the names users call inside ``@tile.entry`` kernels and ``@tile.function`` helpers.

``tile.frontend`` re-exports everything listed in ``__all__``. Dtypes are `DType` values; ``bool_`` is ``i1``.
Every function here is a `LangOp` row of `OPS` (see ``_ops.py``); calling one outside a kernel raises ``TypeError``.
"""

from __future__ import annotations

from tile.compiler._types import DTYPES, DType
from tile.compiler.lang._annotations import (
    Const,
    ConstAnnotation,
    Mut,
    MutAnnotation,
    Ptr,
    PtrAnnotation,
    Tensor,
    TensorAnnotation,
)
from tile.compiler.lang._function import function, is_function
from tile.compiler.lang._ops import METHODS, OPS, KernelOnlyError, LangOp, Param

i1: DType = DTYPES["i1"]
i8: DType = DTYPES["i8"]
i16: DType = DTYPES["i16"]
i32: DType = DTYPES["i32"]
i64: DType = DTYPES["i64"]
u8: DType = DTYPES["u8"]
u16: DType = DTYPES["u16"]
u32: DType = DTYPES["u32"]
u64: DType = DTYPES["u64"]
f16: DType = DTYPES["f16"]
bf16: DType = DTYPES["bf16"]
f32: DType = DTYPES["f32"]
tf32: DType = DTYPES["tf32"]
f64: DType = DTYPES["f64"]
f8e4m3fn: DType = DTYPES["f8e4m3fn"]
f8e5m2: DType = DTYPES["f8e5m2"]
bool_: DType = DTYPES["i1"]

exp: LangOp = OPS["exp"]
exp2: LangOp = OPS["exp2"]
log: LangOp = OPS["log"]
log2: LangOp = OPS["log2"]
sqrt: LangOp = OPS["sqrt"]
rsqrt: LangOp = OPS["rsqrt"]
sin: LangOp = OPS["sin"]
cos: LangOp = OPS["cos"]
tan: LangOp = OPS["tan"]
sinh: LangOp = OPS["sinh"]
cosh: LangOp = OPS["cosh"]
tanh: LangOp = OPS["tanh"]
floor: LangOp = OPS["floor"]
ceil: LangOp = OPS["ceil"]
abs: LangOp = OPS["abs"]
negative: LangOp = OPS["negative"]
maximum: LangOp = OPS["maximum"]
add: LangOp = OPS["add"]
sub: LangOp = OPS["sub"]
mul: LangOp = OPS["mul"]
truediv: LangOp = OPS["truediv"]
minimum: LangOp = OPS["minimum"]
pow: LangOp = OPS["pow"]
atan2: LangOp = OPS["atan2"]
fma: LangOp = OPS["fma"]
where: LangOp = OPS["where"]
clamp: LangOp = OPS["clamp"]
isnan: LangOp = OPS["isnan"]
bitcast: LangOp = OPS["bitcast"]
astype: LangOp = OPS["astype"]
full: LangOp = OPS["full"]
zeros: LangOp = OPS["zeros"]
ones: LangOp = OPS["ones"]
arange: LangOp = OPS["arange"]
reshape: LangOp = OPS["reshape"]
broadcast_to: LangOp = OPS["broadcast_to"]
expand_dims: LangOp = OPS["expand_dims"]
permute: LangOp = OPS["permute"]
transpose: LangOp = OPS["transpose"]
cat: LangOp = OPS["cat"]
extract: LangOp = OPS["extract"]
sum: LangOp = OPS["sum"]
prod: LangOp = OPS["prod"]
max: LangOp = OPS["max"]
min: LangOp = OPS["min"]
argmax: LangOp = OPS["argmax"]
argmin: LangOp = OPS["argmin"]
reduce: LangOp = OPS["reduce"]
cumsum: LangOp = OPS["cumsum"]
cumprod: LangOp = OPS["cumprod"]
scan: LangOp = OPS["scan"]
mma: LangOp = OPS["mma"]
matmul: LangOp = OPS["matmul"]
load_tile_like: LangOp = OPS["load_tile_like"]
block_id: LangOp = OPS["block_id"]
num_blocks: LangOp = OPS["num_blocks"]
cdiv: LangOp = OPS["cdiv"]
gather: LangOp = OPS["gather"]
scatter: LangOp = OPS["scatter"]
atomic_add: LangOp = OPS["atomic_add"]
atomic_min: LangOp = OPS["atomic_min"]
atomic_max: LangOp = OPS["atomic_max"]
atomic_xchg: LangOp = OPS["atomic_xchg"]
atomic_and: LangOp = OPS["atomic_and"]
atomic_or: LangOp = OPS["atomic_or"]
atomic_xor: LangOp = OPS["atomic_xor"]
atomic_cas: LangOp = OPS["atomic_cas"]
print: LangOp = OPS["print"]
printf: LangOp = OPS["printf"]
assert_: LangOp = OPS["assert_"]
static_assert: LangOp = OPS["static_assert"]
launch_dependents: LangOp = OPS["launch_dependents"]

__all__ = [
    "METHODS",
    "OPS",
    "Const",
    "ConstAnnotation",
    "DType",
    "KernelOnlyError",
    "LangOp",
    "Mut",
    "MutAnnotation",
    "Param",
    "Ptr",
    "PtrAnnotation",
    "Tensor",
    "TensorAnnotation",
    "abs",
    "add",
    "arange",
    "argmax",
    "argmin",
    "assert_",
    "astype",
    "atan2",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_xchg",
    "atomic_xor",
    "bf16",
    "bitcast",
    "block_id",
    "bool_",
    "broadcast_to",
    "cat",
    "cdiv",
    "ceil",
    "clamp",
    "cos",
    "cosh",
    "cumprod",
    "cumsum",
    "exp",
    "exp2",
    "expand_dims",
    "extract",
    "f8e4m3fn",
    "f8e5m2",
    "f16",
    "f32",
    "f64",
    "floor",
    "fma",
    "full",
    "function",
    "gather",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "is_function",
    "isnan",
    "launch_dependents",
    "load_tile_like",
    "log",
    "log2",
    "matmul",
    "max",
    "maximum",
    "min",
    "minimum",
    "mma",
    "mul",
    "negative",
    "num_blocks",
    "ones",
    "permute",
    "pow",
    "print",
    "printf",
    "prod",
    "reduce",
    "reshape",
    "rsqrt",
    "scan",
    "scatter",
    "sin",
    "sinh",
    "sqrt",
    "static_assert",
    "sub",
    "sum",
    "tan",
    "tanh",
    "tf32",
    "transpose",
    "truediv",
    "u8",
    "u16",
    "u32",
    "u64",
    "where",
    "zeros",
]

if set(OPS) != {n for n in __all__ if isinstance(globals()[n], LangOp)}:
    raise ImportError("tile.compiler.lang: every OPS row must be exported by name")  # catalog drift guard
