"""An ``assert``'s message and file names are ``printf`` format text on the device (see ``tile.ir._format_text``):
the verifier refuses a ``%`` that is not ``%%``, the interpreter prints ``%%`` as ``%`` like the device does, and
tileiras really copies both into the format of a ``vprintf`` call (checked against the cubin it writes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tile.ir import (
    Builder,
    CallSite,
    DICompileUnit,
    DIFile,
    DILoc,
    DISubprogram,
    Function,
    FunctionType,
    Location,
    Module,
    VerifyError,
    Version,
    escape_format_text,
    format_text_problem,
    i32,
    interp,
    render_format_text,
    scalar,
    verify,
    write_bytecode,
)

sys.path.insert(0, str(Path(__file__).parent))
from helpers_ir_tools import compile_cubin

I32 = scalar(i32)
FILE = DIFile("k.py", "/src")
SCOPE = DISubprogram(FILE, 3, "k", "k", DICompileUnit(FILE), 3)
V = Version(13, 3)


def assert_kernel(message: str, loc: Location | None = None) -> Module:
    """``assert bid < 1, message`` at ``loc``: block 0 passes, any other block fails."""
    fn = Function("k", FunctionType(()), loc=DILoc(SCOPE, "/src/k.py", 3, 1))
    b = Builder(fn.body)
    bx, _, _ = b.get_tile_block_id()
    ok = b.cmpi(bx, b.constant(1, I32), comparison_predicate="less_than", signedness="signed")
    b.assert_(ok, message, loc=loc)  # noqa: PT009 - tile.ir Builder.assert_ builds an assert op
    b.return_()
    return Module([fn])


@pytest.mark.parametrize("text", ["", "plain", "100%", "%%", "%s%n%*d", "a%%%b", "%%%%%", "50 % off %d\n"])
def test_escaped_text_is_literal_and_prints_as_written(text: str) -> None:
    escaped = escape_format_text(text)
    assert format_text_problem(escaped, "text") is None
    assert render_format_text(escaped) == text


@pytest.mark.parametrize(
    ("text", "found"), [("100% done", "'% d' at 3"), ("%s", "'%s' at 0"), ("a%%%n", "'%n' at 3"), ("%", "'%' at 0")]
)
def test_a_lone_percent_is_named_where_it_is(text: str, found: str) -> None:
    problem = format_text_problem(text, "the message")
    assert problem is not None
    assert found in problem
    assert "write '%%' for a literal '%'" in problem


def test_verifier_refuses_a_conversion_in_an_assert_message() -> None:
    verify(assert_kernel("100%% %%s done"), V)
    with pytest.raises(VerifyError, match=r"the assert message '100% %s' has '% %' at 3: tileiras copies it"):
        verify(assert_kernel("100% %s"), V)


@pytest.mark.parametrize(
    "loc",
    [
        DILoc(SCOPE, "/tmp/p%s/k.py", 7, 3),
        CallSite(DILoc(SCOPE, "/src/helper.py", 2, 1), DILoc(SCOPE, "/tmp/100%/k.py", 7, 3)),
    ],
)
def test_verifier_refuses_a_conversion_in_an_assert_file_name(loc: Location) -> None:
    with pytest.raises(VerifyError, match=r"the assert's location file name '/tmp/(p%s|100%)/k\.py' has"):
        verify(assert_kernel("fine", loc), V)


def test_interpreter_prints_the_message_and_path_as_the_device_does() -> None:
    module = assert_kernel("100%% %%s%%n", DILoc(SCOPE, "/tmp/p%%s/k.py", 7, 3))
    verify(module, V)
    interp.launch(module, 1, [])  # block 0 passes
    with pytest.raises(interp.KernelAssertionError, match=r"kernel assertion failed: 100% %s%n \(at /tmp/p%s/k\.py"):
        interp.launch(module, 2, [])


def test_interpreter_refuses_an_assert_the_device_would_misprint() -> None:
    with pytest.raises(interp.InterpError, match=r"the assert message '%s' has '%s' at 0"):
        interp.launch(assert_kernel("%s"), 1, [])
    loc = DILoc(SCOPE, "/tmp/p%n/k.py", 7, 3)
    with pytest.raises(interp.InterpError, match=r"the assert's location file name '/tmp/p%n/k\.py' has '%n/'"):
        interp.launch(assert_kernel("fine", loc), 1, [])


@pytest.mark.requires_tileiras
def test_tileiras_copies_the_message_and_path_into_a_vprintf_format() -> None:
    """The evidence behind the rules above: the cubin's format string holds the message and the file name verbatim
    (an escaped ``%%`` stays ``%%`` there, so vprintf prints ``%``), and the kernel calls ``vprintf``."""
    module = assert_kernel("MSG 100%% %%s%%n", DILoc(SCOPE, "/tmp/p%%s/k.py", 7, 3))
    proc, cubin = compile_cubin(write_bytecode(module, V), "sm_90")
    assert proc.returncode == 0, proc.stderr
    assert b"/tmp/p%%s/k.py:7: tile block: [%d, %d, %d], position: []: MSG 100%% %%s%%n\n\x00" in cubin
    assert b"vprintf\x00" in cubin
    assert b"__assertfail" not in cubin
