"""Stage lower: typed kernel IR to tile.ir (types, attributes, regions, locations, hints), verified and written;
with tileiras, the disassembly shows cuTile's op pattern for a vector add."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tile import ir
from tile.compiler._lower import LoweredKernel, ir_type, lower
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import ArraySpec, CompileOptions, Specialization, Target
from tile.compiler._typecheck import typecheck
from tile.compiler._types import DTYPES, PartitionViewType, PtrType, TensorViewType, TileType, TokenType

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
k: Any = importlib.import_module("tc_unit_kernels")
ew: Any = importlib.import_module("tc_corpus_elementwise")
red: Any = importlib.import_module("tc_corpus_reduce")


def lowered(fn: Any, arch: str = "sm_90", options: CompileOptions | None = None, **consts: Any) -> LoweredKernel:
    spec = Specialization.make(
        params={"x": ArraySpec("f32", 1, stride_one=(True,)), "y": ArraySpec("f32", 1, stride_one=(True,))}
        if fn is ew.add
        else {},
        consts=consts,
        options=options,
    )
    target = Target(arch)
    return lower(typecheck(resolve(parse(fn)), spec, target), target)


def test_types_map_onto_tile_ir() -> None:
    f32, f16 = DTYPES["f32"], DTYPES["f16"]
    assert ir_type(TileType(f32, (4, 8))) == ir.tile((4, 8), ir.f32)
    assert ir_type(TileType(PtrType(f16))) == ir.scalar(ir.ptr(ir.f16))
    assert ir_type(TokenType()) == ir.token
    view = TensorViewType(f32, (None, 64), (64, 1))
    assert ir_type(view) == ir.TensorViewType(ir.f32, (None, 64), (64, 1))
    part = ir_type(PartitionViewType((16, 16), view, "neg_inf"))
    assert part == ir.PartitionViewType((16, 16), ir_type(view), (0, 1), ir.Padding.NEG_INF)  # type: ignore[arg-type]  # a view


def test_lowered_add_has_the_abi_signature_and_verifies() -> None:
    out = lowered(ew.add, B=128)
    (fn,) = out.module.functions
    assert fn.name == "add"
    assert [str(p.type) for p in fn.params] == ["tile<ptr<f32>>", "tile<i32>", "tile<i32>"] * 3
    assert out.abi.entry == "add"
    ir.verify(out.module)
    assert "entry @add" in out.dump()


def test_ops_get_debug_locations_in_the_users_file() -> None:
    out = lowered(ew.add, B=128)
    locs = [op.loc for op in out.module.functions[0].walk() if op.name == "addf"]
    (loc,) = locs
    assert isinstance(loc, ir.DILoc)
    assert loc.filename == ew.__file__
    source = Path(ew.__file__).read_text().splitlines()[loc.line - 1]
    assert "z.store(tx + ty)" in source


def test_attributes_are_translated() -> None:
    out = lowered(red.row_argmax, BM=16, N=128)
    ops = list(out.module.functions[0].walk())
    reduce = next(op for op in ops if op.name == "reduce")
    idents = reduce.attributes["identities"]
    assert isinstance(idents, ir.ArrayAttr)
    assert [type(a).__name__ for a in idents.elements] == ["FloatAttr", "IntegerAttr"]
    assert len(reduce.regions[0].block.args) == 4
    const = next(op for op in ops if op.name == "constant")
    assert isinstance(const.attributes["value"], ir.DenseElementsAttr)
    assume = next(op for op in ops if op.name == "assume")
    assert isinstance(assume.attributes["predicate"], (ir.DivBy, ir.Bounded))


def test_entry_hints_are_per_arch() -> None:
    out = lowered(k.static_if, "sm_100", CompileOptions(occupancy=2), B=64, on=True)
    hints = out.module.functions[0].hints
    assert hints is not None
    assert hints.to_dict() == {"sm_100": {"occupancy": 2}}


def test_bytecode_round_trips_through_the_reader() -> None:
    out = lowered(red.row_cumsum, BM=16, N=128)
    data = bytes(ir.write_bytecode(out.module, ir.V13_3))
    back = ir.read_bytecode(data)
    names = [op.name for op in back.functions[0].walk()]
    assert names == [op.name for op in out.module.functions[0].walk()]


def _disasm() -> Path:
    spec = importlib.util.find_spec("nvidia")
    assert spec is not None  # the requires_tileiras marker found the package
    assert spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "cu13" / "bin" / "tileirdisasm"


@pytest.mark.requires_tileiras
def test_vector_add_disassembles_to_cutiles_op_pattern(tmp_path: Path) -> None:
    path = tmp_path / "add.tilebc"
    path.write_bytes(bytes(ir.write_bytecode(lowered(ew.add, B=128).module, ir.V13_3)))
    text = subprocess.run([str(_disasm()), str(path)], capture_output=True, text=True, check=True).stdout
    ops = [
        line.split("=")[1].split()[0] if "=" in line else line.split()[0]
        for line in text.splitlines()[1:-1]
        if line.strip()
    ]
    assert ops.count("make_tensor_view") == 3
    assert ops.count("load_view_tko") == 2
    assert ops.count("store_view_tko") == 1
    assert ops[0] == "make_token"
    assert "tensor_view<?xf32, strides=[1]>" in text
    assert "partition_view<tile=(128)" in text
    assert "addf" in ops


def test_inlined_helper_ops_get_call_site_locations() -> None:
    out = lowered(k.inlines, B=64)
    fn = out.module.functions[0]
    maxf = next(op for op in fn.walk() if op.name == "maxf")
    loc = maxf.loc
    assert isinstance(loc, ir.CallSite)  # lib.clamp's line, inlined at the kernel's call
    inner = loc.callee
    assert isinstance(inner, ir.DILoc)
    assert inner.filename.endswith("tc_corpus_lib.py")
    caller = loc.caller
    assert isinstance(caller, ir.DILoc)
    assert caller.filename == k.__file__
    ir.verify(out.module)
    assert bytes(ir.write_bytecode(out.module, ir.V13_3))[:8] == b"\x7fTileIR\x00"


def test_nested_helpers_nest_call_sites() -> None:
    helpers: Any = importlib.import_module("tc_corpus_helpers")
    out = lowered(helpers.clamp_kernel, B=128, alpha=0.5)
    depths = set()
    for op in out.module.functions[0].walk():
        depth, loc = 0, op.loc
        while isinstance(loc, ir.CallSite):
            depth, loc = depth + 1, loc.callee
        depths.add(depth)
    assert depths >= {0, 1, 2}  # kernel ops, unit_scale/scaled_clamp bodies, and clamp inside scaled_clamp
