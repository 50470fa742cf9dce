"""Stage typecheck: the entry ABI and prologue, promotion and broadcasting, control flow, tokens, inlining."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tile.compiler._diagnostics import CompileError
from tile.compiler._guards import Bound
from tile.compiler._kir import AssumeBounded, AssumeDivBy, Block, Op
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import (
    AbiSlot,
    ArraySpec,
    CompileOptions,
    KernelABI,
    ScalarSpec,
    SpecError,
    Specialization,
    Target,
)
from tile.compiler._typecheck import TypedKernel, typecheck
from tile.compiler._types import DTYPES, PtrType, TensorViewType, TileType

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
k: Any = importlib.import_module("tc_unit_kernels")


def check(fn: Any, target: str = "sm_90", **kw: Any) -> TypedKernel:
    params = kw.pop("params", {})
    options = kw.pop("options", None)
    own_grid = kw.pop("own_grid", False)
    spec = Specialization.make(params=params, consts=kw, options=options, own_grid=own_grid)
    return typecheck(resolve(parse(fn)), spec, Target(target))


def walk(block: Block) -> Iterator[Op]:
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from walk(region)


def shape(op: Op) -> tuple[int, ...]:
    ty = op.results[0].type
    assert isinstance(ty, TileType)
    return ty.shape


def names(t: TypedKernel) -> list[str]:
    return [op.name for op in walk(t.ir.body)]


def top(t: TypedKernel) -> list[str]:
    return [op.name for op in t.ir.body.ops]


def test_abi_slots_per_parameter_kind() -> None:
    t = check(k.every_param_kind, BM=16, BN=32, k=3, params={"x": ArraySpec("f16", 2, index_dtype="i64")})
    assert t.abi.entry == "every_param_kind"
    assert [(s.param, s.role, s.axis, s.dtype) for s in t.abi.slots] == [
        ("z", "base", -1, "ptr<f32>"),
        ("z", "shape", 0, "i32"),
        ("z", "shape", 1, "i32"),
        ("z", "stride", 0, "i32"),
        ("z", "stride", 1, "i32"),
        ("x", "base", -1, "ptr<f16>"),
        ("x", "shape", 0, "i64"),
        ("x", "shape", 1, "i64"),
        ("x", "stride", 0, "i64"),
        ("x", "stride", 1, "i64"),
        ("n", "value", -1, "i32"),
        ("s", "value", -1, "f32"),
        ("flag", "value", -1, "i32"),
    ]
    assert [p.type for p in t.ir.params][:1] == [TileType(PtrType(k.f32))]
    assert len(t.ir.params) == len(t.abi.slots)


def test_bool_scalar_is_compared_with_zero() -> None:
    t = check(k.every_param_kind, BM=16, BN=32, k=3)
    flag = t.ir.params[-1]
    cmp = next(op for op in walk(t.ir.body) if op.name == "cmpi" and flag in op.flat_operands())
    assert cmp.attrs["comparison_predicate"] == "not_equal"


def test_tensor_views_carry_static_extents_and_unit_strides() -> None:
    spec = {"x": ArraySpec("f16", 2, stride_one=(False, True), shape_div=(16, 16), stride_div=(8, 1), base_div=16)}
    t = check(k.every_param_kind, BM=16, BN=32, k=3, params=spec)
    views = [op.results[0].type for op in walk(t.ir.body) if op.name == "make_tensor_view"]
    assert views[1] == TensorViewType(k.f16, (None, 64), (None, 1))
    assumes = [op.attrs["predicate"] for op in walk(t.ir.body) if op.name == "assume"]
    assert AssumeDivBy(16) in assumes
    assert AssumeDivBy(8) in assumes
    assert AssumeBounded(0, None) in assumes


def test_max_divisibility_caps_assumptions() -> None:
    spec = {"x": ArraySpec("f16", 2, shape_div=(16, 16), base_div=16)}
    t = check(k.every_param_kind, BM=16, BN=32, k=3, params=spec, options=CompileOptions(max_divisibility=4))
    divs = {
        op.attrs["predicate"].divisor
        for op in walk(t.ir.body)
        if op.name == "assume" and isinstance(op.attrs["predicate"], AssumeDivBy)
    }
    assert divs == {4}


def test_scalar_spec_changes_the_scalar_type() -> None:
    t = check(k.every_param_kind, BM=16, BN=32, k=3, params={"n": ScalarSpec("i64")})
    assert AbiSlot("n", "value", -1, "i64") in t.abi.slots


def test_promotion_converts_and_folds_constants() -> None:
    t = check(k.promotes, B=64)
    ops = names(t)
    assert "ftof" in ops
    assert "exti" in ops
    assert "itof" in ops
    consts = [op.attrs["value"] for op in walk(t.ir.body) if op.name == "constant"]
    assert 128 in consts
    assert all(shape(op) == (64,) for op in walk(t.ir.body) if op.name in ("addf", "addi", "mulf"))


def test_broadcasting_reshapes_then_broadcasts() -> None:
    t = check(k.broadcasts, BM=16, BN=32)
    ops = list(walk(t.ir.body))
    reshape = next(op for op in ops if op.name == "reshape")
    bcast = next(op for op in ops if op.name == "broadcast")
    assert shape(reshape) == (1, 32)
    assert shape(bcast) == (16, 32)


def test_runtime_if_yields_the_reassigned_variable() -> None:
    t = check(k.runtime_if, B=64)
    (op,) = [op for op in t.ir.body.ops if op.name == "if"]
    assert [r.type for r in op.results] == [TileType(k.f32, (64,))]
    assert [o.name for o in op.regions[0].ops][-1] == "yield"
    assert op.regions[1].ops[-1].name == "yield"


def test_constant_if_keeps_one_branch() -> None:
    on, off = check(k.static_if, B=64, on=True), check(k.static_if, B=64, on=False)
    assert "if" not in names(on)
    assert "addf" in names(on)
    assert "addf" not in names(off)


def test_loops_carry_values_and_only_the_tokens_they_need() -> None:
    (loop,) = [op for op in check(k.carried_loop, B=64).ir.body.ops if op.name == "for"]
    assert [str(r.type) for r in loop.results] == ["tile<64xf32>"]
    (loop,) = [op for op in check(k.storing_loop, B=64).ir.body.ops if op.name == "for"]
    assert [str(r.type) for r in loop.results] == ["token"]
    store = next(op for op in walk(loop.regions[0]) if op.name == "store_view_tko")
    assert store.operands[-1] is loop.regions[0].args[1]


def test_for_with_break_becomes_a_loop_op() -> None:
    t = check(k.breaking_loop, B=64)
    assert "for" not in top(t)
    assert "loop" in top(t)
    assert "break" in names(t)


def test_helpers_are_inlined() -> None:
    t = check(k.inlines, B=64)
    assert names(t).count("maxf") == 1
    assert names(t).count("minf") == 1
    assert "mulf" in names(t)


def test_raw_pointers_need_an_unchecked_kernel() -> None:
    with pytest.raises(CompileError, match="raw pointer parameter 'p' is only allowed"):
        check(k.raw_pointer, B=64)
    t = check(k.raw_pointer, B=64, options=CompileOptions(unchecked=True))
    assert "load_ptr_tko" in names(t)
    assert "offset" in names(t)


def test_integer_reductions_use_signed_ops_and_identities() -> None:
    t = check(k.reduces, B=16)
    red = next(op for op in walk(t.ir.body) if op.name == "reduce")
    assert red.attrs["identities"] == [-(2**31)]
    assert red.regions[0].ops[0].attrs["signedness"] == "signed"
    assert len(red.regions[0].args) == 2


def test_entry_hints_come_from_the_options() -> None:
    t = check(k.static_if, B=64, on=True, options=CompileOptions(occupancy=2, num_cta_in_cga=2))
    assert t.ir.hints == {"sm_90": {"occupancy": 2, "num_cta_in_cga": 2}}
    cpu = check(k.static_if, "cpu", B=64, on=True, options=CompileOptions(occupancy=2))
    assert cpu.ir.hints == {"default": {"occupancy": 2}}


def test_ops_carry_user_locations_and_dump_prints_them() -> None:
    t = check(k.runtime_if, B=64)
    locs = {op.loc.filename for op in walk(t.ir.body) if op.loc is not None}
    assert locs == {k.__file__}
    text = t.dump()
    assert text.startswith("entry @runtime_if(")
    assert "if " in text
    assert "yield" in text


def test_dtype_generics_bind_from_the_specialization() -> None:
    by_name = typecheck(
        resolve(parse(k.generic_dtype)), Specialization.make(consts={"B": 64}, dtypes={"T": "f16"}), Target("sm_90")
    )
    assert by_name.abi.slots[0].dtype == "ptr<f16>"
    by_array = check(k.generic_dtype, B=64, params={"x": ArraySpec("bf16", 1)})
    assert [s.dtype for s in by_array.abi.slots if s.role == "base"] == ["ptr<bf16>", "ptr<bf16>"]
    with pytest.raises(CompileError, match="dtype generic 'T' of parameter 'z' has no value"):
        check(k.generic_dtype, B=64)


def test_missing_array_facts_default_to_row_major() -> None:
    t = check(k.carried_loop, B=64)
    views = [op.results[0].type for op in walk(t.ir.body) if op.name == "make_tensor_view"]
    assert all(isinstance(v, TensorViewType) and v.strides[-1] == 1 for v in views)


def test_a_loop_body_whose_branches_all_exit_still_ends_in_a_terminator() -> None:
    from tile import ir
    from tile.compiler._lower import lower

    t = check(k.both_branches_exit, B=64)
    (loop,) = [op for op in t.ir.body.ops if op.name == "loop"]
    assert loop.regions[0].ops[-1].name == "continue"
    ir.verify(lower(t, Target("sm_90")).module)


def _asserts(t: TypedKernel) -> list[tuple[int, str]]:
    """The index guards of ``t`` with their loop depth: asserts (CPU target) or faulting branches (GPU targets)."""

    def faults(op: Op) -> bool:
        return op.name == "if" and any(inner.name == "store_ptr_tko" for inner in op.regions[1].ops)

    def visit(block: Block, depth: int) -> Iterator[tuple[int, str]]:
        for op in block.ops:
            if op.name == "assert" or faults(op):
                yield depth, op.attrs.get("message", "")
                continue
            for region in op.regions:
                yield from visit(region, depth + 1)

    return list(visit(t.ir.body, 0))


def test_host_known_indices_leave_their_guard_to_the_launcher() -> None:
    # A block id is below the grid size, which the launcher knows: "grid.x <= x's tile count" becomes a HostGuard and
    # the kernel carries no check (a guard branch makes tileiras drop its warp-specialised GEMM pipeline).
    for target in ("sm_90", "cpu"):
        t = check(k.k_loop, target, B=16)
        assert _asserts(t) == []
        (guard,) = t.abi.guards
        assert (guard.bound, guard.param, guard.tile, guard.dim) == (Bound("grid", dim=0), "x", (16, 16), 0)
        assert guard.where.endswith("tc_unit_kernels.py:106:21")  # the load's line and column
    (guard,) = check(k.carried_loop, B=16).abi.guards  # load_tile_like(x, z): x may be smaller than z
    assert (guard.bound, guard.param) == (Bound("grid", dim=0), "x")


def test_indices_computed_at_run_time_keep_an_in_kernel_guard() -> None:
    for target in ("sm_90", "cpu"):
        t = check(k.reads_past_the_end, target, B=16)  # block_id + 1: the host cannot bound it
        assert t.abi.guards == ()
        ((depth, message),) = _asserts(t)
        assert depth == 0
        if target == "cpu":
            assert message.startswith("tile index out of range for x.partition((16,)) at ")


def test_gpu_guards_fault_without_a_printf_call() -> None:
    # assert lowers to a vprintf call on the GPU, which slowed a Hopper GEMM 1.5x even outside its K loop.
    ops = [op.name for op in walk(check(k.reads_past_the_end, B=16).ir.body)]
    assert "assert" not in ops
    assert "store_ptr_tko" in ops
    from tile import ir
    from tile.compiler._lower import lower

    ir.verify(lower(check(k.reads_past_the_end, B=16), Target("sm_90")).module)


def test_debug_guards_make_gpu_guards_report_the_failed_access() -> None:
    """``debug_guards`` (``TILE_DEBUG_GUARDS=1``) trades the silent fault for an assert naming the access."""
    import numpy as np

    from tile.compiler._lower import lower
    from tile.ir import interp

    t = check(k.reads_past_the_end, B=16, options=CompileOptions(debug_guards=True))
    ops = [op.name for op in walk(t.ir.body)]
    assert "assert" in ops
    assert "store_ptr_tko" not in ops
    ((_, message),) = _asserts(t)
    assert message.startswith("tile index out of range for x.partition((16,)) at ")
    module = lower(t, Target("sm_90")).module
    x, z = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    with pytest.raises(interp.KernelAssertionError, match=r"tile index out of range for x.partition\(\(16,\)\)"):
        interp.launch(module, (4,), [z, 64, 1, x, 64, 1])
    assert CompileOptions(debug_guards=True) != CompileOptions()  # a separate specialization, so separate code
    with pytest.raises(SpecError, match="debug_guards"):
        CompileOptions(debug_guards=1)  # type: ignore[arg-type]  # the misuse under test


def test_grouped_tiles_need_no_guard_in_the_tile_loop() -> None:
    # z.tiles() coordinates are below z's tile counts: "z's count <= x's count" is left to the launcher.
    t = check(k.grouped_tiles, B=16)
    assert _asserts(t) == []
    (guard,) = t.abi.guards
    assert (guard.bound, guard.param, guard.dim) == (Bound("count", "z", (16, 16), 0), "x", 0)
    assert KernelABI.from_json(json.loads(json.dumps(t.abi.to_json()))) == t.abi  # survives the disk cache


def test_the_tile_schedule_cannot_wrap_around() -> None:
    # The tile numbers are 64-bit: in 32 bits "t + block count" could wrap to a negative tile number, whose
    # coordinates are trusted in range; the coordinates themselves are narrowed back to the count's 32 bits.
    t = check(k.grouped_tiles, B=16)
    tiles_loop, k_loop = [op for op in walk(t.ir.body) if op.name == "for"]
    assert {str(v.type) for v in tiles_loop.operands[:3]} == {str(TileType(DTYPES["i64"]))}  # type: ignore[union-attr]
    assert str(k_loop.operands[0].type) == str(TileType(DTYPES["i32"]))  # type: ignore[union-attr]  # step 1: 32 bits
    assert _asserts(t) == []


def test_the_tile_schedule_divides_unsigned() -> None:
    # Tile numbers and counts are non-negative, so the unravel uses unsigned division (tileiras expands a signed
    # 64-bit one, plus the floor-mod sign fix-up, into more code): no signed divi/remi and no select in the schedule,
    # and the slowest coordinate is what is left after the others (t < total), with no division of its own.
    t = check(k.grouped_tiles, B=16)
    tiles_loop = next(op for op in walk(t.ir.body) if op.name == "for")
    body = tiles_loop.regions[0].ops[: next(i for i, o in enumerate(tiles_loop.regions[0].ops) if o.name == "for")]
    divisions = [o for o in body if o.name in ("divi", "remi")]
    assert len(divisions) == 4  # grouped: t // per_group, t % per_group, within % size_m, within // size_m
    assert all(o.attrs["signedness"] == "unsigned" for o in divisions)
    assert all(o.attrs.get("rounding", "zero") == "zero" for o in divisions)
    assert "select" not in [o.name for o in body]


def test_the_tile_schedule_leaves_the_slowest_coordinate_undivided() -> None:
    # Row-major unravel of t over counts (c0, c1, c2): t % c2, (t // c2) % c1, and t // c2 // c1 is already below c0.
    t = check(k.walks_rank3, B=16)
    tiles_loop = next(op for op in walk(t.ir.body) if op.name == "for")
    divisions = [o.name for o in tiles_loop.regions[0].ops if o.name in ("divi", "remi")]
    assert sorted(divisions) == ["divi", "divi", "remi", "remi"]


@pytest.mark.parametrize("kernel", ["walks_rank3", "grouped_tiles"])
def test_a_walk_on_its_own_grid_is_one_guarded_tile(kernel: str) -> None:
    # One block per tile (a launch without .grid()): the walk is "if first < total: body", no loop around it (as a
    # loop run once, tileiras still pipelined its loads across iterations: barriers and waits, SASS).
    own = check(getattr(k, kernel), B=16, own_grid=True)
    top = [op.name for op in own.ir.body.ops]
    assert "if" in top
    assert "for" not in top
    (walk_if,) = [op for op in own.ir.body.ops if op.name == "if"]
    cond = walk_if.operands[0]
    test = next(op for op in own.ir.body.ops if cond in op.results)
    assert (test.name, test.attrs["comparison_predicate"]) == ("cmpi", "less_than")
    assert [op.name for op in walk(walk_if.regions[0]) if op.name.startswith("store")]  # the store is inside it
    assert _asserts(own) == []
    anywhere = [op.name for op in check(getattr(k, kernel), B=16).ir.body.ops]
    assert "for" in anywhere  # any grid: the walk loops


@pytest.mark.parametrize(
    ("kernel", "rank", "own_grid", "index", "divides_in"),
    [
        ("walks_rank3", 3, True, "i32", "i32"),
        ("walks_rank3", 3, True, "i64", "i64"),
        ("walks_rank3", 3, False, "i32", "i64"),
        ("grouped_tiles", 2, True, "i32", "i64"),  # group * (dim 1's tile count) may pass 2**31: stays 64-bit
    ],
)
def test_an_own_grid_walk_unravels_in_32_bits_when_the_output_is_i32(
    kernel: str, rank: int, own_grid: bool, index: str, divides_in: str
) -> None:
    # One block per tile of an output with i32 extents: the tile number is below the tile count <= 2**31 (an injective
    # output of reach < 2**31 has no more elements), so the unravel divides in 32 bits; tileiras calls a division
    # routine per 64-bit division (SASS). i64 extents, or any grid (a loop whose t + step could pass 2**31), keep 64.
    params = {"z": ArraySpec("f32", rank, index_dtype=index)}
    t = check(getattr(k, kernel), B=16, own_grid=own_grid, params=params)
    # the unravel's divisions (unsigned: the tile counts' cdivs are signed), e.g. t % c2, (t // c2) % c1, t // c2 // c1
    divisions = [o for o in walk(t.ir.body) if o.name in ("divi", "remi") and o.attrs["signedness"] == "unsigned"]
    assert len(divisions) == 4
    assert {str(o.results[0].type) for o in divisions} == {str(TileType(DTYPES[divides_in]))}
    assert _asserts(t) == []


def test_a_walk_that_continues_stays_a_loop_on_its_own_grid() -> None:
    # continue/break/return leave the walk's body early: they need the loop, so the own-grid form keeps it.
    top = [op.name for op in check(k.walks_and_skips, B=16, own_grid=True).ir.body.ops]
    assert "for" in top


@pytest.mark.parametrize(("kernel", "wide"), [("k_loop", False), ("k_loop_step_2", True), ("k_loop_huge_step", True)])
def test_a_strided_trusted_loop_index_cannot_wrap_around(kernel: str, wide: bool) -> None:
    # range(lo, p.num_tiles[d], step) trusts its variable in [lo, count); a 32-bit "iv + step" past 2**31 - 1 would
    # wrap to a negative index, so a step above 1 gets a 64-bit variable (still no guard in the kernel).
    t = check(getattr(k, kernel), B=16)
    (loop,) = [op for op in walk(t.ir.body) if op.name == "for"]
    assert str(loop.operands[0].type) == str(TileType(DTYPES["i64" if wide else "i32"]))  # type: ignore[union-attr]
    assert _asserts(t) == []


def test_constant_index_is_checked_by_the_launcher() -> None:
    t = check(k.const_index, B=16)
    assert _asserts(t) == []
    (guard,) = t.abi.guards
    assert guard.bound == Bound("const", value=4)  # index 3: four tiles needed
    assert not guard.holds({"x": (48,)}, (1, 1, 1))
    assert guard.holds({"x": (49,)}, (1, 1, 1))


def test_loop_up_to_a_constant_is_checked_by_the_launcher() -> None:
    t = check(k.loop_to_const, B=16)
    assert _asserts(t) == []
    (guard,) = t.abi.guards
    assert guard.bound == Bound("const", value=4)


def test_loop_up_to_a_run_time_scalar_keeps_its_guard_in_the_kernel() -> None:
    t = check(k.loop_to_scalar, B=16)
    assert t.abi.guards == ()
    assert len(_asserts(t)) == 1


def test_unchecked_kernels_get_no_guards_at_all() -> None:
    t = check(k.k_loop, B=16, options=CompileOptions(unchecked=True))
    assert t.abi.guards == ()
    assert _asserts(t) == []


def test_out_of_range_partition_index_traps_in_safe_kernels() -> None:
    import numpy as np

    from tile.compiler._lower import lower
    from tile.ir import interp

    x = np.arange(64, dtype=np.float32)
    z = np.zeros(64, np.float32)
    module = lower(check(k.reads_past_the_end, "cpu", B=16), Target.cpu()).module
    with pytest.raises(interp.KernelAssertionError, match=r"tile index out of range for x.partition\(\(16,\)\)"):
        interp.launch(module, (4,), [z, 64, 1, x, 64, 1])
    module = lower(check(k.reads_past_the_end, B=16), Target("sm_90")).module
    with pytest.raises(
        interp.MemoryAccessError, match=r"outside every mapped buffer \(at .*tc_unit_kernels\.py:\d+:\d+"
    ):  # GPU faults too
        interp.launch(module, (4,), [z, 64, 1, x, 64, 1])
    assert _asserts(check(k.reads_past_the_end, B=16, options=CompileOptions(unchecked=True))) == []


def test_a_tile_shape_beyond_what_tile_ir_encodes_is_a_compile_error() -> None:
    """Tile IR encodes each tile extent as a signed 32-bit int: a larger shape is refused at its source line instead
    of overflowing in the bytecode writer."""
    with pytest.raises(CompileError, match=r"tile dimensions must be at most 2\*\*30"):
        check(k.huge_tile, "cpu", B=16)


def test_the_abi_carries_each_output_tile_shape_and_the_static_extents() -> None:
    # What the code's addressing assumes beyond the slots; the launcher checks each partition and tensor against it.
    t = check(k.every_param_kind, BM=16, BN=32, k=3)
    assert t.abi.tiles == (("z", (16, 32)),)
    assert t.abi.static_extents == (("x", (None, 64)),)
    assert check(k.walks_rank3, B=8).abi.tiles == (("z", (1, 8, 8)),)
    assert check(k.inlines, B=64).abi.static_extents == ()
    assert KernelABI.from_json(json.loads(json.dumps(t.abi.to_json()))) == t.abi
