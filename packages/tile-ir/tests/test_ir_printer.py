"""The printer: tileirdisasm's text from the data model.

CPU-only tests pin the rules the printer reproduces (float spelling, value names, blanks); the
``requires_tileiras`` tests compare the printer with ``tileirdisasm`` for one sample module per op at every
version where the op exists (IR-A's `helpers_ir_samples`), plus variants that exercise optional syntax.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import helpers_ir_samples as samples
from helpers_ir_tools import disassemble
from tile.ir import (
    SUPPORTED_VERSIONS,
    V13_3,
    V13_5,
    Builder,
    DenseElementsAttr,
    FloatAttr,
    Function,
    FunctionType,
    Module,
    ScalarType,
    Version,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i32,
    parse_module,
    print_module,
    scalar,
    tile,
    write_bytecode,
)
from tile.ir._asm_floats import float_text
from tile.ir._floats import float_to_bits
from tile.ir.ops import CATALOG

OP_CASES = [
    (name, version)
    for name, opdef in CATALOG.items()
    if name in samples.SAMPLES
    for version in SUPPORTED_VERSIONS
    if opdef.since <= version
]


@pytest.mark.parametrize(
    ("type_", "value", "text"),
    [
        (f32, 0.0, "0.000000e+00"),
        (f32, -0.0, "-0.000000e+00"),
        (f32, 1.5, "1.500000e+00"),
        (f32, 1024.0, "1.024000e+03"),
        (f32, 1e-6, "9.99999997E-7"),  # 6 digits do not read back: LLVM's shortest form
        (f32, 0.1, "1.000000e-01"),
        (f32, 3.14159265, "3.14159274"),
        (f32, float("-inf"), "0xFF800000"),
        (f32, float("inf"), "0x7F800000"),
        (f32, 123456789.0, "0x4CEB79A3"),  # the shortest form has no '.', so the bits are printed
        (f64, -1.25, "-1.250000e+00"),
        (f16, 0.1, "9.997550e-02"),
        (bf16, 1.0, "1.000000e+00"),
    ],
)
def test_float_spelling(type_: ScalarType, value: float, text: str) -> None:
    assert float_text(type_, float_to_bits(type_.name, value)) == text


def _kernel(body: Callable[[Builder, Function], None]) -> Module:
    fn = Function("k", FunctionType((scalar(i32), scalar(f32))))
    b = Builder(fn.body)
    body(b, fn)
    b.return_()
    return Module([fn])


def test_names_follow_mlir_rules() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(2.0, tile((4,), f32))
        b.constant(2.0, tile((4,), f32))  # same suggested name: gets a counter suffix
        b.constant(DenseElementsAttr.from_values(tile((4,), i1), [True, False, True, True]), tile((4,), i1))
        b.constant(-1, scalar(i32))
        b.addf(x, x)
        b.call("get_tile_block_id")

    text = print_module(_kernel(body))
    assert "%cst_2_f32 = constant <f32: 2.000000e+00> : tile<4xf32>" in text
    assert "%cst_2_f32_0 = constant" in text
    assert "%cst_i1 = constant <i1: [true, false, true, true]> : tile<4xi1>" in text
    assert "%cst_-1_i32 = constant <i32: -1> : tile<i32>" in text
    assert "%0 = addf %cst_2_f32, %cst_2_f32  : tile<4xf32>" in text  # the empty rounding directive keeps its blank
    assert "%blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>" in text
    assert text.startswith("entry @k(%arg0: tile<i32>, %arg1: tile<f32>) {\n")


def test_nested_regions_number_after_their_parent_and_siblings_restart() -> None:
    def body(b: Builder, fn: Function) -> None:
        zero, one = b.constant(0, scalar(i32)), b.constant(1, scalar(i32))
        acc = b.constant(0.0, scalar(f32))
        with b.for_(zero, fn.params[0], one, [acc]) as loop:
            b.continue_([b.addf(loop.args[0], fn.params[1])])
        b.addf(loop.results[0], acc)

    text = print_module(_kernel(body))
    assert "%for = for %loopIdx in (%cst_0_i32 to %arg0, step %cst_1_i32) : tile<i32> " in text
    assert "iter_values(%iterArg0 = %cst_0_f32) -> (tile<f32>) {" in text
    # the parent region used %0; the loop body continues from %1
    assert "    %1 = addf %iterArg0, %arg1  : tile<f32>\n    continue %1 : tile<f32>\n" in text
    assert "  %0 = addf %for, %cst_0_f32  : tile<f32>" in text


def test_reduce_identities_and_region_arguments() -> None:
    def body(b: Builder, fn: Function) -> None:
        x = b.constant(1.0, tile((8,), f32))
        ident = FloatAttr.of(f32, float("-inf"))
        with b.reduce([x], dim=0, identities=[ident], result_types=[scalar(f32)]) as red:
            b.yield_([b.maxf(red.args[0], red.args[1])])

    text = print_module(_kernel(body))
    assert "%reduce = reduce %cst_1_f32 dim=0 identities=[0xFF800000 : f32] : tile<8xf32> -> tile<f32> \n" in text
    assert "  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {\n    %0 = maxf %reduce_lhs, %reduce_rhs" in text


def test_printed_text_parses_back_to_the_same_text() -> None:
    for name, version in OP_CASES:
        text = print_module(samples.build_sample(name, version))
        assert print_module(parse_module(text)) == text, name


@pytest.mark.requires_tileiras
@pytest.mark.parametrize(("name", "version"), OP_CASES, ids=[f"{n}-{v}" for n, v in OP_CASES])
def test_op_sample_prints_as_tileirdisasm(name: str, version: Version) -> None:
    module = samples.build_sample(name, version)
    proc = disassemble(write_bytecode(module, version))
    assert proc.returncode == 0, proc.stderr
    assert print_module(module) == proc.stdout


# Optional syntax the op samples leave out, each built in place of the addf sample at 13.5.
_VARIANTS: dict[str, Callable[[samples.Env], object]] = {
    "addf_rounding_ftz": lambda e: e.b.addf(e.x, e.x, rounding_mode="zero", flush_to_zero=True),
    "mulf_ftz": lambda e: e.b.mulf(e.x, e.x, flush_to_zero=True),
    "sqrt_approx_ftz": lambda e: e.b.sqrt(e.x, rounding_mode="approx", flush_to_zero=True),
    "negi_nsw": lambda e: e.b.negi(e.xi, overflow="nsw"),
    "addi_nw": lambda e: e.b.addi(e.xi, e.xi, overflow="nw"),
    "divi_ceil": lambda e: e.b.divi(e.xi, e.xi, signedness="signed", rounding="positive_inf"),
    "ftoi_saturating": lambda e: e.b.ftoi(e.x, signedness="unsigned", saturating=True, result_type=tile((16,), i32)),
    "ftof_zero": lambda e: e.b.ftof(e.x, rounding_mode="zero", result_type=tile((16,), f16)),
    "cmpf_ordered": lambda e: e.b.cmpf(e.x, e.x, comparison_predicate="not_equal", comparison_ordering="ordered"),
    "tanh_approx": lambda e: e.b.tanh(e.x, rounding_mode="approx"),
    "exp2_ftz": lambda e: e.b.exp2(e.x, flush_to_zero=True),
    "maxf_both_flags": lambda e: e.b.maxf(e.x, e.x, propagate_nan=True, flush_to_zero=True),
    "shri_unsigned": lambda e: e.b.shri(e.xi, e.xi, signedness="unsigned"),
    "join_three": lambda e: e.b.join_tokens([e.tok, e.tok, e.tok]),
    "grid_size": lambda e: e.b.call("get_num_tile_blocks"),
    "print_no_args": lambda e: e.b.print_tko("hello\n", [], None),
    "store_ptr_hints": lambda e: e.b.store_ptr_tko(
        e.fptrs, e.x, None, None, memory_ordering_semantics="release", memory_scope="sys",
        optimization_hints={"sm_90": {"latency": 4}},
    ),
    "load_ptr_relaxed": lambda e: e.b.load_ptr_tko(
        e.fptrs, None, None, None, memory_ordering_semantics="relaxed", memory_scope="device"
    ),
    "rmw_mask_no_token": lambda e: e.b.atomic_rmw_tko(
        e.iptrs, e.xi, e.b.cmpi(e.xi, e.xi, comparison_predicate="equal", signedness="signed"), None,
        memory_scope="sys", mode="umax", memory_ordering_semantics="relaxed",
    ),
    "multimem_load_reduce_no_token_max": lambda e: e.b.multimem_load_reduce_view_tko(
        e.pvi, [e.s], None, memory_scope="device", reduction="max", memory_ordering_semantics="acquire",
        inbounds=(True,),
    ),
    "multimem_reduce_umin": lambda e: e.b.call(
        "multimem_reduce_view_tko", e.pvi, e.xi, [e.s], None, memory_scope="sys", reduction="umin"
    ),
    "multimem_store_inbounds": lambda e: e.b.call(
        "multimem_store_view_tko", e.pvi, e.xi, [e.s], e.tok, memory_ordering_semantics="relaxed",
        memory_scope="device", inbounds=(True,),
    ),
}  # fmt: skip
_MULTICAST = {name for name in _VARIANTS if name.startswith("multimem")}


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("variant", sorted(_VARIANTS))
def test_optional_syntax_variants_print_as_tileirdisasm(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host = "multimem_store_view_tko" if variant in _MULTICAST else "addf"  # multimem needs a multicast base
    monkeypatch.setitem(samples.SAMPLES, host, _VARIANTS[variant])
    module = samples.build_sample(host, V13_5)
    proc = disassemble(write_bytecode(module, V13_5))
    assert proc.returncode == 0, proc.stderr
    assert print_module(module) == proc.stdout
    assert print_module(parse_module(proc.stdout)) == proc.stdout


@pytest.mark.requires_tileiras
def test_producer_and_several_functions_print_as_tileirdisasm() -> None:
    module = samples.build_sample("addf", V13_3)
    module.functions += samples.build_sample("mulf", V13_3).functions
    module.producer = "tile 0.1"
    proc = disassemble(write_bytecode(module, V13_3))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("// Producer: tile 0.1\nentry @k_addf(")
    assert print_module(module) == proc.stdout
    again = parse_module(proc.stdout)
    assert again.producer == "tile 0.1"
    assert [f.name for f in again.functions] == ["k_addf", "k_mulf"]


@pytest.mark.requires_tileiras
def test_symbols_that_are_not_identifiers_are_quoted() -> None:
    module = samples.build_sample("addf", V13_3)
    module.functions[0].name = 'k-1 "odd"'
    proc = disassemble(write_bytecode(module, V13_3))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('entry @"k-1 \\22odd\\22"(')
    assert print_module(module) == proc.stdout
    assert parse_module(proc.stdout).functions[0].name == 'k-1 "odd"'


@pytest.mark.requires_tileiras
def test_globals_print_as_tileirdisasm() -> None:
    from tile.ir import Global, SymbolVisibility

    module = samples.build_sample("get_global", V13_3)
    value = module.globals[0].value
    module.globals.append(Global("t2", value, 16, True, SymbolVisibility.PRIVATE))
    module.globals.append(Global("t3", value, 0, False, SymbolVisibility.PRIVATE))
    proc = disassemble(write_bytecode(module, V13_3))
    assert proc.returncode == 0, proc.stderr
    assert print_module(module) == proc.stdout
    assert print_module(parse_module(proc.stdout)) == proc.stdout
    debug = disassemble(write_bytecode(module, V13_3), "-g").stdout
    assert print_module(module, debug=True) == debug
    assert print_module(parse_module(debug), debug=True) == debug
