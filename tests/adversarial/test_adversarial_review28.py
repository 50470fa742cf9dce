"""Review 28: Tile IR that reaches the CPU interpreter without passing the verifier, and pointer tiles the verifier
let through. Each hole's test names it and failed before its fix.

Holes found and fixed:

- Pointer tiles: the element rules looked only at number elements, so an op the spec gives numbers only verified with
  ``tile<ptr<...>>`` operands or results wherever its other rules held. ``bitcast`` of a pointer tile (to another
  pointer, or to i64, bypassing ``ptr_to_int``) verified and then crashed the interpreter with a bare TypeError;
  ``reduce``/``scan`` over pointers had no element check at all. Review 25 fixed ``fpowi`` alone; now one table
  (``tile.ir._verify_elements.POINTERS``) names the op sides the spec opens to pointer tiles, and every other side of
  every op in the catalog refuses them (tile-ir's ``test_ir_verify_pointers`` walks the catalog).
- Unverified IR in ``interp.launch``: a module read from bytes or built by hand is launched without verification,
  and the per-op step factories raised AssertionError, TypeError, AttributeError, KeyError or ValueError on ops the
  verifier would refuse (a wrong operand count, an operand of another type, a view that is not a view, an attribute
  of another kind). Preparing an op now turns any non-Tile error into an ``InterpError`` naming the op and its
  location, saying to verify the module; a step failing with LookupError/AttributeError while running is one too.
  (Verifying once per module at launch was the alternative; the per-op wrap costs nothing on the launch path.)

Tried and found solid: seeded byte mutations and structural damage of real compiled kernels, pushed through read ->
verify -> interpret whether or not they verify, raise only TileErrors and do not hang.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from helpers_adversarial import fuzz_kernels, time_limit

import tile.compiler as tc
from tile import ir
from tile.compiler import Specialization, Target
from tile.errors import TileError
from tile.ir import interp
from tile.ir.interp import InterpError

SPEC = Specialization.make(consts={"B": 16})


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("TILE_CACHE_DIR", str(tmp_path / "cache"))
    tc.clear_memory_cache()
    return fuzz_kernels("review28_kernels", tmp_path)


def _pointer_kernel(result: ir.Type) -> ir.Module:
    fn = ir.Function("k", ir.FunctionType((ir.scalar(ir.ptr(ir.f32)),)))
    b = ir.Builder(fn.body, version=ir.V13_5)
    b.create("bitcast", [fn.body.args[0]], {}, [result])
    b.return_()
    return ir.Module([fn])


# -- hole: pointer tiles verified on ops the spec gives numbers only -------------------------------------------------


@pytest.mark.parametrize("result", [ir.scalar(ir.ptr(ir.i32)), ir.scalar(ir.i64)], ids=["to-pointer", "to-i64"])
def test_bitcast_of_a_pointer_tile_does_not_verify(result: ir.Type) -> None:
    problems = ir.verify_problems(_pointer_kernel(result), ir.V13_5)
    assert any("bitcast does not take pointer tiles (operand 'source'" in p for p in problems), problems
    with pytest.raises(ir.VerifyError, match=r"bitcast does not take pointer tiles .*convert with ptr_to_int"):
        ir.verify(_pointer_kernel(result), ir.V13_5)


def test_a_reduction_over_pointer_tiles_does_not_verify() -> None:
    fn = ir.Function("k", ir.FunctionType((ir.scalar(ir.ptr(ir.f32)),)))
    b = ir.Builder(fn.body, version=ir.V13_5)
    pointers = b.broadcast(
        b.reshape(fn.body.args[0], result_type=ir.tile((1,), ir.ptr(ir.f32))), result_type=ir.tile((4,), ir.ptr(ir.f32))
    )
    b.create("maxi", [pointers, pointers], {"signedness": ir.Signedness.SIGNED}, [pointers.type])
    b.return_()
    problems = ir.verify_problems(ir.Module([fn]), ir.V13_5)
    assert any("maxi does not take pointer tiles" in p for p in problems), problems


def test_pointer_tiles_still_verify_where_the_spec_takes_them() -> None:
    text = """
