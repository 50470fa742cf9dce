"""The call sites ownership messages name, on both launch paths: a launch's and a ``.then()``'s site is kept per code
object and instruction offset (``f_lasti``), and the line is decoded only at a new position (`PyFrame_GetLineNumber`
walks the line table from the start of the code object: microseconds per call at the end of a long function). These
tests pin that the kept site is never the wrong line: launches from two lines in turn, two on one line, and calls at the
end of a long function.
"""

from __future__ import annotations

import re
import sys
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile.aio import OpConsumedError
from tile.frontend import f32

N = 512


def _handles(k: ModuleType) -> tuple[Any, Any, Any]:
    """Handles the kernel's latest plan takes (two launches of this layout made it)."""
    z, x, y = k.add(tile.zeros(f32, [N]).partition([128]), tile.ones(f32, [N]), tile.ones(f32, [N])).sync()
    z, x, y = k.add(z, x, y).sync()
    return z, x, y


def _moved_at(handle: Any) -> str:
    """The site a moved input names (its MovedError's message)."""
    with pytest.raises(tile.MovedError) as caught:
        handle.to_numpy()
    found = re.search(r"moved into the launch of add at (.+?:\d+);", str(caught.value))
    assert found is not None, str(caught.value)
    return found.group(1)


def test_launches_from_two_lines_in_turn_name_their_own_line(k: ModuleType, path: str) -> None:
    a, b = _handles(k), _handles(k)
    for _ in range(3):  # A, B, A, B...: each call site replaces the one the plan kept
        op_a, line_a = k.add(*a), sys._getframe().f_lineno
        op_b, line_b = k.add(*b), sys._getframe().f_lineno
        assert _moved_at(a[1]) == f"{__file__}:{line_a}"
        assert _moved_at(b[1]) == f"{__file__}:{line_b}"
        a, b = op_a.sync(), op_b.sync()


def test_two_launches_on_one_line_name_that_line(k: ModuleType, path: str) -> None:
    a, b = _handles(k), _handles(k)
    for _ in range(2):
        (op_a, op_b), line = (k.add(*a), k.add(*b)), sys._getframe().f_lineno  # two positions, one line
        assert _moved_at(a[1]) == _moved_at(b[1]) == f"{__file__}:{line}"
        a, b = op_a.sync(), op_b.sync()


# A long function (generated: 2000 statements before its calls), the case the position cache is for: its launch, its
# `.then()` and its sync name their own lines, on every repetition.
_LONG = "def long_function(k, handles, then):\n" + "".join(f"    v{i} = {i}\n" for i in range(2000))
_LONG += "    op = k.add(*handles)  # the launch\n    return op, op.then(then)  # the then\n"
_LONG_NAME = "<tile test: a long function>"
exec(compile(_LONG, _LONG_NAME, "exec"), globals())  # the generated function above
LAUNCH_LINE = _LONG.splitlines().index("    op = k.add(*handles)  # the launch") + 1


def test_a_launch_and_a_then_at_the_end_of_a_long_function_name_their_lines(k: ModuleType, path: str) -> None:
    handles = _handles(k)
    for _ in range(3):
        op, link = long_function(k, handles, lambda out: k.add(*out))  # type: ignore[name-defined]  # noqa: F821
        assert _moved_at(handles[1]) == f"{_LONG_NAME}:{LAUNCH_LINE}"
        with pytest.raises(OpConsumedError, match=re.escape(f"moved into .then() at {_LONG_NAME}:{LAUNCH_LINE + 1}")):
            op.then(lambda out: k.add(*out))
        handles = link.sync()
    assert (handles[0].unpartition().to_numpy() == 2).all()
