"""Every op of the interpreter's table has a numeric check, registered here, so a new op cannot slip through.

`CHECKED` names, for each op, one test that builds a kernel using the op and compares what it computes with a
reference written in the test (a numpy formula, exact values, or the error a broken promise must raise). Running
a sample without reading its output (`test_sample_kernel_runs`) does not count. The registry test reads each named
test's source and fails when the test is gone, does not use the op, or asserts nothing, and fails for any op of
`interp.SUPPORTED_OPS` missing from `CHECKED`: add the op's check (see test_ir_interp_ops_checked.py) and its line.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tile.ir import interp

HERE = Path(__file__).parent

_MULTIMEM = "test_ir_interp_ops_checked::test_multimem_store_reduce_and_load_reduce_on_one_member"
CHECKED: dict[str, str] = {
    "absf": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "absi": "test_ir_interp_ops_checked::test_negi_and_absi_wrap",
    "addf": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "addi": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "alloca": "test_ir_interp_ops_checked::test_alloca_gives_each_allocation_its_own_scratch",
    "andi": "test_ir_interp_ops::test_two_operand_reduce_computes_argmax",
    "assert": "test_ir_interp_memory::test_failed_assert_names_block_location_and_message",
    "assume": "test_ir_interp_memory::test_violated_assume_is_an_error",
    "atan2": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "atomic_cas_tko": "test_ir_interp_memory::test_atomic_rmw_applies_duplicates_in_order_and_cas_swaps",
    "atomic_red_view_tko": "test_ir_interp_memory::test_atomic_red_view_accumulates_tiles_from_every_block",
    "atomic_rmw_tko": "test_ir_interp_memory::test_atomic_rmw_applies_duplicates_in_order_and_cas_swaps",
    "bitcast": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "break": "test_ir_interp_kernels::test_while_loop_and_if_else_follow_cutile_lowering",
    "broadcast": "test_ir_interp_ops_checked::test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets",
    "cat": "test_ir_interp_ops::test_shape_ops",
    "ceil": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "cmpf": "test_ir_interp_ops::test_cmpf_ordering_decides_nan",
    "cmpi": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "constant": "test_ir_interp_ops::test_shape_ops",
    "continue": "test_ir_interp_ops_checked::test_for_runs_lower_to_upper_by_step_carrying_values",
    "cos": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "cosh": "test_ir_interp_ops_checked::test_hyperbolic_and_tangent_match_float64",
    "divf": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "divi": "test_ir_interp_ops::test_divi_signed_rounding_modes",
    "exp": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "exp2": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "exti": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "extract": "test_ir_interp_ops::test_shape_ops",
    "floor": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "fma": "test_ir_interp_ops::test_fma_rounds_once",
    "for": "test_ir_interp_ops_checked::test_for_runs_lower_to_upper_by_step_carrying_values",
    "fpowi": "test_ir_interp_ops_checked::test_fpowi_raises_to_signed_integer_powers",
    "ftof": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "ftoi": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "gdc_launch_dependents_tko": "test_ir_interp_ops_checked::test_token_only_ops_order_the_load_after_the_store",
    "gdc_wait_tko": "test_ir_interp_ops_checked::test_token_only_ops_order_the_load_after_the_store",
    "get_global": "test_ir_interp_memory::test_globals_are_mapped_and_constant_ones_are_read_only",
    "get_index_space_shape": "test_ir_interp_memory::test_shape_queries",
    "get_num_tile_blocks": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "get_tensor_shape": "test_ir_interp_memory::test_shape_queries",
    "get_tile_block_id": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "if": "test_ir_interp_kernels::test_while_loop_and_if_else_follow_cutile_lowering",
    "insert": "test_ir_interp_ops_checked::test_insert_writes_the_piece_at_its_tile_index",
    "int_to_ptr": "test_ir_interp_ops_checked::test_int_to_ptr_inverts_ptr_to_int",
    "iota": "test_ir_interp_ops::test_shape_ops",
    "itof": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "join_tokens": "test_ir_interp_ordering::test_only_the_elements_read_outside_the_acquire_are_counted",
    "load_ptr_tko": "test_ir_interp_ops_checked::test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets",
    "load_view_tko": "test_ir_interp_ops_checked::test_token_only_ops_order_the_load_after_the_store",
    "log": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "log2": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "loop": "test_ir_interp_kernels::test_while_loop_and_if_else_follow_cutile_lowering",
    "make_gather_scatter_view": "test_ir_interp_memory::test_gather_scatter_view_picks_rows",
    "make_partition_view": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "make_strided_view": "test_ir_interp_memory::test_strided_view_overlapping_windows",
    "make_tensor_view": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "make_token": "test_ir_interp_ops_checked::test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets",
    "maxf": "test_ir_interp_ops::test_maxf_minf_nan_and_signed_zero_rules",
    "maxi": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "memory_fence_alias_tko": "test_ir_interp_ops_checked::test_token_only_ops_order_the_load_after_the_store",
    "minf": "test_ir_interp_ops::test_maxf_minf_nan_and_signed_zero_rules",
    "mini": "test_ir_interp_ops_checked::test_subi_xori_mini_are_signless",
    "mmaf": "test_ir_interp_ops::test_mmaf_bf16_and_batched_and_mmai",
    "mmaf_scaled": "test_ir_interp_ops_checked::test_mmaf_scaled_scales_each_k_block_of_both_operands",
    "mmai": "test_ir_interp_ops::test_mmaf_bf16_and_batched_and_mmai",
    "mulf": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "mulhii": "test_ir_interp_ops::test_mulhii_is_the_high_half_of_the_unsigned_product",
    "muli": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "multimem_load_reduce_view_tko": _MULTIMEM,
    "multimem_reduce_view_tko": _MULTIMEM,
    "multimem_store_view_tko": _MULTIMEM,
    "negf": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "negi": "test_ir_interp_ops_checked::test_negi_and_absi_wrap",
    "offset": "test_ir_interp_memory::test_pointer_gather_scatter_with_masks_and_padding",
    "ori": "test_ir_interp_ops::test_two_operand_reduce_computes_argmax",
    "pack": "test_ir_interp_ops_checked::test_pack_and_unpack_reinterpret_little_endian_bytes",
    "permute": "test_ir_interp_ops::test_shape_ops",
    "pow": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "print_tko": "test_ir_interp_memory::test_print_formats_scalars_and_tiles_like_printf",
    "ptr_to_int": "test_ir_interp_ops_checked::test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets",
    "ptr_to_ptr": "test_ir_interp_ops_checked::test_ptr_to_int_gives_byte_addresses_and_ptr_to_ptr_reinterprets",
    "reduce": "test_ir_interp_ops::test_reduce_sum_fast_and_generic_paths",
    "remf": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "remi": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "reshape": "test_ir_interp_ops::test_shape_ops",
    "return": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "rsqrt": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "scan": "test_ir_interp_ops::test_scan_is_an_inclusive_prefix",
    "select": "test_ir_interp_ops::test_two_operand_reduce_computes_argmax",
    "shli": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "shri": "test_ir_interp_ops::test_integer_ops_are_signless_and_wrap",
    "sin": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "sinh": "test_ir_interp_ops_checked::test_hyperbolic_and_tangent_match_float64",
    "sqrt": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "store_ptr_tko": "test_ir_interp_ops_checked::test_alloca_gives_each_allocation_its_own_scratch",
    "store_view_tko": "test_ir_interp_ops_checked::test_get_num_tile_blocks_is_the_grid_in_every_block",
    "subf": "test_ir_interp_ops::test_float_binary_ops_match_numpy_f32",
    "subi": "test_ir_interp_ops_checked::test_subi_xori_mini_are_signless",
    "tan": "test_ir_interp_ops_checked::test_hyperbolic_and_tangent_match_float64",
    "tanh": "test_ir_interp_ops::test_float_unary_ops_match_numpy",
    "trunci": "test_ir_interp_ops::test_conversions_round_extend_and_truncate",
    "unpack": "test_ir_interp_ops_checked::test_pack_and_unpack_reinterpret_little_endian_bytes",
    "xori": "test_ir_interp_ops_checked::test_subi_xori_mini_are_signless",
    "yield": "test_ir_interp_ops::test_two_operand_reduce_computes_argmax",
}


@cache
def _tests(module: str) -> dict[str, str]:
    """Test name -> its source (decorators included) in tests/`module`.py."""
    source = (HERE / f"{module}.py").read_text()
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    return found


def _uses(source: str, op: str) -> bool:
    """Whether `source` builds `op`: a builder method (``.negi(``, ``.for_(``) or the op's name as a string."""
    return re.search(rf"\.{op}_?\(|[\"']{op}[\"']", source) is not None


def _asserts(source: str) -> bool:
    """Whether the test's body compares something: an assert, numpy's assert_*, or pytest.raises."""
    return (
        any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(source)))
        or re.search(r"assert_|raises\(", source) is not None
    )


