"""The assembler: text back to the data model, and its errors (typed, at line:col, with a caret)."""

from __future__ import annotations

import pickle

import pytest

from tile.ir import (
    V13_3,
    AsmSyntaxError,
    CallSite,
    DenseElementsAttr,
    DICompileUnit,
    DIFile,
    DILoc,
    DISubprogram,
    FileLoc,
    FloatAttr,
    TileError,
    f32,
    parse_module,
    print_module,
    read_bytecode,
    tile,
    verify,
    write_bytecode,
)

KERNEL = """\
global  @table <f32: [1.000000e+00, 2.500000e+00]> : tile<2xf32>
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) optimization_hints=<sm_90 = {occupancy = 2}> {
  %0 = make_token : token
  // a comment the printer never writes
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %pview = make_partition_view %tview : partition_view<tile=(16), padding_value = zero, tensor_view<?xf32, strides=[1]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(16), padding_value = zero, tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<16xf32>, token
  %cst_f32 = constant <f32: -2.500000e-01> : tile<16xf32>
  %1 = addf %tile, %cst_f32 rounding<zero> : tile<16xf32>
  %2 = exp %1 rounding<approx> : tile<16xf32>
  %3 = maxf %2, %1 flush_to_zero propagate_nan : tile<16xf32>
  %4 = cmpf less_than unordered %3, %1 : tile<16xf32> -> tile<16xi1>
  %5 = select %4, %3, %1 : tile<16xi1>, tile<16xf32>
  %reduce = reduce %5 dim=0 identities=[0.000000e+00 : f32] : tile<16xf32> -> tile<f32>{TRAILING_BLANK}
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %7 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
    yield %7 : tile<f32>
  }
  %6 = store_view_tko weak %5, %pview[%blockId_x] token = %result_token : tile<16xf32>, partition_view<tile=(16), padding_value = zero, tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
  return
}
""".replace("{TRAILING_BLANK}", " ")  # noqa: E501  -- tileirdisasm's lines are long; the text is exactly its syntax
# (reduce lines end in a blank, which editors strip: it is spliced in)


def test_parses_a_kernel_and_prints_it_back() -> None:
    module = parse_module(KERNEL)
    assert print_module(module) == KERNEL.replace("  // a comment the printer never writes\n", "")
    (fn,) = module.functions
    assert [op.name for op in fn.body.ops][-1] == "return"
    add = next(op for op in fn.walk() if op.name == "addf")
    assert str(add.attributes["rounding_mode"]) == "zero"
    const = next(op for op in fn.walk() if op.name == "constant")
    value = const.attributes["value"]
    assert isinstance(value, DenseElementsAttr)
    assert value.type == tile((16,), f32)
    assert value.data == FloatAttr.of(f32, -0.25).bits.to_bytes(4, "little")


def test_assembled_module_verifies_and_survives_bytecode() -> None:
    module = parse_module(KERNEL)
    verify(module, V13_3)
    data = write_bytecode(module, V13_3)
    assert print_module(read_bytecode(data)) == print_module(module)


def _error(text: str) -> AsmSyntaxError:
    with pytest.raises(AsmSyntaxError) as info:
        parse_module(text, "k.tileir")
    return info.value


def test_undefined_value_points_at_the_use() -> None:
    err = _error("entry @k(%arg0: tile<i32>) {\n  %0 = addi %arg0, %nope : tile<i32>\n  return\n}\n")
    assert (err.line, err.col) == (2, 20)
    assert "use of undefined value '%nope'" in str(err)
    assert str(err).endswith("  %0 = addi %arg0, %nope : tile<i32>\n                   ^")
    assert str(err).startswith("k.tileir:2:20: error:")


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("entry @k() {\n  %0 = frobnicate : token\n  return\n}\n", (2, 8), "unknown op 'frobnicate'"),
        ("entry @k() {\n  %0 = make_token : tile<i32\n  return\n}\n", (3, 3), "expected '>'"),
        ("entry @k() {\n  %0, %1 = make_token : token\n  return\n}\n", (2, 12), "produces 1 results but 2 names"),
        ("entry @k() {\n  %0 = make_token : token\n  %0 = make_token : token\n  return\n}\n", (3, 3), "redefinition"),
        ("entry @k(%a: tile<i32>) {\n  %0 = addi %a, %a overflow<wrapping> : tile<i32>\n}\n", (2, 29), "overflow"),
        (
            "entry @k(%a: tile<i32>) {\n  %0 = exti %a signed : tile<i16> -> tile<i64>\n  return\n}\n",
            (2, 25),
            "type mismatch",
        ),
        ("entry @k() {\n  %0 = make_token : token\n", (3, 1), "expected '}'"),
        ("entry @k() {\n  %c = constant <i8: 300> : tile<i8>\n  return\n}\n", (2, 22), "out of range for i8"),
        ("entry @k() {\n  %c = constant <f32: 1.0> : tile<4xi32>\n  return\n}\n", (2, 29), "needs a tile of f32"),
        ("module @m {\n  func @k() {\n  }\n}\n", (2, 3), "expected 'entry' or 'global'"),
        ("entry @k() {\n  %t = make_token : tile<3xfoo>\n  return\n}\n", (2, 28), "unknown element type 'foo'"),
    ],
)
def test_errors_say_what_and_where(text: str, where: tuple[int, int], message: str) -> None:
    err = _error(text)
    assert message in err.message
    assert (err.line, err.col) == where
    lines = text.splitlines()
    assert err.source_line == (lines[where[0] - 1] if where[0] <= len(lines) else "")


