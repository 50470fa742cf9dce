"""tile.ir: a standalone, pure-Python CUDA Tile IR toolkit (data model, builder, verifier, bytecode I/O).

Data model (all importable from ``tile.ir``)
--------------------------------------------
Types (`_types`, immutable, structural equality, ``str()`` = tileirdisasm spelling):
    scalars ``i1 i4 i8 i16 i32 i64 f16 bf16 f32 tf32 f64 f8E4M3FN f8E5M2 f8E8M0FNU f4E2M1FN`` (`ScalarType`);
    `PointerType` (``ptr(f32)``); `TileType` (``tile((128, 64), f16)``, ``scalar(i32)`` = rank 0);
    `TokenType` (``token``); `TensorViewType(element, shape, strides)` with ``None`` = dynamic (`DYNAMIC`);
    `PartitionViewType(tile_shape, tensor_view, dim_map, padding)`; `StridedViewType`;
    `GatherScatterViewType`; `FunctionType(inputs, results)`; `Padding` and `PointerAttr` enums.
Attributes (`_attrs`): `IntegerAttr(type, value)`, `FloatAttr(type, bits)` (``FloatAttr.of(f32, 1.5)``),
    `BoolAttr`, `TypeAttr`, `StringAttr`, `ArrayAttr(elements)`, `DenseElementsAttr(tile_type, raw_bytes)`
    (``.splat(type, v)``, ``.from_values(type, vs)``), `DictAttr(items)`, `OptimizationHints(by_arch)`
    (``OptimizationHints.of({"sm_90": {"occupancy": 2}})``), assume predicates `DivBy`, `SameElements`,
    `Bounded`.
Enums (`_enums`, IntEnum with the bytecode codes): `Signedness`, `IntegerOverflow`, `RoundingMode`,
    `ComparisonPredicate`, `ComparisonOrdering`, `MemoryOrdering`, `MemoryScope`, `AtomicRMWMode`,
    `SymbolVisibility`, `MultimemReductionKind`.
IR (`_ir`): `Module(functions, globals, producer)`; `Global(name, value, alignment, constant, visibility)`;
    `Function(name, FunctionType, entry=True, hints=None, arg_attrs=None, loc=None)` whose ``body`` is a
    `Block` with the parameters as arguments (``fn.params``); `Block(args, ops)`; `Region(blocks)`;
    `Value(type, owner, index)`; `Operation(name, operands, result_types, *, attributes, num_regions,
    segments, loc)`.
    An `Operation` is generic: ``op.name`` keys the catalog entry ``tile.ir.ops.CATALOG[op.name]`` (an
    `OpDef`); ``op.operands`` is flat and ``op.segments`` holds one count per operand group of the entry
    (``op.operand_group(i)``); ``op.attributes`` maps attribute names of the entry to canonical values
    (enum member, int, bool, str, tuple, Attr, Type); absent optional attributes and false unit attributes
    are not stored; attributes newer than the bytecode version hold their default.
Locations (`_location`): ``None`` (unknown), `FileLoc`, `DILoc(scope, filename, line, column)`,
    `CallSite(callee, caller)`; scopes `DISubprogram`, `DILexicalBlock`; `DIFile`, `DICompileUnit`.
Versions (`_version`): `Version`, ``V13_1 .. V13_5``, `SUPPORTED_VERSIONS`, `LATEST`.
Errors (`_errors`): `TileError` (Tile's one error root, ``tile.errors.TileError``, the same class in every Tile
    package); `IRTypeError` (TypeError), `VerifyError` and `UnsupportedVersionError` (ValueError),
    `BytecodeError(offset, reason)` (ValueError).

Op catalog (``tile.ir.ops``)
---------------------------
One `OpDef` per opcode (``ops/arith.py``, ``math.py``, ``shape.py``, ``control.py``, ``memory.py``,
``atomics.py``, ``reduce.py``, ``misc.py``): name, opcode, since-version, results, operand groups
(`OperandKind` SINGLE/OPTIONAL/VARIADIC) and their `OperandLayout`, attributes (`AttrSpec`: name, `AttrKind`,
enum, optional, since, default, allowed values), flag bits, regions, terminator, result-inference rule. Op
and attribute
names follow the Tile IR dialect (``rounding_mode``, ``flush_to_zero``, ``memory_ordering_semantics``...).
Not cataloged: ``module``/``entry``/``global`` (bytecode sections, not ops) and the 13.5 preview ``call``.

Builder
-------
>>> from tile.ir import *
>>> fn = Function("k", FunctionType((scalar(ptr(f32)), scalar(i32))))
>>> b = Builder(fn.body)
>>> x = b.constant(1.0, tile((128,), f32))
>>> y = b.addf(x, x)                       # any single-result op: positional operands, keyword attributes
>>> z = b.exp(y, rounding_mode="approx")   # enums accept members or their lowercase names
>>> zero, one = b.constant(0, scalar(i32)), b.constant(1, scalar(i32))
>>> with b.for_(zero, fn.params[1], one, [z]) as loop:    # loop.iv, loop.args, then loop.results
...     _ = b.continue_([b.addf(loop.args[0], x)])
>>> cond = b.cmpi(zero, fn.params[1], comparison_predicate="less_than", signedness="signed")
>>> with b.if_(cond, [x.type]) as br:
...     with br.then_():
...         _ = b.yield_([loop.results[0]])
...     with br.else_():
...         _ = b.yield_([x])
>>> _ = b.return_()
>>> verify(Module([fn]), "13.3")
>>> data = write_bytecode(Module([fn]), "13.3")
>>> " ".join(op.name for op in read_bytecode(data).functions[0].body.ops)
'constant addf exp constant constant for cmpi if return'

Bytecode and verification
-------------------------
``write_bytecode(module, "13.3") -> bytes`` (exact layout of that version, deterministic);
``read_bytecode(data) -> Module`` (raises `BytecodeError(offset, reason)` on malformed input, and on what the
data model cannot hold: a value of function type, a region without its one block, a dense constant of the wrong
size; read then written at the same version reproduces the input bytes); ``read_version(data)``;
``verify(module, version)`` raises `VerifyError` listing every problem; ``verify_problems`` returns them.
Unlike NVIDIA's verifier it refuses an ``assert`` whose message or location file name holds a ``%`` other than
``%%``: tileiras copies both into the format of a device ``printf`` (`_format_text` has the evidence), where a
conversion reads memory. ``escape_format_text(text)`` makes text literal (``%`` -> ``%%``),
``render_format_text`` is what the device prints for it, ``format_text_problem(text, what)`` says why text is not.
On any input, read -> verify -> print raises nothing but `BytecodeError` and `VerifyError` (a seeded mutation
fuzzer checks it). Results newer than their op (``print_tko``'s token, 13.2) exist at every version, as in
NVIDIA's IR: bytecode of an older version does not encode them, the reader supplies them, the writer leaves them
out and the verifier refuses a use of one.

Text (IR-B: `_printer`, `_asm`)
----------------------------------
``print_module(module) -> str`` / ``print_function(fn)`` print the text `tileirdisasm` prints (IR that does not
verify prints best-effort, or raises `VerifyError` naming the verifier's problems where it has no text);
``parse_module(text) -> Module`` assembles it back (a lone ``load_ptr_tko`` mask-or-padding operand goes where its
type fits) (errors: `AsmSyntaxError`, a `TileError` + `ValueError`
with ``message, filename, line, col, source_line``). ``python -m tile.ir`` / ``tile-ir`` is the CLI
(dis / asm / verify / info).

Builder details: multi-result / structural ops have explicit methods: `Builder.load_view_tko` (→ tile, token),
``get_tile_block_id``, ``load_ptr_tko``, ``atomic_rmw_tko``, ``atomic_cas_tko``, ``print_tko``, ``assert_``,
``return_``/``yield_``/``continue_``/``break_``, ``for_``, ``loop``, ``if_``, ``reduce``, ``scan``; anything
else via ``b.call(name, *groups, **attrs) -> Operation`` or ``b.create(name, groups, attrs, result_types)``.
"""

