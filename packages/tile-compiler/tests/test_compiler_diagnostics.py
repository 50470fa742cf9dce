"""Diagnostics: each rejected kernel reports what is wrong at the user's line (``# <-`` marks it) with a caret,
pickles, and shows no compiler internals."""

from __future__ import annotations

import importlib
import inspect
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tile.ir
from tile.compiler._diagnostics import CompileError
from tile.compiler._parse import parse
from tile.compiler._resolve import resolve
from tile.compiler._spec import Specialization, Target
from tile.compiler._typecheck import typecheck

CORPUS = Path(__file__).parent / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))
bad: Any = importlib.import_module("tc_diag_kernels")
KERNELS = bad.__file__

NOISE = ("tile.compiler", "_typecheck", "_resolve", "Checker", "KernelIR", "Emitter", "Traceback", "Value(", "%")


def compile_error(fn: Callable[..., object], **consts: int | float | bool) -> CompileError:
    with pytest.raises(CompileError) as info:
        typecheck(resolve(parse(fn)), Specialization.make(consts=consts), Target("sm_90"))
    return info.value


def marked_line(fn: Callable[..., object]) -> int:
    lines, first = inspect.getsourcelines(fn)
    hits = [first + i for i, line in enumerate(lines) if "# <-" in line]
    assert len(hits) == 1, "mark exactly one line with '# <-'"
    return hits[0]


def check(fn: Callable[..., object], fragment: str, **consts: int | float | bool) -> CompileError:
    err = compile_error(fn, **consts)
    text = str(err)
    assert fragment in err.message, err.message
    assert err.line == marked_line(fn), text
    assert err.filename == KERNELS
    lines = text.splitlines()
    assert lines[0].startswith(f"{KERNELS}:{err.line}:{err.col}: error: ")
    assert set(lines[2].strip()) == {"^"}, text
    source = inspect.getsource(fn).splitlines()[err.line - marked_line(fn) + _mark_offset(fn)].strip()
    assert lines[1].strip() == source
    for noise in NOISE:
        assert noise not in text.replace(KERNELS, ""), (noise, text)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == text
    assert again.line == err.line
    return err


def _mark_offset(fn: Callable[..., object]) -> int:
    return next(i for i, line in enumerate(inspect.getsource(fn).splitlines()) if "# <-" in line)


