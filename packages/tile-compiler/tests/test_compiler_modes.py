"""Ordered partition views, floating-point modes, per-kernel math defaults and per-arch entry hints.

Numerics of the corpus kernels (``tc_corpus_modes``) are checked on the interpreter by the corpus tests, and
tileiras compiles them there; here: the attributes each form puts in the bytecode (read back from the written
bytes), the misuse each refuses at the user's line, and the cache keys the options change.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tile.ir
from tile.compiler import ByArch, CompileOptions, SpecError, by_arch
from tile.compiler._diagnostics import CompileError
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, Specialization, Target
from tile.compiler._typecheck import typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
modes: Any = importlib.import_module("tc_corpus_modes")
bad: Any = importlib.import_module("tc_diag_modes")
CASES = {c.name: c for c in modes.CASES}


def _module(fn: Callable[..., object], options: CompileOptions, arch: str = "sm_90", **consts: Any) -> tile.ir.Module:
    resolved = resolve(parse(fn))
    params = {
        p.name: _row_major(p.dtype.name, len(p.shape))
        for p in resolved.params
        if p.kind in ("tensor", "mut") and p.dtype is not None
    }
    spec = Specialization.make(params=params, consts=consts, options=options)
    target = Target(arch)
    module = lower(typecheck(resolved, spec, target), target).module
    tile.ir.verify(module)
    return tile.ir.read_bytecode(tile.ir.write_bytecode(module, tile.ir.V13_3))  # what tileiras gets


def _row_major(dtype: str, rank: int) -> ArraySpec:
    return ArraySpec(dtype, rank, stride_one=tuple(i == rank - 1 for i in range(rank)))


def _case(name: str, arch: str = "sm_90") -> tile.ir.Module:
    case = CASES[name]
    return _module(case.kernel, case.options, arch, **dict(case.consts))


def _ops(module: tile.ir.Module, name: str) -> Iterator[tile.ir.Operation]:
    return (op for op in module.functions[0].walk() if op.name == name)


def _modes(op: tile.ir.Operation) -> tuple[str, bool]:
    mode = op.attributes.get("rounding_mode")
    return (str(mode) if mode is not None else "", bool(op.attributes.get("flush_to_zero", False)))


# -- ordered partitions ---------------------------------------------------------------------------------------
def _views(module: tile.ir.Module) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    types = [op.results[0].type for op in _ops(module, "make_partition_view")]
    return [(t.tile_shape, t.dim_map) for t in types if isinstance(t, tile.ir.PartitionViewType)]


def test_order_becomes_the_partition_views_dim_map() -> None:
    assert _views(_case("load_transposed")) == [((16, 32), (1, 0)), ((16, 32), (0, 1))]
    assert _views(_case("batched_transposed"))[0] == ((1, 16, 32), (0, 2, 1))


def test_ordered_load_has_no_permute_and_keeps_its_hints() -> None:
    module = _case("load_transposed")
    assert list(_ops(module, "permute")) == []
    (load,) = _ops(module, "load_view_tko")
    want = tile.ir.OptimizationHints.of({"sm_90": {"latency": 3, "allow_tma": True}})
    assert str(load.attributes["optimization_hints"]) == str(want)


def test_hints_on_load_tile_like_and_own_tile_store() -> None:
    module = _case("transposed_like")
    like = next(iter(_ops(module, "load_view_tko")))
    (store,) = _ops(module, "store_view_tko")
    want = tile.ir.OptimizationHints.of
    assert str(like.attributes["optimization_hints"]) == str(want({"sm_90": {"latency": 2, "allow_tma": False}}))
    assert str(store.attributes["optimization_hints"]) == str(want({"sm_90": {"latency": 1, "allow_tma": True}}))


def test_a_loop_over_an_ordered_views_tiles_needs_no_guard() -> None:
    # range(pk.num_tiles[1]) proves the index along that view dim: no in-kernel check (a branch) is emitted.
    module = _case("colsum_transposed")
    assert list(_ops(module, "if")) == []
    assert list(_ops(module, "assert")) == []


def test_a_loop_up_to_a_minimum_with_a_tile_count_needs_no_check_in_the_kernel() -> None:
    module = _case("min_bounded_loop")
    assert list(_ops(module, "if")) == []
    assert list(_ops(module, "assert")) == []
    resolved = resolve(parse(modes.min_bounded_loop))
    spec = Specialization.make(consts={"BM": 16, "BN": 16})
    guards = typecheck(resolved, spec, Target("sm_90")).abi.guards
    # y's index is below x's tile count: left to the launcher, which compares the two counts
    assert any(g.param == "y" and g.bound.kind == "count" and g.bound.param == "x" for g in guards)


def test_a_loop_up_to_a_maximum_keeps_its_check() -> None:
    module = _module(bad.max_bounded_loop, CompileOptions(), B=16)
    assert len(list(_ops(module, "if"))) == 1  # the fault branch of an in-kernel index check


# -- math modes -----------------------------------------------------------------------------------------------
def test_explicit_modes_reach_the_bytecode() -> None:
    got = {(op.name, _modes(op)) for op in _case("math_modes").functions[0].walk() if op.name != "addf"}
    for want in [
        ("divf", ("approx", True)),
        ("divf", ("full", False)),
        ("sqrt", ("approx", False)),
        ("sqrt", ("zero", False)),
        ("rsqrt", ("", True)),
        ("exp2", ("", True)),
        ("exp", ("approx", False)),
        ("tanh", ("full", False)),
        ("subf", ("positive_inf", False)),
        ("mulf", ("negative_inf", True)),
        ("fma", ("nearest_even", True)),
        ("maxf", ("", True)),
        ("minf", ("", False)),
    ]:
        assert want in got, want


def test_kernel_defaults_apply_except_where_the_call_chose() -> None:
    ftz = _case("flush_default")
    assert sorted(_modes(op)[1] for op in _ops(ftz, "mulf")) == [False, True]
    approx = _case("approx_default")
    assert sorted(_modes(op)[0] for op in _ops(approx, "divf")) == ["approx", "nearest_even"]
    assert [_modes(op)[0] for op in _ops(approx, "sqrt")] == ["approx"]
    plain = _module(modes.approx_default, CompileOptions(), B=32)
    assert {_modes(op)[0] for op in _ops(plain, "divf")} == {"nearest_even"}


def test_defaults_skip_ops_without_the_mode_and_non_f32() -> None:
    module = _module(bad.f16_math, CompileOptions(flush_to_zero=True, approx=True), B=32)
    assert all(not _modes(op)[1] for op in module.functions[0].walk())
    assert {_modes(op)[0] for op in _ops(module, "divf")} == {"nearest_even"}


# -- entry hints ----------------------------------------------------------------------------------------------
def _entry_hints(module: tile.ir.Module) -> str:
    hints = module.functions[0].hints
    return str(hints) if hints is not None else ""


@pytest.mark.parametrize(
    ("arch", "want"),
    [
        ("sm_90", {"sm_90": {"occupancy": 2}}),
        ("sm_80", {"sm_80": {"occupancy": 1}}),
        ("sm_100", {"sm_100": {"occupancy": 4, "num_cta_in_cga": 2}}),
    ],
)
def test_by_arch_hints_pick_the_targets_entry(arch: str, want: dict[str, dict[str, int]]) -> None:
    assert _entry_hints(_case("hinted", arch)) == str(tile.ir.OptimizationHints.of(want))


def test_by_arch_without_the_target_or_a_default_gives_no_hint() -> None:
    module = _module(modes.hinted, CompileOptions(occupancy=by_arch(sm_100=4)), "sm_90", B=32)
    assert _entry_hints(module) == ""


@pytest.mark.parametrize(
    "make",
    [
        lambda: by_arch(sm_91=2),
        lambda: by_arch(sm_90=True),
        by_arch,
        lambda: CompileOptions(occupancy=0),
        lambda: CompileOptions(occupancy=by_arch(sm_90=33)),
        lambda: CompileOptions(num_cta_in_cga=by_arch(sm_90=3)),
        lambda: CompileOptions(num_worker_warps=6),
        lambda: CompileOptions(flush_to_zero=1),  # type: ignore[arg-type]  # the point: a non-bool
        lambda: CompileOptions(approx="yes"),  # type: ignore[arg-type]  # the point: a non-bool
    ],
)
def test_invalid_hints_and_modes_are_spec_errors(make: Callable[[], object]) -> None:
    with pytest.raises(SpecError, match=r"must be|tile\.by_arch|hint values are ints") as info:
        make()
    assert any(fix in str(info.value) for fix in (" use ", "must be", "ints", "at least one")), info.value


def test_options_change_the_specialization_key() -> None:
    base = Specialization.make(options=CompileOptions())
    keys = {
        base.key(),
        *(
            Specialization.make(options=o).key()
            for o in (
                CompileOptions(flush_to_zero=True),
                CompileOptions(approx=True),
                CompileOptions(occupancy=2),
                CompileOptions(occupancy=by_arch(sm_90=2)),
                CompileOptions(occupancy=by_arch(sm_90=2, sm_100=4)),
                CompileOptions(num_cta_in_cga=by_arch(sm_90=2)),
            )
        ),
    }
    assert len(keys) == 7
    assert Specialization.make(options=CompileOptions(occupancy=by_arch(sm_100=4, sm_90=2))).key() in keys
    assert ByArch((("sm_90", 2),)).get("sm_100") is None


# -- misuse at the user's line --------------------------------------------------------------------------------
def _marked_line(fn: Callable[..., object]) -> int:
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, line in enumerate(lines) if "# <-" in line]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("order_not_permutation", "must be a permutation of the dims 0..1"),
        ("order_wrong_length", "must be a permutation of the dims 0..1"),
        ("order_not_constant", "order= must be a compile-time tuple of ints"),
        ("order_on_output", "order= is for inputs"),
        ("ftz_on_f16", "flush_to_zero works only on f32 tiles, tile.exp2 got f16"),
        ("approx_on_f16", "rounding='approx' works only on f32 tiles"),
        ("rounding_on_sin", "tile.sin takes no rounding="),
        ("ftz_on_exp", "tile.exp takes no flush_to_zero"),
        ("bad_rounding_name", "rounding= of tile.sqrt must be one of"),
        ("full_on_sqrt", "rounding= of tile.sqrt must be one of"),
        ("ftz_not_bool", "flush_to_zero= of tile.rsqrt must be a compile-time True or False"),
        ("modes_on_ints", "apply to float tiles, got i32"),
        ("ftz_on_int_maximum", "flush_to_zero= of tile.maximum applies to float tiles, got i32"),
        ("bad_latency_on_load_tile_like", "latency must be a compile-time int in 1..10"),
    ],
)
def test_misuse_is_a_compile_error_at_the_users_line(name: str, fragment: str) -> None:
    fn = getattr(bad, name)
    with pytest.raises(CompileError) as info:
        typecheck(resolve(parse(fn)), Specialization.make(consts={"B": 16}), Target("sm_90"))
    assert fragment in info.value.message, info.value.message
    assert info.value.line == _marked_line(fn)
    assert info.value.filename == bad.__file__
