"""The hand-written prose of the language reference: one section per group of op families, what each family takes
(dtypes) and means, the methods that are not `OPS` rows, and the ``@tile.entry`` options.

Everything a table in ``tile.compiler`` already says (names, parameters, Tile IR op names, one-line docs, which op
takes which math mode) is read from there by `lang_reference.render`; only what no table holds is written here.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ENTRY_OPTIONS",
    "FAMILY_DTYPES",
    "FAMILY_IR",
    "IR_NOTES",
    "METHOD_DOCS",
    "RECEIVERS",
    "SECTIONS",
    "MethodDoc",
    "Section",
]


@dataclass(frozen=True)
class Section:
    """A group of op families on the page: its key (methods name it), title and prose (dtypes, semantics)."""

    key: str
    title: str
    families: tuple[str, ...]
    intro: str


TYPING = "../compiler/typing-rules.md"

SECTIONS: tuple[Section, ...] = (
    Section(
        "elementwise-math",
        "Elementwise math",
        ("unary_float", "unary", "binary", "binary_float"),
        "Each op applies to every element of a tile (a scalar is a rank-0 tile). Two-operand ops promote and "
        f"broadcast like the operators ([promotion]({TYPING}#promotion-binary-operators-tilemaximumminimumwherefmapow-"
        f"comparisons), [broadcasting]({TYPING}#broadcasting)); a Python number takes the tile's dtype. Transcendental "
        "functions take float tiles only (convert an int tile with `.astype(tile.f32)` first); `abs`, `negative`, "
        "`maximum` and `minimum` take ints too (the second Tile IR name). Where the Tile IR op has `rounding_mode` "
        "or `flush_to_zero`, the call takes `rounding=` / `flush_to_zero=` ([modes](#math-modes)).",
    ),
    Section(
        "arithmetic-with-modes",
        "Arithmetic with modes",
        ("arith", "fma"),
        "`tile.add/sub/mul/truediv(x, y)` are `x + y`, `x - y`, `x * y`, `x / y` with a chosen rounding or "
        "flush-to-zero; without modes, write the operator. Ints wrap (`addi subi muli`); `truediv` refuses ints "
        '(use `//`). The modes are f32-only where Tile IR says so (`flush_to_zero`, `"approx"`, `"full"`); the '
        "IEEE directed roundings work on every float dtype. All operators are listed in "
        f"[the typing rules]({TYPING}#operators).",
    ),
    Section(
        "comparisons-and-selection",
        "Comparisons and selection",
        ("where", "clamp", "isnan"),
        "Comparisons are the operators `== != < <= > >=` (`cmpf`, ordered except `!=`; `cmpi`, signed or unsigned "
        "by the dtype) and give `i1` (bool) tiles; combine them with `& | ~`, not `and`/`or`. `tile.where` picks "
        "elementwise and broadcasts its three operands; `x` and `y` promote like a binary op.",
    ),
    Section(
        "conversions-and-constructors",
        "Conversions and constructors",
        ("astype", "bitcast", "full", "arange"),
        f"`x.astype(dt)` (also `tile.f32(x)`) converts values: `ftof`, `ftoi` (toward zero), `itof`, `exti`, "
        f"`trunci`, or `x != 0` for bool ([conversions]({TYPING}#conversions-xastypedt-tilef32x)). `tile.bitcast` "
        "keeps the bits. Constructors take a compile-time shape (every dim a power of two) and fill a tile "
        "with a value. With `dtype=None`, `zeros`/`ones` give `f32`, `full` the value's dtype (a constant's: "
        "`i32`, `f32` or `i1`; a run-time scalar's own) and `arange` `i32`; a `dtype` converts.",
    ),
    Section(
        "reductions-and-scans",
        "Reductions and scans",
        ("reduce", "argreduce", "reduce_fn", "scan", "scan_fn"),
        "Any numeric dtype. `axis=None` reduces every dim to a scalar; `keepdims=True` keeps size-1 dims. "
        "Identities: 0, 1, -inf / +inf for floats, the dtype's min / max for ints. `argmax/argmin` give `i32` indices, "
        "the first one on ties. `tile.reduce/scan` take a `@tile.function` combiner `fn(element, accumulator)` "
        "(associative and commutative: the hardware's order is not specified) and a compile-time identity; both "
        f"also take tuples of tiles ([reductions]({TYPING}#reductions-and-scans)). Scans are inclusive.",
    ),
    Section(
        "shape-ops",
        "Shape ops",
        ("reshape", "broadcast_to", "expand_dims", "permute", "transpose", "cat", "extract"),
        "Shapes are compile-time tuples, every dim a power of two; the element dtype is kept. These move "
        "elements between registers; to read a transposed tile from memory, use `x.partition(shape, order=...)` "
        f"instead of `tile.permute` ([ordered partitions]({TYPING}#memory)).",
    ),
    Section(
        "matmul",
        "Matrix multiply",
        ("mma", "matmul"),
        "`a (M, K)`, `b (K, N)`, `acc (M, N)`, optionally with one leading batch dim that broadcasts like numpy's "
        "`matmul`. Operand / accumulator dtypes: `f16` into `f16` or `f32`; `bf16`, `tf32`, `f32` into `f32`; "
        "`f64` into `f64`; `f8e4m3fn`, `f8e5m2` into `f16` or `f32` (sm_89+); `i8`/`u8` into `i32` "
        f"([matrix multiply]({TYPING}#matrix-multiply-tilemmaa-b-acc)). `a @ b` is `tile.matmul(a, b)`.",
    ),
    Section(
        "memory",
        "Memory: partitions, loads, stores, sub-tiles, tiles()",
        ("load_tile_like",),
        "Inputs (`Tensor[...]`) are read through partitions at any tile; outputs (`Mut[...]`) are written only at "
        "tiles the block owns: its own tile (`z.store(t)`) or the tiles a `z.tiles()` walk hands it, so no two "
        "blocks write one tile. Any dtype. Indices are proven in range, checked by the launcher, or checked in the "
        f"kernel ([memory rules]({TYPING}#memory)). Every load and store takes the hints `latency=` (1..10) and "
        "`allow_tma=`. Tensors also have compile-time `x.dtype`, `x.shape` (static dims) and run-time "
        "`x.extents[d]`; partitions and sub-tiles have `p.num_tiles[d]`.",
    ),
    Section(
        "grid-queries",
        "Grid queries",
        ("grid", "cdiv"),
        "`tile.block_id()` and `tile.num_blocks()` return three `i32` scalars (x, y, z); unpack them "
        "(`bm, bn, _ = tile.block_id()`) or index them.",
    ),
    Section(
        "raw-pointers-and-atomics",
        "Raw pointers and atomics (unchecked kernels only)",
        ("gather", "scatter", "atomic", "atomic_cas"),
        "Only in kernels marked `@tile.entry(unchecked=True)`: they bypass the bounds and ownership checks, and a "
        "safe kernel that calls them is a compile error. `x.ptr()` (or a `Ptr[dt]` parameter) is the tensor's base "
        "pointer; `ptr + offsets` broadcasts to a pointer tile (offsets in elements). `mask=` skips the elements "
        "where it is false (a masked `gather` reads `padding`). Atomics are `acq_rel` at device scope, order every "
        "memory op of their block around them, and return the old values; the Tile IR mode follows the dtype "
        "(signed, unsigned or float). To read an input at index tiles in a safe kernel (an embedding lookup, a "
        "stencil, an im2col patch), use the checked [`x.gather`](#xgather) instead.",
    ),
    Section(
        "debug",
        "Debug: print and assert",
        ("print", "printf", "assert", "static_assert"),
        "`tile.print` and `tile.printf` write from the device (on the CPU interpreter, to `sys.stdout`; a tile "
        "prints as `[e0, e1, ...]`). `tile.assert_` traps at run time (on the interpreter a `KernelFaultError` with "
        "the message; on the GPU the launch fails); `tile.static_assert` is checked while compiling. A kernel with "
        "`print` or `assert_` is slower on the GPU (each lowers to a `vprintf` call): keep them for debugging. "
        "A `tile.printf` format holds `%%` and conversions `%[flags][width][.precision][length]conv` with `conv` in "
        "`diuoxX` for integer values and `eEfFgGaA` for floats (`l`/`ll` only for 64-bit integers); `%s`, `%p`, "
        "`%n`, `%c` and `*` widths would make `vprintf` read or write memory, and are compile errors. A `tile.assert_` "
        "message is plain text: it prints as written, `%` included (tileiras makes it and the file name part of a "
        "`vprintf` format, so the compiler writes every `%` of both as `%%`).",
    ),
    Section(
        "launch-control",
        "Launch control: programmatic dependent launch",
        ("launch_dependents",),
        "A kernel marked `@tile.entry(pdl=True)` may *start* while the kernel before it on the stream (or before it "
        "in a CUDA graph) is still running, so its launch and prologue overlap that kernel's tail: worth it for "
        "chains of short kernels such as a batch-1 decode step (sm_90+; elsewhere the launch is an ordinary one). "
        "It stays safe by construction: the compiler makes the kernel's first op the grid-dependency wait "
        "(`gdc_wait_tko`, PTX `griddepcontrol.wait`: all grids before it have completed and their writes are "
        "visible) and orders every load, store and atomic of the kernel after it, and the launcher asks the driver "
        "for the overlap (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`) only for kernels compiled that "
        "way. There is no user-placed wait: the compiler could not prove that what a kernel touched before it was "
        "not written by its predecessor. `tile.launch_dependents()` is only a scheduling hint, allowed in any kernel: "
        "once every block of this kernel has called it (or ended), the next PDL kernel may be scheduled; it still "
        "waits at its entry for this whole kernel to complete, so where the call sits changes speed, never results. "
        "Call it early in a kernel whose successor's prologue should overlap its work. Both need Tile IR bytecode "
        "13.4 or newer (older versions are refused at compile time); on the CPU interpreter both are no-ops.",
    ),
)

# What dtypes each family takes (the second line of every op entry).
FAMILY_DTYPES: dict[str, str] = {
    "unary_float": "float tiles (`f16 bf16 f32 f64`...)",
    "unary": "ints and floats",
    "binary": "ints and floats (promoted)",
    "binary_float": "float tiles (promoted)",
    "arith": "ints and floats (`truediv`: floats)",
    "fma": "float tiles (promoted)",
    "where": "`cond`: bool; `x`, `y`: any dtype (promoted)",
    "clamp": "ints and floats",
    "isnan": "floats; gives bool",
    "bitcast": "any, to a dtype of the same width",
    "astype": "any to any",
    "full": "any (`dtype=None`: `f32` for `zeros`/`ones`, the value's for `full`)",
    "arange": "`i32` (converted to `dtype` when given)",
    "reshape": "any",
    "broadcast_to": "any",
    "expand_dims": "any",
    "permute": "any",
    "transpose": "any",
    "cat": "any (both operands one dtype)",
    "extract": "any",
    "reduce": "ints and floats",
    "argreduce": "ints and floats; gives `i32`",
    "reduce_fn": "any (tuples of tiles too)",
    "scan": "ints and floats",
    "scan_fn": "any (tuples of tiles too)",
    "mma": "see the table above",
    "matmul": "see the table above (accumulates in f32, f64 or i32)",
    "load_tile_like": "any",
    "grid": "gives `i32` scalars",
    "cdiv": "ints",
    "gather": "pointer tiles of any dtype",
    "scatter": "pointer tiles of any dtype",
    "atomic": "ints; floats where the Tile IR line below has a float mode",
    "atomic_cas": "ints and floats",
    "print": "any scalars and tiles, strings",
    "printf": "any scalars and tiles",
    "assert": "bool tile or scalar",
    "static_assert": "compile-time bool",
    "launch_dependents": "none (takes no arguments)",
}


@dataclass(frozen=True)
class MethodDoc:
    """A method that is not an `OPS` row: its signature (after the receiver), Tile IR ops, meaning and the key of
    the section that lists it."""

    signature: str
    ir: str
    doc: str
    section: str = "memory"


# The receivers' names on the page: what a value of each METHODS kind is called in the examples.
RECEIVERS: dict[str, str] = {"tile": "t", "tensor": "x", "partition": "p", "mut": "z", "subtiles": "zs"}

METHOD_DOCS: dict[str, MethodDoc] = {
    "partition": MethodDoc(
        "shape, padding=None, order=None",
        "`make_partition_view` (of the entry's `make_tensor_view`)",
        'a view of tiles of `shape`; `padding` (`"zero"`, `"neg_zero"`, `"nan"`, `"pos_inf"`, `"neg_inf"`) is '
        "what elements past the tensor's end read as; `order=` walks tensor dims in another order (inputs only)",
    ),
    "partition_load": MethodDoc(
        "index, latency=None, allow_tma=None",
        "`load_view_tko`",
        "the tile at `index` (one i32/i64 coordinate per dim, or the `idx` of a `for idx in z.tiles()` walk); of an "
        "output, only a tile this block owns",
    ),
    "mut_store": MethodDoc(
        "tile, at=None, latency=None, allow_tma=None",
        "`store_view_tko`",
        "store this block's own tile (or, with `at=idx`, a tile `z.tiles()` handed it); the value must have the "
        "output's dtype and broadcast to its tile shape; stores past the tensor's end are masked",
    ),
    "mut_load": MethodDoc(
        "at=None, latency=None, allow_tma=None",
        "`load_view_tko`",
        "read back this block's own tile (or the `at=idx` one), zero-padded past the end",
    ),
    "mut_tiles": MethodDoc(
        "group=None",
        "`for` over tile numbers from `get_tile_block_id` / `get_num_tile_blocks`",
        "iterate over the tiles of `z` this block owns (every tile to exactly one block, for any grid); "
        "`group=G` walks a rank-2 output in grouped order",
    ),
    "ptr": MethodDoc(
        "",
        "none (the kernel's pointer parameter)",
        "the tensor's base pointer, for `ptr + offsets` (unchecked kernels only)",
        "raw-pointers-and-atomics",
    ),
    "mut_subtiles": MethodDoc(
        'shape, at=None, padding="zero"',
        "`make_partition_view`, `get_index_space_shape`",
        "cut this block's own tile (or the `at=idx` one) into sub-tiles of `shape`, addressed relative to it",
    ),
    "tensor_subtiles": MethodDoc(
        'shape, at=None, padding="zero"',
        "—",
        "a compile error on an input (inputs have no owned tile): read them through `x.partition(shape)`",
    ),
    "tensor_gather": MethodDoc(
        "*indices, padding=0, mask=None",
        "`offset` of the base pointer by `sum(i[d] * stride[d])` and `load_ptr_tko` masked by "
        "`0 <= i[d] < extent[d]` (both in i64)",
        "the elements at one integer index tile per dim (or a tuple of them), broadcast together: a checked gather "
        "from an input, allowed in safe kernels; an element whose index is outside the tensor (negative, past the "
        "end), or where the bool `mask` is false, reads `padding` (a constant or a tile of the tensor's dtype) and "
        "touches no memory",
    ),
    "mut_gather": MethodDoc(
        "*indices, padding=0, mask=None",
        "—",
        "a compile error on an output (other blocks may be writing any element of it): gather from an input",
    ),
    "subtiles_load": MethodDoc(
        "index, latency=None, allow_tma=None",
        "`load_view_tko`",
        "the sub-tile at `index`, relative to the owned tile (`0 <= index[d] < zs.num_tiles[d]`)",
    ),
    "subtiles_store": MethodDoc(
        "tile, index, latency=None, allow_tma=None",
        "`store_view_tko`",
        "store the sub-tile at `index`, relative to the owned tile; masked at the tensor's end",
    ),
}

# Families whose catalog IR names are the body of a region op: the page wraps them (``{ir}``: the names).
FAMILY_IR: dict[str, str] = {
    "reduce": "`reduce` whose region combines with {ir}",
    "scan": "`scan` whose region combines with {ir}",
    "argreduce": "`reduce` over (value, `iota` index) pairs, comparing with `cmpf`/`cmpi` {ir} (ties: the smaller "
    "index)",
    "reduce_fn": "{ir}, its region the inlined combiner",
    "scan_fn": "{ir}, its region the inlined combiner",
}

# Ops whose lowering the catalog's IR names do not tell in full (or at all).
IR_NOTES: dict[str, str] = {
    "clamp": "`maxf` then `minf` (floats), `maxi` then `mini` (ints)",
    "astype": "`ftof`, `ftoi`, `itof`, `exti`, `trunci` or `cmpi`/`cmpf` (to bool), by the two dtypes; nothing for "
    "same-width signed/unsigned",
    "cdiv": '`divi` with `rounding="positive_inf"`; folded at compile time for constants',
    "static_assert": "none (checked while compiling)",
}

# ``@tile.entry`` keyword options: (what it takes, what it does). The renderer checks these are exactly the
# parameters of ``tile.entry``.
ENTRY_OPTIONS: dict[str, tuple[str, str]] = {
    "unchecked": (
        "`bool` (False)",
        "allow raw pointers (`Ptr`, `x.ptr()`, `gather`/`scatter`, atomics) and drop the launch-time aliasing and "
        "in-kernel index checks; part of the cache key",
    ),
    "opt_level": ("`int` 0..3 (3)", "tileiras' optimisation level"),
    "occupancy": ("`int` 1..32 or `tile.by_arch(...)`", "Tile IR hint: blocks per SM"),
    "num_ctas": ("`int` 1, 2, 4, 8, 16 or `tile.by_arch(...)`", "Tile IR hint `num_cta_in_cga`: CTAs per cluster"),
    "num_cta_in_cga": ("same as `num_ctas`", "the Tile IR spelling of `num_ctas` (pass one of the two)"),
    "num_worker_warps": ("`int` 4 or 8 or `tile.by_arch(...)`", "Tile IR hint `num_worker_warps_per_cta`"),
    "flush_to_zero": ("`bool` (False)", "every f32 op whose Tile IR op has `flush_to_zero` gets it by default"),
    "approx": ("`bool` (False)", 'every f32 op whose Tile IR op allows `rounding_mode="approx"` gets it by default'),
    "fp_contract": (
        "`bool` (True)",
        "fuse `a * b + c` / `a * b - c` into one `fma` where the product has no other use; False rounds every product",
    ),
    "pdl": (
        "`bool` (False)",
        "programmatic dependent launch: the kernel may start before the previous kernel ends; the compiler puts the "
        "grid-dependency wait before every memory access (see [Launch control](#launch-control-programmatic-"
        "dependent-launch)); bytecode 13.4+; part of the cache key",
    ),
}


TUPLE_DOC = (
    "`tuple[Tensor[dtype, shape], ...]` or `tuple[Mut[Tensor[dtype, tile_shape]], ...]`: a tuple (or list) of tensors "
    "or of output partitions, one element type, each element its own shape (a grouped GEMM's groups). A launch "
    "checks and moves every element as it would a lone argument (an output element must be a partition; no output "
    "element may overlap another element, another output or any input) and hands the tuple back as a tuple. In the "
    "kernel `len(t)` is a compile-time int (one compiled kernel per length, 1 to 64) and `t[i]` needs a "
    "compile-time index: a constant, or the variable of `for g in range(len(t))` or `for x in t`, loops that are "
    "unrolled at compile time (no `break`, `continue` or `return` inside). An output element is stored at its own "
    "tile (then every output's grid must agree) or walked with `t[g].tiles()` on any grid."
)