from __future__ import annotations

from tile.ir import ops
from tile.ir._asm import parse_module
from tile.ir._attrs import (
    ArrayAttr,
    AssumePredicate,
    Attr,
    BoolAttr,
    Bounded,
    DenseElementsAttr,
    DictAttr,
    DivBy,
    FloatAttr,
    IntegerAttr,
    OptimizationHints,
    SameElements,
    StringAttr,
    TypeAttr,
)
from tile.ir._builder import Builder, IfBranches, RegionOp
from tile.ir._enums import (
    AtomicRMWMode,
    ComparisonOrdering,
    ComparisonPredicate,
    IntegerOverflow,
    MemoryOrdering,
    MemoryScope,
    MultimemReductionKind,
    RoundingMode,
    Signedness,
    SymbolVisibility,
)
from tile.ir._errors import BytecodeError, IRTypeError, TileError, UnsupportedVersionError, VerifyError
from tile.ir._format_text import escape_format_text, format_text_problem, render_format_text
from tile.ir._ir import Block, Function, Global, Module, Operation, Region, Value
from tile.ir._lexer import AsmSyntaxError
from tile.ir._location import (
    CallSite,
    DICompileUnit,
    DIFile,
    DILexicalBlock,
    DILoc,
    DIScope,
    DISubprogram,
    FileLoc,
    Location,
)
from tile.ir._printer import print_function, print_module
from tile.ir._reader import read_bytecode, read_version
from tile.ir._types import (
    DYNAMIC,
    ElementType,
    FunctionType,
    GatherScatterViewType,
    Padding,
    PartitionViewType,
    PointerAttr,
    PointerType,
    ScalarType,
    StridedViewType,
    TensorViewType,
    TileType,
    TokenType,
    Type,
    ViewType,
    bf16,
    f4E2M1FN,
    f8E4M3FN,
    f8E5M2,
    f8E8M0FNU,
    f16,
    f32,
    f64,
    i1,
    i4,
    i8,
    i16,
    i32,
    i64,
    ptr,
    scalar,
    tf32,
    tile,
    token,
)
from tile.ir._verifier import verify, verify_problems
from tile.ir._version import LATEST, SUPPORTED_VERSIONS, V13_1, V13_2, V13_3, V13_4, V13_5, Version
from tile.ir._writer import write_bytecode

