"""`tile.compiler._printf.format_problem`: the conversions a ``tile.printf`` format may hold, against its values."""

from __future__ import annotations

import re

import pytest

from tile.compiler._printf import escape, format_problem
from tile.compiler._types import DTYPES, DType

I32, I64, U8, F16, F32, F64, I1 = (DTYPES[n] for n in ("i32", "i64", "u8", "f16", "f32", "f64", "i1"))


@pytest.mark.parametrize(
    ("fmt", "dtypes"),
    [
        ("no values\n", []),
        ("100%% done", []),
        ("%d %i %u %o %x %X", [I32, I32, U8, I32, I64, I1]),
        ("%-+ #05d|%10.3f|%.0e|%g|%a|%A|%E|%G|%F", [I32, F32, F64, F32, F64, F32, F32, F64, F32]),
        ("%ld %lld %hd %hhu %lf", [I64, I64, I32, U8, F64]),
        ("%%%d%%", [I32]),
    ],
)
def test_formats_of_numbers_are_accepted(fmt: str, dtypes: list[DType]) -> None:
    assert format_problem(fmt, dtypes) is None


@pytest.mark.parametrize(
    ("fmt", "dtypes", "message"),
    [
        ("%s", [I64], r"'%s' at 0, which is not a conversion Tile prints"),
        ("%p", [I64], "not a conversion Tile prints"),
        ("%n", [], "not a conversion Tile prints"),
        ("%c", [I32], "not a conversion Tile prints"),
        ("%*d", [I32], r"'%\*d' at 0"),
        ("%.*f", [F32], "not a conversion Tile prints"),
        ("%Lf", [F64], "not a conversion Tile prints"),
        ("100%", [], r"'%' at 3"),
        ("x %d %d", [I32], "the format has 2 conversions but 1 values were given"),
        ("%d", [I32, I32], "the format has 1 conversions but 2 values were given"),
        ("%f", [I32], "prints a float but its value is i32"),
        ("%d", [F16], "prints an integer but its value is f16"),
        ("%ld", [I32], "reads a 64-bit integer but its value is i32"),
        ("%llx", [U8], "reads a 64-bit integer but its value is u8"),
        ("%hf", [F32], "the length 'h', which a float conversion does not take"),
    ],
)
def test_formats_that_read_other_memory_are_refused(fmt: str, dtypes: list[DType], message: str) -> None:
    problem = format_problem(fmt, dtypes)
    assert problem is not None
    assert re.search(message, problem), problem


def test_escape_makes_text_literal() -> None:
    assert escape("50% %s %n") == "50%% %%s %%n"
    assert format_problem(escape("50% %s %n %*d"), []) is None