CASES: list[tuple[Callable[..., object], str]] = [
    (bad.undefined_name, "name 'missing_thing' is not defined"),
    (bad.uses_try, "try/except is not supported"),
    (bad.uses_with, "with is not supported"),
    (bad.uses_lambda, "lambda is not supported"),
    (bad.nested_def, "nested function definitions are not supported"),
    (bad.python_assert, "use tile.assert_(cond, msg)"),
    (bad.unannotated, "kernel parameter 'x' needs an annotation"),
    (bad.bad_annotation, "parameter 'x' has an unsupported annotation"),
    (bad.missing_generic, "const generic 'N' has no value"),
    (bad.missing_const, "Const parameter 'k' needs a compile-time int"),
    (bad.store_dtype, "cannot store a f32 tile into 'z' of dtype f16"),
    (bad.store_shape, "'z' stores tiles of shape (64,)"),
    (bad.store_to_input, "a tensor has no method 'store'; only Mut outputs can be stored to"),
    (bad.store_through_output_view, "a view of the output 'z' reads any tile but writes none"),  # not "only Mut"
    (
        bad.math_of_a_tile,
        "math.sqrt() only folds compile-time numbers in kernel code; on a tile or run-time value use tile.sqrt",
    ),
    (bad.math_domain_error, "math.sqrt(-1.0) fails at compile time: math domain error"),
    (bad.math_without_tile_op, "math.erf() only folds compile-time numbers in kernel code; it has no tile op"),
    (bad.reads_other_outputs_walked_tile, "reads a tile of output 'w' that other blocks may be writing"),
    (bad.cat_of_three, "tile.cat takes two tiles and an axis: tile.cat(x, y, axis) or tile.cat((x, y), axis)"),
    (bad.cat_without_axis, "tile.cat takes two tiles and an axis"),
    (bad.propagate_nan_of_ints, "propagate_nan= of tile.maximum applies to float tiles, got i32"),
    (bad.propagate_nan_not_bool, "propagate_nan= of tile.maximum must be True or False, got 1"),
    (bad.propagate_nan_of_a_sum, "propagate_nan= of tile.max takes True or False, on float tiles (got True, i32)"),
    (bad.float_const_int_tile, "cannot combine the float constant 0.5 with a i32 tile"),
    (bad.mixed_kinds, "needs operands of one dtype, got f32 and i32"),
    (bad.no_broadcast, "shapes (64,) and (32,) do not broadcast"),
    (bad.non_pow2_partition, "tile dimensions must be powers of two, got 100"),
    (bad.partition_rank, "must have one dim per tensor dim (2)"),
    (bad.load_arity, "the load index needs 2 coordinates"),
    (bad.reshape_count, "cannot reshape a tile of shape (64,)"),
    (bad.mma_shapes, "mma shapes do not line up"),
    (bad.mma_dtypes, "mma of f16 x f16 into i32 is not supported"),
    (bad.exp_of_int, "tile.exp needs a float tile, got i32"),
    (bad.bad_keyword, "tile.sum() got an unexpected keyword argument 'dim'"),
    (bad.missing_argument, "tile.full() is missing the argument 'value'"),
    (bad.bad_axis, "axis must be a compile-time int in [-2, 2), got 2"),
    (bad.loop_type_change, "variable 'acc' changes type"),
    (bad.loop_local_used_after, "variable 't' is used before it is assigned on this path"),
    (bad.tile_condition, "an 'if' condition must be a bool scalar"),
    (bad.returns_value, "an entry kernel returns nothing"),
    (bad.return_in_loop, "'return' inside a loop is not supported"),
    (bad.pointer_in_checked, "x.ptr() is only allowed in kernels marked @tile.entry(unchecked=True)"),
    (bad.calls_numpy, "'exp' cannot be called in kernel code"),
    (bad.calls_print, "use tile.print(...)"),
    (bad.indexes_tile, "tiles cannot be indexed"),
    (bad.assigns_attribute, "only names can be assigned"),
    (bad.static_assert_fails, "static assertion failed: B must exceed 256"),
    (bad.negative_step, "the range step must be positive, got -1"),
    (bad.iterates_tensor, "kernel 'for' loops iterate over range"),
    (bad.chained_compare, "chained comparisons of tiles are not supported"),
    (bad.bad_unpack, "cannot unpack 3 values into 2 names"),
    (bad.while_on_tile, "a 'while' condition must be a bool scalar"),
    (bad.branch_kinds_differ, "holds a tensor parameter that differs between branches"),
    (bad.ptr_param_checked, "raw pointer parameter 'p' is only allowed"),
    (bad.bad_padding, "padding must be one of zero, neg_zero, nan, pos_inf, neg_inf"),
    (bad.mixed_store_schemes, "'z' is accessed both at this block's own tile (z.store(t)) and at tiles from z.tiles()"),
    (bad.forged_tile_index, "the index of 'z.store(..., at=idx)' must be the variable of a 'for idx in z.tiles()'"),
    (bad.other_outputs_index, "must be the variable of a 'for idx in z.tiles()' loop over this same output"),
    (bad.group_on_rank1, "group= takes a compile-time int in 1..2**31 - 1, for rank-2 outputs"),  # kills `or` -> `and`
    (bad.group_of_zero, "group= takes a compile-time int in 1..2**31 - 1"),  # kills `group <= 0` -> `< 0` (mutation.py)
    (bad.tile_index_escapes, "variable 'keep' changes type"),
    (bad.division_of_ints, "operator '/' is not defined for integer tiles; use // for integer division"),
]


@pytest.mark.parametrize(("fn", "fragment"), CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_diagnostic(fn: Callable[..., object], fragment: str) -> None:
    check(fn, fragment, B=64)


def test_error_in_helper_points_into_the_helper_and_notes_the_call_site() -> None:
    err = compile_error(bad.calls_buggy_helper, B=64)
    assert "tile.exp needs a float tile, got i32" in err.message
    assert err.line == marked_line(bad.helper_with_bug)
    call_line = inspect.getsourcelines(bad.calls_buggy_helper)[1] + 1
    assert [site.line for site in err.inlined_from] == [call_line]
    assert f"{KERNELS}:{call_line}:" in str(err)
    assert "note: in the helper called from here" in str(err)


def test_non_pow2_output_tile_is_reported_at_the_annotation() -> None:
    check(bad.non_pow2_tile, "must have power-of-two dims, got 100", B=100)


def test_error_without_location_renders_plainly() -> None:
    err = CompileError("no source")
    assert str(err) == "error: no source"
    assert err.line is None
    assert err.col is None
    assert str(pickle.loads(pickle.dumps(err))) == "error: no source"


def test_compile_error_is_a_tile_error_and_value_error() -> None:
    err = compile_error(bad.undefined_name, B=64)
    assert isinstance(err, tile.ir.TileError)
    assert isinstance(err, ValueError)


def test_caret_spans_the_offending_expression() -> None:
    err = compile_error(bad.mixed_kinds, B=64)
    source, caret = str(err).splitlines()[1:3]
    start = caret.index("^")
    assert source[start : start + len(caret.strip())] == "tile.load_tile_like(x, z) + tile.load_tile_like(y, z)"