def test_error_is_typed_and_pickles() -> None:
    err = _error("entry @k() {\n  %0 = nope\n}\n")
    assert isinstance(err, TileError)
    assert isinstance(err, ValueError)
    clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == str(err)
    assert (clone.line, clone.col, clone.filename) == (err.line, err.col, "k.tileir")


def test_values_are_scoped_to_their_region() -> None:
    text = (
        "entry @k(%arg0: tile<i1>) {\n"
        "  if %arg0 {\n"
        "    %inner = make_token : token\n"
        "  }\n"
        "  %0 = join_tokens %inner : token\n"
        "  return\n"
        "}\n"
    )
    err = _error(text)
    assert "use of undefined value '%inner'" in err.message
    assert err.line == 5


def test_integer_and_boolean_identities_parse() -> None:
    text = (
        "entry @k() {\n"
        "  %cst_i1 = constant <i1: [true, false]> : tile<2xi1>\n"
        "  %reduce = reduce %cst_i1 dim=0 identities=[false : i1] : tile<2xi1> -> tile<i1> \n"
        "  (%reduce_lhs: tile<i1>, %reduce_rhs: tile<i1>) {\n"
        "    %0 = ori %reduce_lhs, %reduce_rhs : tile<i1>\n"
        "    yield %0 : tile<i1>\n"
        "  }\n"
        "  return\n"
        "}\n"
    )
    module = parse_module(text)
    assert print_module(module) == text
    verify(module, V13_3)


def test_string_escapes_round_trip() -> None:
    text = (
        "entry @k(%arg0: tile<i1>) {\n"
        '  assert %arg0, "quote \\22 backslash \\\\ tab \\09 caf\\C3\\A9" : tile<i1>\n'
        "  return\n"
        "}\n"
    )
    module = parse_module(text)
    op = module.functions[0].body.ops[0]
    assert op.attributes["message"] == 'quote " backslash \\ tab \t café'
    assert print_module(module) == text


DEBUG_TEXT = """\
entry @k(%arg0: tile<i32>) {
  %0 = make_token : token loc(#loc3)
  %1 = addi %arg0, %arg0 : tile<i32> loc(#loc4)
  %2 = muli %1, %1 : tile<i32> loc(unknown)
  return loc(#loc1)
} loc(#loc2)
#di_file = #cuda_tile.di_file<"k.py" in "/src">
#loc = loc("/src/k.py":3:0)
#loc1 = loc("/src/k.py":9:4)
#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>
#di_subprogram = #cuda_tile.di_subprogram<file = #di_file, line = 3, name = "k", linkageName = "k", compileUnit = #di_compile_unit, scopeLine = 3>
#loc2 = #cuda_tile.di_loc<#loc in #di_subprogram>
#loc3 = #cuda_tile.di_loc<#loc1 in #di_subprogram>
#loc4 = loc(callsite(#loc3 at #loc2))
"""  # noqa: E501  -- tileirdisasm -g prints subprograms on one line


def test_debug_locations_are_read_from_the_alias_section() -> None:
    module = parse_module(DEBUG_TEXT)
    (fn,) = module.functions
    sub = DISubprogram(DIFile("k.py", "/src"), 3, "k", "k", DICompileUnit(DIFile("k.py", "/src")), 3)
    start, body = DILoc(sub, "/src/k.py", 3, 0), DILoc(sub, "/src/k.py", 9, 4)
    assert fn.loc == start
    make_token, addi, muli, ret = fn.body.ops
    assert make_token.loc == body
    assert addi.loc == CallSite(body, start)
    assert muli.loc is None
    assert ret.loc == FileLoc("/src/k.py", 9, 4)
    verify(module, V13_3)
    assert read_bytecode(write_bytecode(module, V13_3)).functions[0].body.ops[1].loc == CallSite(body, start)


def test_undefined_location_alias_is_reported_where_it_is_used() -> None:
    err = _error(DEBUG_TEXT.replace("loc(#loc4)", "loc(#loc9)"))
    assert "undefined alias '#loc9'" in err.message
    assert (err.line, err.col) == (3, 42)  # the "#"