entry @k(%p: tile<ptr<f32>>, %c: tile<i1>) {
  %r = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %r : tile<1xptr<f32>> -> tile<4xptr<f32>>
  %two = cat %b, %b dim = 0 : tile<4xptr<f32>>, tile<4xptr<f32>> -> tile<8xptr<f32>>
  %s = select %c, %p, %p : tile<i1>, tile<ptr<f32>>
  %i = ptr_to_int %s : tile<ptr<f32>> -> tile<i64>
  return
}
"""
    module = ir.parse_module(text)
    assert ir.verify_problems(module, ir.V13_5) == []
    interp.launch(module, 1, [np.zeros(4, np.float32), True])


# -- hole: the interpreter prepared unverified ops with untyped errors ----------------------------------------------


def test_a_malformed_op_is_an_interp_error_naming_it_not_a_bare_error() -> None:
    fn = ir.Function("k", ir.FunctionType((ir.scalar(ir.ptr(ir.f32)),)))
    b = ir.Builder(fn.body, version=ir.V13_5)
    b.create("bitcast", [fn.body.args[0]], {}, [ir.scalar(ir.ptr(ir.i32))])
    b.return_()
    with pytest.raises(InterpError, match=r"cannot prepare op 'bitcast' \(TypeError: .*run tile.ir.verify.*@k/op 1"):
        interp.launch(ir.Module([fn]), 1, [np.zeros(4, np.float32)])


def test_a_load_from_a_pointer_instead_of_a_view_is_an_interp_error(kernels: ModuleType) -> None:
    kernel = tc.compile_kernel(kernels.add16, SPEC, Target.cpu(), cache=False)
    module = ir.read_bytecode(kernel.bytecode)
    load = next(op for fn in module.functions for op in fn.walk() if op.name == "load_view_tko")
    load.operands[0] = module.functions[0].body.args[0]  # what a hand-built or damaged op looks like
    assert ir.verify_problems(module)
    with pytest.raises(InterpError, match=r"failed on this op: .* no attribute 'addresses' .*:11:13"):
        interp.launch(module, 2, _args(kernel))


def test_a_view_typed_as_a_tile_is_an_interp_error_when_the_op_is_prepared(kernels: ModuleType) -> None:
    kernel = tc.compile_kernel(kernels.add16, SPEC, Target.cpu(), cache=False)
    module = ir.read_bytecode(kernel.bytecode)
    view = next(op for fn in module.functions for op in fn.walk() if op.name == "make_partition_view")
    view.results[0].type = ir.tile((16,), ir.f16)
    assert ir.verify_problems(module)
    with pytest.raises(InterpError, match=r"cannot prepare op '\w+' \(TypeError: .*not a tile view.*tile.ir.verify"):
        interp.launch(module, 2, _args(kernel))


# -- fuzz: compiled kernels, damaged, through read -> verify -> interpret (verified or not) --------------------------


def _damage(rng: random.Random, module: ir.Module, donor: ir.Module) -> None:
    """Give one op a result type, an attribute or an operand taken from elsewhere (what hand-built IR gets wrong)."""
    ops = [op for fn in module.functions for op in fn.walk()]
    donors = [op for fn in donor.functions for op in fn.walk()]
    op = rng.choice(ops)
    kind = rng.randrange(3)
    if kind == 0 and op.results:
        rng.choice(op.results).type = rng.choice([r.type for d in donors for r in d.results])
    elif kind == 1 and op.attributes:
        values = [v for d in donors for v in d.attributes.values()]
        op.attributes[rng.choice(sorted(op.attributes))] = rng.choice(values)
    elif op.operands:
        op.operands[rng.randrange(len(op.operands))] = rng.choice([v for o in ops for v in o.results] or op.operands)


def _bytes(rng: random.Random, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 3)):
        data[rng.randrange(len(data))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    return bytes(data)


def _args(kernel: tc.CompiledKernel) -> list[object]:
    """Arguments by the kernel's ABI: 64-element buffers (two 16-wide blocks fit), unit strides, n = 2."""
    by_role: dict[str, object] = {"shape": 64, "stride": 1}
    dtype = np.float16 if "f16" in kernel.abi.slots[0].dtype else np.float32
    return [np.zeros(64, dtype) if s.role == "base" else by_role.get(s.role, 2) for s in kernel.abi.slots]


def test_damaged_compiled_kernels_raise_only_tile_errors_in_the_interpreter(kernels: ModuleType) -> None:
    compiled = [
        tc.compile_kernel(fn, SPEC, Target.cpu(), cache=False) for fn in (kernels.copy32, kernels.add16, kernels.looped)
    ]
    rng = random.Random(28)
    outcomes: dict[str, int] = {}
    for case in range(400):
        kernel = rng.choice(compiled)
        try:
            if case % 2:
                module = ir.read_bytecode(_bytes(rng, kernel.bytecode))
            else:
                module = ir.read_bytecode(kernel.bytecode)
                _damage(rng, module, ir.read_bytecode(rng.choice(compiled).bytecode))
            verified = not ir.verify_problems(module)
            with time_limit(2):
                interp.launch(module, 2, _args(kernel), stdout=io.StringIO())
            outcome = "ran" if verified else "ran-unverified"
        except TileError as err:
            outcome = type(err).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("InterpError", 0) > 0, outcomes  # the damage reached the interpreter's op preparation
    assert outcomes.get("ran", 0) > 0, outcomes
