"""tile.frontend: what users import (``import tile.frontend as tile``).

Host side: `Tensor` handles (``zeros/ones/full/empty/arange/linspace/eye/rand/randn``, ``from_numpy``,
``from_dlpack``; zero-copy views; tracked DLPack export), `Partition` (disjoint output
tiles), `Shared` (one read-only input for many launches in flight) and `Lent` (a tensor lent to another library
for writing). Handles are not copies: ``copy.copy`` and pickling raise `HandleCopyError`; ``copy.deepcopy`` copies
the values into new memory. Ownership (docs/architecture.md) is enforced at every launch: arguments move into the launch
and handed back by ``.sync()``/``await`` once the work is done; a partition needs exclusive memory; overlapping
arguments are found by address range. Misuse raises a typed error (`MovedError` and its `InFlightError`,
`BorrowError`, `AliasError`, `ArgumentError`, `GridError`, `FreedError`, `FrozenError`, `BackendError`,
`UntrackedExportError`; `InternalError` for a bug in Tile itself) before any memory is touched; the classes launches
trust cannot be subclassed (`FinalClassError`). `TileError` catches everything Tile raises here: those,
``CompileError`` and the toolchain's errors, CUDA errors, and `KernelFaultError` (what the CPU interpreter finds in a
running kernel: data races between blocks, failed ``assert_``, out-of-bounds accesses).

Names of the kernel language that shadow Python builtins (``print``, ``abs``, ``max``, ``min``, ``sum``, ``pow``)
are attributes (``tile.print``) but not in ``__all__``, so ``from tile.frontend import *`` leaves the builtins alone.

Graphs: ``launch.graph()`` captures a launch or a ``.then()`` chain; `graph_write` and `graph_read` copy host data
into the tensors a graph reads and out of those it writes between replays (ordered through ``graph.update``).

Kernels: ``@tile.entry`` (``unchecked=True`` opts out of the checks and allows raw pointers) and ``@tile.function``
helpers, written in the kernel language re-exported here from ``tile.compiler.lang`` (``Mut``, ``Const``, dtypes,
``tile.exp``, ``tile.sum``, ``tile.mma``, ``tile.block_id``, ...). A launcher call returns a ``tile.aio.DeviceOp``.
Kernels run on the GPU, or on the CPU through the Tile IR interpreter (``TILE_INTERPRET=1`` or
``tile.set_backend("cpu")``; chosen automatically, with a notice, when no GPU is visible).

Devices: creation takes ``device=`` (``"cpu"``, a GPU ordinal, ``"cuda:1"`` or ``tile.Device(1)``), ``tensor.to(d)``
copies to another device (a peer copy between GPUs), and a launch runs on its arguments' device (arguments on two
devices are a `DeviceMismatchError`). ``tile.distributed`` (loaded on first use; needs torch) runs NCCL or gloo
collectives on tensors through ``torch.distributed``, as ``tile.aio`` ops under the same ownership rules.
"""

from __future__ import annotations