__all__ = [
    "DYNAMIC",
    "LATEST",
    "SUPPORTED_VERSIONS",
    "V13_1",
    "V13_2",
    "V13_3",
    "V13_4",
    "V13_5",
    "ArrayAttr",
    "AsmSyntaxError",
    "AssumePredicate",
    "AtomicRMWMode",
    "Attr",
    "Block",
    "BoolAttr",
    "Bounded",
    "Builder",
    "BytecodeError",
    "CallSite",
    "ComparisonOrdering",
    "ComparisonPredicate",
    "DICompileUnit",
    "DIFile",
    "DILexicalBlock",
    "DILoc",
    "DIScope",
    "DISubprogram",
    "DenseElementsAttr",
    "DictAttr",
    "DivBy",
    "ElementType",
    "FileLoc",
    "FloatAttr",
    "Function",
    "FunctionType",
    "GatherScatterViewType",
    "Global",
    "IRTypeError",
    "IfBranches",
    "IntegerAttr",
    "IntegerOverflow",
    "Location",
    "MemoryOrdering",
    "MemoryScope",
    "Module",
    "MultimemReductionKind",
    "Operation",
    "OptimizationHints",
    "Padding",
    "PartitionViewType",
    "PointerAttr",
    "PointerType",
    "Region",
    "RegionOp",
    "RoundingMode",
    "SameElements",
    "ScalarType",
    "Signedness",
    "StridedViewType",
    "StringAttr",
    "SymbolVisibility",
    "TensorViewType",
    "TileError",
    "TileType",
    "TokenType",
    "Type",
    "TypeAttr",
    "UnsupportedVersionError",
    "Value",
    "VerifyError",
    "Version",
    "ViewType",
    "bf16",
    "escape_format_text",
    "f4E2M1FN",
    "f8E4M3FN",
    "f8E5M2",
    "f8E8M0FNU",
    "f16",
    "f32",
    "f64",
    "format_text_problem",
    "i1",
    "i4",
    "i8",
    "i16",
    "i32",
    "i64",
    "ops",
    "parse_module",
    "print_function",
    "print_module",
    "ptr",
    "read_bytecode",
    "read_version",
    "render_format_text",
    "scalar",
    "tf32",
    "tile",
    "token",
    "verify",
    "verify_problems",
    "write_bytecode",
]