def test_every_interpreter_op_has_a_registered_numeric_check() -> None:
    missing = sorted(interp.SUPPORTED_OPS - set(CHECKED))
    assert not missing, (
        f"ops without a numeric check: {missing}; add one (test_ir_interp_ops_checked.py) and register it"
    )
    assert not set(CHECKED) - interp.SUPPORTED_OPS, "CHECKED names ops the interpreter no longer has"


@pytest.mark.parametrize("op", sorted(CHECKED))
def test_the_registered_check_uses_the_op_and_asserts(op: str) -> None:
    module, name = CHECKED[op].split("::")
    source = _tests(module).get(name)
    assert source is not None, f"{CHECKED[op]} (the check of {op}) does not exist"
    assert _uses(source, op), f"{CHECKED[op]} does not build {op}"
    assert _asserts(source), f"{CHECKED[op]} compares nothing"
    assert name not in {"test_sample_kernel_runs", "test_cutile_corpus_kernel_runs"}, "a run is not a check"


def test_the_registry_check_rejects_a_test_that_reads_no_output() -> None:
    """The rule itself: running a kernel without comparing anything does not count, nor does a test of another op."""
    assert not _asserts("def test_runs():\n    interp.launch(build_sample('negi', LATEST), 1, [x, 16, xi])\n")
    assert _asserts("def test_checks():\n    assert unary('negi', x).tolist() == [-1]\n")
    assert _uses("b.negi(x)\nassert y == 1", "negi")
    assert not _uses("b.negf(x)", "negi")