from tile.compiler import ByArch, CompileError, by_arch
from tile.compiler import lang as _lang
from tile.compiler.lang import (
    METHODS,
    OPS,
    Const,
    ConstAnnotation,
    DType,
    KernelOnlyError,
    LangOp,
    Mut,
    MutAnnotation,
    Param,
    Ptr,
    PtrAnnotation,
    TensorAnnotation,
    add,
    argmax,
    argmin,
    assert_,
    astype,
    atan2,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_xchg,
    atomic_xor,
    bf16,
    bitcast,
    block_id,
    bool_,
    broadcast_to,
    cat,
    cdiv,
    ceil,
    clamp,
    cos,
    cosh,
    cumprod,
    cumsum,
    exp,
    exp2,
    expand_dims,
    extract,
    f8e4m3fn,
    f8e5m2,
    f16,
    f32,
    f64,
    floor,
    fma,
    function,
    gather,
    i1,
    i8,
    i16,
    i32,
    i64,
    is_function,
    isnan,
    launch_dependents,
    load_tile_like,
    log,
    log2,
    matmul,
    maximum,
    minimum,
    mma,
    mul,
    negative,
    num_blocks,
    permute,
    printf,
    prod,
    reduce,
    reshape,
    rsqrt,
    scan,
    scatter,
    sin,
    sinh,
    sqrt,
    static_assert,
    sub,
    tan,
    tanh,
    tf32,
    transpose,
    truediv,
    u8,
    u16,
    u32,
    u64,
    where,
)
from tile.core import Device, HandleCopyError
from tile.frontend._backend import backend, gpu_available, set_backend
from tile.frontend._create import (
    HostOrKernelOp,
    arange,
    empty,
    eye,
    from_dlpack,
    from_numpy,
    full,
    linspace,
    manual_seed,
    ones,
    rand,
    randn,
    zeros,
)
from tile.frontend._dtypes import as_dtype, numpy_dtype
from tile.frontend._entry import Kernel, entry
from tile.frontend._errors import (
    AliasError,
    ArgumentError,
    BackendError,
    BorrowError,
    DeviceMismatchError,
    FinalClassError,
    FreedError,
    FrozenError,
    GridError,
    HostMemoryError,
    InFlightError,
    InternalError,
    KernelFaultError,
    MovedError,
    OwnershipError,
    TileError,
    UntrackedExportError,
)
from tile.frontend._graphio import graph_read, graph_write
from tile.frontend._launch import Launch
from tile.frontend._lend import Lent
from tile.frontend._partition import Partition, partitioned
from tile.frontend._shared import Shared
from tile.frontend._tensor import Tensor

# Kernel-language names that shadow Python builtins: attributes (``tile.print``) kept out of ``__all__``.
abs = _lang.abs
max = _lang.max
min = _lang.min
pow = _lang.pow
print = _lang.print
sum = _lang.sum

__all__ = [
    "METHODS",
    "OPS",
    "AliasError",
    "ArgumentError",
    "BackendError",
    "BorrowError",
    "ByArch",
    "CompileError",
    "Const",
    "ConstAnnotation",
    "DType",
    "Device",
    "DeviceMismatchError",
    "FinalClassError",
    "FreedError",
    "FrozenError",
    "GridError",
    "HandleCopyError",
    "HostMemoryError",
    "HostOrKernelOp",
    "InFlightError",
    "InternalError",
    "Kernel",
    "KernelFaultError",
    "KernelOnlyError",
    "LangOp",
    "Launch",
    "Lent",
    "MovedError",
    "Mut",
    "MutAnnotation",
    "OwnershipError",
    "Param",
    "Partition",
    "Ptr",
    "PtrAnnotation",
    "Shared",
    "Tensor",
    "TensorAnnotation",
    "TileError",
    "UntrackedExportError",
    "add",
    "arange",
    "argmax",
    "argmin",
    "as_dtype",
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
    "backend",
    "bf16",
    "bitcast",
    "block_id",
    "bool_",
    "broadcast_to",
    "by_arch",
    "cat",
    "cdiv",
    "ceil",
    "clamp",
    "cos",
    "cosh",
    "cumprod",
    "cumsum",
    "empty",
    "entry",
    "exp",
    "exp2",
    "expand_dims",
    "extract",
    "eye",
    "f8e4m3fn",
    "f8e5m2",
    "f16",
    "f32",
    "f64",
    "floor",
    "fma",
    "from_dlpack",
    "from_numpy",
    "full",
    "function",
    "gather",
    "gpu_available",
    "graph_read",
    "graph_write",
    "i1",
    "i8",
    "i16",
    "i32",
    "i64",
    "is_function",
    "isnan",
    "launch_dependents",
    "linspace",
    "load_tile_like",
    "log",
    "log2",
    "manual_seed",
    "matmul",
    "maximum",
    "minimum",
    "mma",
    "mul",
    "negative",
    "num_blocks",
    "numpy_dtype",
    "ones",
    "partitioned",
    "permute",
    "printf",
    "prod",
    "rand",
    "randn",
    "reduce",
    "reshape",
    "rsqrt",
    "scan",
    "scatter",
    "set_backend",
    "sin",
    "sinh",
    "sqrt",
    "static_assert",
    "sub",
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


def __getattr__(name: str) -> object:
    """``tile.distributed`` is imported on first use: it needs torch, which nothing else here does."""
    if name == "distributed":
        import importlib

        return importlib.import_module("tile.frontend.distributed")
    raise AttributeError(f"module 'tile.frontend' has no attribute {name!r}")
