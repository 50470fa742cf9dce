"""Three forms cuTile Python writes that tile-ir refused or misread, each rebuilt here with our builder.

- An ``if`` whose region ends in ``return`` (an early exit from the kernel): NVIDIA's verifier allows ``return``
  in an ``if`` nested only in ``if`` s up to the entry, never inside a loop or a ``reduce``/``scan`` body.
- ``load_ptr_tko`` with one of its two optional operands: ``%p, %x`` is a mask or a padding value; the value's type
  decides, as the bytecode's operand segment sizes do.
- ``print_tko`` in a 13.1 file: NVIDIA's IR gives it a token result at every version (``tileirdisasm`` prints
  ``-> token``) that 13.1 bytecode does not encode.

cuTile Python's own exports of the first two are in `cutile_corpus` (``early_exit``, ``gather_mask_pad``); it
exports nothing older than 13.3 without a GPU target, so the 13.1 ``print_tko`` is built here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_tools import compile_cubin, disassemble
from tile.ir import (
    V13_1,
    V13_3,
    Builder,
    Function,
    FunctionType,
    Module,
    Operation,
    PartitionViewType,
    ScalarType,
    TensorViewType,
    TokenType,
    VerifyError,
    f32,
    i1,
    i32,
    interp,
    parse_module,
    print_module,
    ptr,
    read_bytecode,
    scalar,
    tile,
    verify,
    write_bytecode,
)

I32 = scalar(i32)

# --- an early exit: `return` at the end of an `if` region --------------------------------------------------------


def _early_exit() -> Module:
    """Block b copies tile b of x to z, plus one, unless b >= n: then it returns before touching z."""
    fn = Function("early_exit", FunctionType((scalar(ptr(f32)), I32, I32, scalar(ptr(f32)), I32, I32, I32)))
    b = Builder(fn.body, version=V13_3)
    tv = TensorViewType(f32, (None,), (None,))
    pv = PartitionViewType((4,), tv, (0,))
    x, z = (b.call("make_tensor_view", fn.params[k], [fn.params[k + 1]], [fn.params[k + 2]], result_type=tv).results[0]
            for k in (0, 3))  # fmt: skip
    tok = b.make_token()
    bx, _, _ = b.get_tile_block_id()
    late = b.cmpi(bx, fn.params[6], comparison_predicate="greater_than_or_equal", signedness="signed")
    with b.if_(late) as br, br.then_():
        b.return_()
    t, _ = b.load_view_tko(b.make_partition_view(x, result_type=pv), [bx], tok)
    one = b.call("broadcast", b.constant(1.0, tile((1,), f32)), result_type=tile((4,), f32)).results[0]
    b.call("store_view_tko", b.addf(t, one), b.make_partition_view(z, result_type=pv), [bx], tok)
    b.return_()
    return Module([fn])


def test_an_if_may_end_in_return_and_the_kernel_exits_there() -> None:
    module = _early_exit()
    verify(module, V13_3)
    data = write_bytecode(module, V13_3)
    assert print_module(parse_module(print_module(read_bytecode(data)))) == print_module(module)
    x, z = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    interp.launch(module, 4, [x, 16, 1, z, 16, 1, 2])  # blocks 2 and 3 leave before their store
    np.testing.assert_array_equal(z, np.concatenate([x[:8] + 1, np.zeros(8, np.float32)]))


@pytest.mark.requires_tileiras
def test_nvidia_tools_accept_the_early_exit_we_write() -> None:
    data = write_bytecode(_early_exit(), V13_3)
    shown = disassemble(data)
    assert shown.returncode == 0, shown.stderr
    assert "    return\n" in shown.stdout
    assert shown.stdout == print_module(read_bytecode(data))
    proc, cubin = compile_cubin(data, "sm_90")
    assert proc.returncode == 0, proc.stderr
    assert cubin


def _return_in_if_inside(owner: str) -> Module:
    fn = Function("k", FunctionType((I32,)))
    b = Builder(fn.body)
    zero, one = b.constant(0, I32), b.constant(1, I32)
    cond = b.cmpi(zero, fn.params[0], comparison_predicate="less_than", signedness="signed")
    if owner == "for":
        with b.for_(zero, fn.params[0], one):
            with b.if_(cond) as br, br.then_():
                b.return_()
            b.continue_()
    else:
        with b.if_(cond) as outer, outer.then_():
            with b.if_(cond) as br, br.then_():
                b.return_()
            b.yield_()
    b.return_()
    return Module([fn])


def test_return_may_end_an_if_nested_in_ifs_but_not_one_inside_a_loop() -> None:
    verify(_return_in_if_inside("if"))
    with pytest.raises(VerifyError, match="must end with yield or continue or break, but ends with return"):
        verify(_return_in_if_inside("for"))


# --- load_ptr_tko with a mask or a padding value, alone ----------------------------------------------------------


def _load_ptr(mask: bool, padding: bool, element: ScalarType = f32) -> tuple[Module, Operation]:
    fn = Function("k", FunctionType((scalar(ptr(element)),)))
    b = Builder(fn.body)
    one = b.call("reshape", fn.params[0], result_type=tile((1,), ptr(element))).results[0]
    ptrs = b.call("broadcast", one, result_type=tile((16,), ptr(element))).results[0]
    m = b.constant(True, tile((16,), i1)) if mask else None
    pad = b.constant(1 if element is i1 else 7.0, tile((16,), element)) if padding else None
    op = b.call(
        "load_ptr_tko", ptrs, m, pad, b.make_token(), memory_ordering_semantics="weak",
        result_types=[tile((16,), element), TokenType()],
    )  # fmt: skip
    b.return_()
    return Module([fn]), op


def _reparsed_load(text: str) -> Operation:
    module = parse_module(text)
    verify(module)
    return next(op for op in module.functions[0].walk() if op.name == "load_ptr_tko")


@pytest.mark.parametrize(("mask", "padding"), [(True, False), (False, True), (True, True), (False, False)])
def test_the_assembler_gives_load_ptr_tko_operands_to_the_right_groups(mask: bool, padding: bool) -> None:
    module, op = _load_ptr(mask, padding)
    text = print_module(module)
    again = _reparsed_load(text)
    assert again.segments == op.segments
    assert [v.type for v in again.operands] == [v.type for v in op.operands]
    assert write_bytecode(parse_module(text), V13_3) == write_bytecode(module, V13_3)


def test_a_lone_i1_padding_value_reads_as_a_mask_as_in_nvidias_parser() -> None:
    module, op = _load_ptr(False, True, i1)
    again = _reparsed_load(print_module(module))  # `%p, %x` with x a tile<i1>: the text cannot tell
    assert op.segments == (1, 0, 1, 1)
    assert again.segments == (1, 1, 0, 1)


@pytest.mark.requires_tileiras
def test_tileirdisasm_text_of_a_padding_only_load_assembles_to_the_same_bytes() -> None:
    module, _ = _load_ptr(False, True)
    data = write_bytecode(module, V13_3)
    shown = disassemble(data)
    assert shown.returncode == 0, shown.stderr
    assert write_bytecode(parse_module(shown.stdout), V13_3) == data


# --- print_tko in a 13.1 file --------------------------------------------------------------------------------------


def _print_131(use_token: bool = False) -> Module:
    fn = Function("k", FunctionType((I32,)))
    b = Builder(fn.body, version=V13_1)
    assert b.print_tko("n=%d\n", [fn.params[0]]) is None  # not usable at 13.1
    printed = fn.body.ops[-1]
    if use_token:
        b.call("join_tokens", [printed.results[0], b.make_token()])
    b.return_()
    return Module([fn])


def _print_op(module: Module) -> Operation:
    return next(op for op in module.functions[0].walk() if op.name == "print_tko")


def test_a_13_1_print_has_its_token_in_the_ir_but_not_in_the_bytecode() -> None:
    module = _print_131()
    assert [v.type for v in _print_op(module).results] == [TokenType()]
    data = write_bytecode(module, V13_1)
    read = read_bytecode(data)
    assert [v.type for v in _print_op(read).results] == [TokenType()]  # supplied by the reader, as NVIDIA's does
    text = print_module(read)
    assert '%0 = print_tko "n=%d\\0A", %arg0 : tile<i32> -> token' in text
    again = parse_module(text)
    verify(again, V13_1)
    assert write_bytecode(again, V13_1) == data
    assert write_bytecode(module, V13_1) == write_bytecode(_module_without_token(), V13_1)


def _module_without_token() -> Module:
    """The same kernel with the print built the old way, without its token (still accepted at 13.1)."""
    module = _print_131()
    op = _print_op(module)
    bare = Operation("print_tko", op.operands, [], attributes=dict(op.attributes), segments=op.segments)
    block = module.functions[0].body
    block.ops[block.ops.index(op)] = bare
    bare.parent = block
    return module


def test_the_13_1_print_token_cannot_be_used() -> None:
    module = _print_131(use_token=True)
    with pytest.raises(VerifyError, match=r"bytecode 13.1 does not encode .*target 13\.2\+"):
        verify(module, V13_1)
    with pytest.raises(VerifyError, match="not defined before its use"):
        write_bytecode(module, V13_1)
    verify(module, "13.2")  # where the token exists in bytecode it may be used


@pytest.mark.requires_tileiras
def test_tileirdisasm_prints_the_13_1_token_and_its_text_assembles_back() -> None:
    data = write_bytecode(_print_131(), V13_1)
    shown = disassemble(data)
    assert shown.returncode == 0, shown.stderr
    assert "-> token" in shown.stdout
    assert shown.stdout == print_module(read_bytecode(data))
    again = parse_module(shown.stdout)
    verify(again, V13_1)
    assert write_bytecode(again, V13_1) == data
    proc, _ = compile_cubin(data, "sm_90")
    assert proc.returncode == 0, proc.stderr
