"""Bounds-checked primitive decoding for the bytecode reader.

Invariant: every read either returns a value or raises `BytecodeError` with the absolute file offset; counts
are checked against the bytes left before anything is allocated, so malformed input can neither exhaust
memory nor loop for long.
"""

from __future__ import annotations

from tile.ir._errors import BytecodeError

__all__ = ["ByteReader", "split_table"]

_MAX_SHIFT = 63


class ByteReader:
    """A cursor over ``data[start:end]``; offsets in errors are absolute (`data` is the whole file)."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = start
        self.start = start
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        """Bytes left before `end`."""
        return self.end - self.pos

    def fail(self, reason: str, offset: int | None = None) -> BytecodeError:
        """Return the error to raise for `reason` at `offset` (default: the cursor)."""
        return BytecodeError(self.pos if offset is None else offset, reason)

    def take(self, n: int, what: str = "data") -> bytes:
        """Read `n` raw bytes."""
        if n < 0 or n > self.remaining:
            raise self.fail(f"unexpected end of data while reading {what} ({n} bytes needed, {self.remaining} left)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def byte(self, what: str = "byte") -> int:
        """Read one byte."""
        return self.take(1, what)[0]

    def varint(self, what: str = "varint") -> int:
        """Read an unsigned LEB128 varint of at most 64 bits."""
        start, result, shift = self.pos, 0, 0
        while True:
            b = self.byte(what)
            if shift > _MAX_SHIFT or (shift == _MAX_SHIFT and b & 0x7E):
                raise self.fail(f"{what}: varint longer than 64 bits", start)
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def svarint(self, what: str = "signed varint") -> int:
        """Read a zigzag-encoded signed varint (int64)."""
        raw = self.varint(what)
        return (raw >> 1) ^ -(raw & 1)

    def count(self, what: str, min_size: int = 1) -> int:
        """Read a varint element count, checking that `min_size` bytes per element remain."""
        start = self.pos
        n = self.varint(what)
        if n * min_size > self.remaining:
            raise self.fail(f"{what} {n} exceeds the {self.remaining} bytes left", start)
        return n

    def fixed(self, width: int, what: str, signed: bool = False) -> int:
        """Read a little-endian fixed-width integer."""
        return int.from_bytes(self.take(width, what), "little", signed=signed)

    def int_list(self, width: int, what: str) -> tuple[int, ...]:
        """Read a count then `width`-byte signed little-endian integers."""
        n = self.count(what, width)
        return tuple(self.fixed(width, what, signed=True) for _ in range(n))

    def bool_list(self, what: str) -> tuple[bool, ...]:
        """Read a count then one 0/1 byte per element."""
        n = self.count(what)
        values = self.take(n, what)
        if any(v > 1 for v in values):
            raise self.fail(f"{what}: boolean bytes must be 0 or 1", self.pos - n)
        return tuple(bool(v) for v in values)

    def skip_padding(self, alignment: int, base: int) -> None:
        """Skip bytes until (pos - base) is a multiple of `alignment`."""
        self.take(-(self.pos - base) % alignment, "alignment padding")

    def expect_end(self, what: str) -> None:
        """Raise unless the cursor is exactly at `end`."""
        if self.pos != self.end:
            raise self.fail(f"{self.end - self.pos} unexpected trailing bytes after {what}")


def split_table(data: bytes, start: int, end: int, width: int, what: str) -> list[tuple[int, int]]:
    """Split a table payload into entries; returns absolute (start, end) offsets per entry."""
    r = ByteReader(data, start, end)
    n = r.count(f"{what} table count", width)
    r.skip_padding(width, start)
    if n == 0:
        return []
    offsets = [r.fixed(width, f"{what} table offset") for _ in range(n)]
    base, size = r.pos, r.remaining
    bounds = [*offsets, size]
    for i in range(n):
        if not 0 <= bounds[i] <= bounds[i + 1] <= size:
            raise r.fail(f"{what} table entry {i} has invalid offset {bounds[i]} (data size {size})", start)
    return [(base + bounds[i], base + bounds[i + 1]) for i in range(n)]
