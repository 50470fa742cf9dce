"""Errors the interpreter raises while running a Tile IR kernel.

Every error derives from `tile.ir.TileError` (through `InterpError`) and from the builtin a caller would catch.
Where an error concerns one op it carries the tile block that ran it (``(x, y, z)``) and the op's location as
text (``file:line:col`` from debug info, else ``@function/op N (name)``). Every error pickles.
"""

from __future__ import annotations

from typing import Any

from tile.ir._errors import TileError

__all__ = [
    "BlockId",
    "DataRaceError",
    "InterpError",
    "KernelAssertionError",
    "MemoryAccessError",
    "TokenOrderError",
    "UnsupportedOpError",
]

BlockId = tuple[int, int, int]


class InterpError(TileError, RuntimeError):
    """The interpreter cannot run the kernel as given (bad arguments, an undefined operation, ...).

    Parameters
    ----------
    message
        What happened and what to do.
    block
        The tile block running when it happened, if any.
    location
        The location of the op that failed, if any.
    """

    def __init__(self, message: str, block: BlockId | None = None, location: str = "") -> None:
        self.message = message
        self.block = block
        self.location = location
        where = [f"at {location}"] if location else []
        where += [f"in tile block {block}"] if block is not None else []
        super().__init__(f"{message} ({', '.join(where)})" if where else message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.block, self.location))


class UnsupportedOpError(InterpError, NotImplementedError):
    """The kernel uses an op (or an op variant) the interpreter has no semantics for."""


class MemoryAccessError(InterpError, IndexError):
    """A load, store or atomic touched an address outside every mapped buffer, or wrote a read-only one."""


class KernelAssertionError(InterpError, AssertionError):
    """An ``assert`` op found a false element: carries the failing block, the op location and the message."""


class DataRaceError(InterpError):
    """Two tile blocks of one launch touched the same element and at least one of them wrote it.

    Parameters
    ----------
    element
        The element both accessed: ``buffer[index]`` with the index into the host array when known.
    first, second
        ``(block, location, access)`` of the two conflicting accesses, the block that ran first first; access is
        "read", "write", "atomic" (a read-modify-write), "atomic read" or "atomic write" (a load or store with an
        ordering other than weak).
    count
        How many distinct elements race in this launch (the first is reported).
    hint
        What to do about it (default: the usual fixes).
    """

    def __init__(
        self,
        element: str,
        first: tuple[BlockId, str, str],
        second: tuple[BlockId, str, str],
        count: int = 1,
        hint: str | None = None,
    ) -> None:
        self.element = element
        self.first = first
        self.second = second
        self.count = count
        self.hint = hint
        (b1, loc1, kind1), (b2, loc2, kind2) = first, second
        more = f"; {count - 1} more element(s) race as well" if count > 1 else ""
        message = (
            f"data race on {element}: tile block {b1} {_verb(kind1)} it at {loc1} and tile block {b2} "
            f"{_verb(kind2)} it at {loc2}, and neither access happens before the other{more}. "
            f"{hint if hint is not None else _RACE_HINT}"
        )
        RuntimeError.__init__(self, message)
        self.message = message
        self.block = b2
        self.location = loc2

    @property
    def blocks(self) -> tuple[BlockId, BlockId]:
        """The two tile blocks that race."""
        return (self.first[0], self.second[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.element, self.first, self.second, self.count, self.hint))


class TokenOrderError(InterpError):
    """Two memory ops of one tile block touch the same element, one writes it, and no token chain orders them.

    Tile IR runs memory ops in token order, not program order, so the device may run them either way round.

    Parameters
    ----------
    block
        The tile block.
    element
        The element both touch.
    first, second
        ``(location, access)`` of the two ops, in program order; access is "read", "write" or "atomic".
    """

    def __init__(self, block: BlockId, element: str, first: tuple[str, str], second: tuple[str, str]) -> None:
        self.element = element
        self.first = first
        self.second = second
        message = (
            f"tile block {block}: the {first[1]} at {first[0]} and the {second[1]} at {second[0]} both touch "
            f"{element}, but no token chain orders them, so the device may run them in either order; pass the "
            "first op's result token (or a join_tokens of it) as the second op's token"
        )
        RuntimeError.__init__(self, message)
        self.message = message
        self.block = block
        self.location = second[0]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.block, self.element, self.first, self.second))


_RACE_HINT = (
    "Give every block its own output tile (partition the output; if it is partitioned, its memory maps two "
    "elements to one address, as a broadcast or stride-0 view does: write into a contiguous copy), or make both "
    "accesses atomic, or order them: "
    "a release atomic (device scope) token-ordered after the first access, and in the second block an acquire "
    "atomic that reads the value it wrote, token-ordered before the second access"
)
_VERBS = {
    "read": "reads",
    "write": "writes",
    "atomic": "atomically updates",
    "atomic read": "atomically reads",
    "atomic write": "atomically writes",
}


def _verb(kind: str) -> str:
    return _VERBS.get(kind, kind)
