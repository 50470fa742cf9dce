"""Text that tileiras splices into a device ``printf`` format: an ``assert``'s message and its source file names.

NVIDIA's Tile IR dialect declares ``assert``'s ``message`` a plain string (``Ops.td``: "The error message to display
if assertion fails"; no verifier reads it). But tileiras (13.x) does not hand it to ``__assertfail`` as data: it
lowers each ``assert`` to one ``vprintf`` call whose *format* is
``"<file>:<line>: tile block: [%d, %d, %d], position: [%d...]: <message>\\n"``, with ``<file>`` the ``filename`` of
the op's `DILoc` (the innermost one of a `CallSite`) and ``<message>`` the attribute, both copied verbatim. Compiling
an assert with the message ``"100% %s%n"`` gives a cubin whose ``printfFormat_0`` global holds
``"(unknown):0: tile block: [%d, %d, %d], position: []: 100% %s%n"`` and whose only call target is ``vprintf``.
``vprintf`` reads one argument per conversion from the buffer the kernel packs (three block ids and the position),
so a ``%s`` in the message or in a file path reads a pointer past that buffer and prints memory at it, ``%n`` writes
through one. ``print_tko``'s ``str`` is a format by definition (its literal pieces are passed as formats too).

So text that reaches the device's ``printf`` as format text must hold no conversion: every ``%`` doubled
(`escape_format_text`), which the device prints as one ``%`` (`render_format_text` is what it prints).

Invariant: ``format_text_problem(escape_format_text(t)) is None`` and ``render_format_text(escape_format_text(t)) ==
t`` for every string ``t``.
"""

from __future__ import annotations

from collections.abc import Iterator

from tile.ir._ir import Operation
from tile.ir._location import CallSite, DILoc, Location

__all__ = ["assert_format_texts", "escape_format_text", "format_text_problem", "render_format_text"]


def escape_format_text(text: str) -> str:
    """``text`` as literal ``printf`` format text: every ``%`` doubled."""
    return text.replace("%", "%%")


def render_format_text(text: str) -> str:
    """What the device's ``printf`` prints for literal format text (``%%`` -> ``%``); see `format_text_problem`."""
    return text.replace("%%", "%")


def format_text_problem(text: str, what: str) -> str | None:
    """Why ``text`` (named ``what``) is not literal format text, or None when every ``%`` in it is doubled."""
    pos = 0
    while (start := text.find("%", pos)) >= 0:
        if text.startswith("%%", start):
            pos = start + 2
            continue
        return (
            f"{what} {text!r} has {text[start : start + 3]!r} at {start}: tileiras copies it into the format of the "
            "device's printf, where a conversion reads (or, %n, writes) memory outside the kernel's arguments; "
            "write '%%' for a literal '%'"
        )
    return None


def assert_format_texts(op: Operation) -> Iterator[tuple[str, str]]:
    """``(what, text)`` for each string tileiras copies into the ``printf`` format of ``assert`` ``op``."""
    yield "the assert message", str(op.attributes.get("message", ""))
    yield from _filenames(op.loc)


def _filenames(loc: Location | None) -> Iterator[tuple[str, str]]:
    if isinstance(loc, DILoc):
        yield "the assert's location file name", loc.filename
    elif isinstance(loc, CallSite):
        yield from _filenames(loc.callee)
        yield from _filenames(loc.caller)
