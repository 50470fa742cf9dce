"""Programmatic dependent launch in the compiler: ``CompileOptions(pdl=True)`` makes the kernel's first op the
grid-dependency wait (``gdc_wait_tko``) and roots every memory token chain in it, the ABI says so
(``waits_prior_grid``) for the launcher, ``tile.launch_dependents`` lowers to ``gdc_launch_dependents_tko``, and
both need bytecode 13.4 (an older version is refused at the user's line). tileiras assembles them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tile.ir
from tile.compiler import CompileOptions, SpecError, compile_kernel
from tile.compiler._diagnostics import CompileError
from tile.compiler._lower import lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, KernelABI, Specialization, Target
from tile.compiler._typecheck import typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
kernels: Any = importlib.import_module("tc_corpus_pdl")

_MEMORY = ("load_view_tko", "store_view_tko", "load_ptr_tko", "store_ptr_tko", "atomic_rmw_tko", "atomic_cas_tko")
_CONSTS: dict[str, dict[str, int]] = {"scale_then_release": {"B": 16}, "rowsum_loop": {"BM": 8, "BN": 16}}


def _spec(fn: Callable[..., object], pdl: bool) -> Specialization:
    resolved = resolve(parse(fn))
    params = {
        p.name: ArraySpec(
            p.dtype.name, len(p.shape), stride_one=tuple(i == len(p.shape) - 1 for i in range(len(p.shape)))
        )
        for p in resolved.params
        if p.kind in ("tensor", "mut") and p.dtype is not None
    }
    return Specialization.make(params=params, consts=_CONSTS[fn.__name__], options=CompileOptions(pdl=pdl))


def _typed(fn: Callable[..., object], pdl: bool, version: tuple[int, int] | None = None) -> Any:
    return typecheck(resolve(parse(fn)), _spec(fn, pdl), Target("sm_90"), version)


def _module(fn: Callable[..., object], pdl: bool) -> tile.ir.Module:
    module = lower(_typed(fn, pdl), Target("sm_90")).module
    tile.ir.verify(module, tile.ir.V13_4)
    return tile.ir.read_bytecode(tile.ir.write_bytecode(module, tile.ir.V13_4))  # what tileiras gets


def _names(module: tile.ir.Module) -> list[str]:
    return [op.name for op in module.functions[0].walk()]


@pytest.mark.parametrize("name", sorted(_CONSTS))
def test_the_wait_comes_first_and_roots_every_memory_token(name: str) -> None:
    module = _module(getattr(kernels, name), pdl=True)
    names = _names(module)
    assert names[0] == "gdc_wait_tko"
    assert names.count("gdc_wait_tko") == 1
    # Tokens come only from make_token, the wait, memory ops and joins of them (loops carry them as block
    # arguments): with no make_token left, every access is ordered after the wait.
    assert "make_token" not in names
    accesses = [op for op in module.functions[0].walk() if op.name in _MEMORY]
    assert accesses
    for op in accesses:
        assert any(isinstance(v.type, tile.ir.TokenType) for v in op.operands if v is not None), op.name


@pytest.mark.parametrize("name", sorted(_CONSTS))
def test_without_pdl_the_kernel_starts_from_a_plain_token(name: str) -> None:
    typed = _typed(getattr(kernels, name), pdl=False)
    assert typed.abi.waits_prior_grid is False
    names = _names(lower(typed, Target("sm_90")).module)
    assert "gdc_wait_tko" not in names
    assert names[0] == "make_token"


def test_launch_dependents_lowers_to_its_op_and_the_abi_tells_the_launcher() -> None:
    typed = _typed(kernels.scale_then_release, pdl=True)
    assert typed.abi.waits_prior_grid is True
    names = _names(lower(typed, Target("sm_90")).module)
    assert names.count("gdc_launch_dependents_tko") == 1
    assert names.index("gdc_launch_dependents_tko") > names.index("store_view_tko")  # where the source put it


def test_the_abi_flag_survives_the_disk_cache_format() -> None:
    abi = _typed(kernels.scale_then_release, pdl=True).abi
    assert KernelABI.from_json(abi.to_json()) == abi
    old = {k: v for k, v in abi.to_json().items() if k != "waits_prior_grid"}  # written before the field existed
    assert KernelABI.from_json(old).waits_prior_grid is False


def test_pdl_is_part_of_the_cache_key_and_must_be_a_bool() -> None:
    assert _spec(kernels.scale_then_release, True).key() != _spec(kernels.scale_then_release, False).key()
    with pytest.raises(SpecError, match=r"CompileOptions\.pdl = 1 must be True or False"):
        CompileOptions(pdl=1)  # type: ignore[arg-type]


def test_before_13_4_pdl_and_launch_dependents_are_refused_at_the_users_line() -> None:
    with pytest.raises(CompileError, match=r"pdl=True.*needs Tile IR bytecode 13\.4.*written at 13\.3") as info:
        _typed(kernels.scale_then_release, pdl=True, version=(13, 3))
    assert info.value.loc is not None
    assert info.value.loc.line == _line(kernels.scale_then_release, "def ")
    with pytest.raises(CompileError, match=r"tile\.launch_dependents .*needs Tile IR bytecode 13\.4") as info:
        _typed(kernels.scale_then_release, pdl=False, version=(13, 3))
    assert info.value.loc is not None
    assert info.value.loc.line == _line(kernels.scale_then_release, "tile.launch_dependents()")
    assert _typed(kernels.scale_then_release, pdl=True, version=(13, 4)).abi.waits_prior_grid


def _line(fn: Callable[..., object], text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.requires_tileiras
@pytest.mark.parametrize("name", sorted(_CONSTS))
def test_tileiras_assembles_a_pdl_kernel(name: str) -> None:
    fn = getattr(kernels, name)
    compiled = compile_kernel(fn, _spec(fn, True), "sm_90", cache=False)
    assert compiled.cubin
    assert compiled.abi.waits_prior_grid
    assert compiled.bytecode_version >= (13, 4)


@pytest.mark.parametrize("name", sorted(_CONSTS))
def test_the_order_check_refuses_a_kernel_whose_chains_start_elsewhere(name: str) -> None:
    from tile.compiler._pdl_check import PdlOrderError, check_entry_wait

    check_entry_wait(_module(getattr(kernels, name), pdl=True).functions[0])
    plain = lower(_typed(getattr(kernels, name), pdl=False), Target("sm_90")).module.functions[0]
    with pytest.raises(PdlOrderError, match=r"its first op is make_token, not the entry wait"):
        check_entry_wait(plain)  # its chains start at make_token: launched early, nothing would hold them back
