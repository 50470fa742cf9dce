"""What the reader remembers about a file so the writer can reproduce it byte for byte.

Bytecode leaves freedom that carries no meaning: table order (and unused entries), section order and
alignment, whether empty optional sections are present. A `Layout` records those choices; the writer follows
it when it writes the same version, and otherwise uses its canonical layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from tile.ir._version import Version

__all__ = ["SECTION_IDS", "Layout"]

SECTION_IDS = {"string": 1, "func": 2, "debug": 3, "constant": 4, "type": 5, "global": 6, "producer": 7}


@dataclass(frozen=True)
class Layout:
    """Table contents and section framing of a file that was read."""

    version: Version
    sections: tuple[tuple[int, int | None], ...]  # (section id, alignment or None) in file order
    strings: tuple[bytes, ...]
    types: tuple[bytes, ...]
    constants: tuple[bytes, ...]
    debug_attrs: tuple[bytes, ...]
