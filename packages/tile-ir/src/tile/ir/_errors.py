"""Exception hierarchy of the toolchain stack.

`TileError` is `tile.errors.TileError`, the one root of every Tile package's errors (re-exported here, the same
class). Each subclass also derives from the builtin a caller would naturally catch. Exceptions carrying extra fields
implement ``__reduce__`` so they survive pickling across compile worker processes.
"""

from __future__ import annotations

from tile.errors import TileError

__all__ = ["BytecodeError", "IRTypeError", "TileError", "UnsupportedVersionError", "VerifyError"]


class IRTypeError(TileError, TypeError):
    """An op was built with operands, results or attributes of the wrong kind or type."""


class VerifyError(TileError, ValueError):
    """The IR breaks a structural or typing rule.

    Parameters
    ----------
    reason
        What is wrong and what to do about it.
    where
        A path to the offending op, e.g. ``"@vadd/op 3 (addf)"``; empty when not known.
    """

    def __init__(self, reason: str, where: str = "") -> None:
        self.reason = reason
        self.where = where
        super().__init__(f"{where}: {reason}" if where else reason)

    def __reduce__(self) -> tuple[type[VerifyError], tuple[str, str]]:
        return (type(self), (self.reason, self.where))


class UnsupportedVersionError(VerifyError):
    """An op, type, attribute or field does not exist in the chosen bytecode version."""


class BytecodeError(TileError, ValueError):
    """Malformed Tile IR bytecode.

    Parameters
    ----------
    offset
        Absolute byte offset in the input where the problem was detected.
    reason
        What was expected there.
    """

    def __init__(self, offset: int, reason: str) -> None:
        self.offset = offset
        self.reason = reason
        super().__init__(f"invalid Tile IR bytecode at offset {offset}: {reason}")

    def __reduce__(self) -> tuple[type[BytecodeError], tuple[int, str]]:
        return (type(self), (self.offset, self.reason))
