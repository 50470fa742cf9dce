"""Primitive bytecode encodings: varints, zigzag varints, fixed-width lists, tables, sections.

Invariants: varints are minimal unsigned LEB128 of at most 64 bits; signed varints are zigzag over the
64-bit two's-complement value; `Interner` hands out dense ids in first-seen order and dedupes by encoded
bytes; section padding is relative to the absolute file offset, table padding to the section payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "ALIGN_BYTE",
    "INT64_MIN",
    "MAGIC",
    "ByteWriter",
    "Interner",
    "apint_value",
    "encode_table",
    "to_int64",
]

MAGIC = b"\x7fTileIR\x00"
ALIGN_BYTE = 0xCB
INT64_MIN = -(1 << 63)
_U64 = (1 << 64) - 1


def to_int64(bits: int) -> int:
    """Reinterpret a 64-bit pattern as a signed int64."""
    bits &= _U64
    return bits - (1 << 64) if bits >> 63 else bits


def apint_value(bits: int, width: int) -> int:
    """The signed value written for an APInt bit pattern of `width` bits (width > 8)."""
    return to_int64(bits) if width >= 64 else bits


class ByteWriter:
    """An append-only byte buffer with the bytecode's primitive encoders."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def __len__(self) -> int:
        return len(self.buf)

    def byte(self, value: int) -> None:
        """Append one byte."""
        self.buf.append(value & 0xFF)

    def raw(self, data: bytes | bytearray) -> None:
        """Append bytes as they are."""
        self.buf += data

    def varint(self, value: int) -> None:
        """Append an unsigned LEB128 varint (0 <= value < 2**64)."""
        if not 0 <= value <= _U64:
            raise ValueError(f"varint out of range: {value}")
        while value >= 0x80:
            self.buf.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buf.append(value)

    def svarint(self, value: int) -> None:
        """Append a zigzag-encoded signed varint of an int64."""
        value = to_int64(value)
        self.varint(((value << 1) ^ (value >> 63)) & _U64)

    def apint(self, bits: int, width: int) -> None:
        """Append an APInt bit pattern: a raw byte up to 8 bits, otherwise a signed varint."""
        if width <= 8:
            self.byte(bits)
        else:
            self.svarint(apint_value(bits, width))

    def int_list(self, values: Sequence[int], width: int) -> None:
        """Append a count then `width`-byte little-endian signed integers."""
        self.varint(len(values))
        for v in values:
            self.buf += v.to_bytes(width, "little", signed=True)

    def bool_list(self, values: Sequence[bool]) -> None:
        """Append a count then one byte (0/1) per value."""
        self.varint(len(values))
        self.buf += bytes(int(bool(v)) for v in values)

    def varints(self, values: Iterable[int]) -> None:
        """Append a count then each value as a varint."""
        items = list(values)
        self.varint(len(items))
        for v in items:
            self.varint(v)

    def pad_to(self, alignment: int, base: int = 0) -> None:
        """Pad with the alignment byte until (base + len) is a multiple of `alignment`."""
        self.buf += bytes([ALIGN_BYTE]) * (-(base + len(self.buf)) % alignment)

    def section(self, section_id: int, payload: bytes | bytearray, alignment: int | None) -> None:
        """Append a section header (id, length, optional alignment + padding) and its payload."""
        self.byte(section_id | (0x80 if alignment else 0))
        self.varint(len(payload))
        if alignment:
            self.varint(alignment)
            self.pad_to(alignment)
        self.buf += payload


class Interner:
    """Dense ids for byte-encoded entries (strings, types, constants, debug attributes) in first-seen order."""

    def __init__(self, first_id: int = 0) -> None:
        self.first_id = first_id
        self.ids: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def intern(self, entry: bytes) -> int:
        """Return the id of `entry`, adding it if new."""
        found = self.ids.get(entry)
        if found is None:
            found = self.ids[entry] = self.first_id + len(self.ids)
        return found

    def seed(self, entries: Iterable[bytes]) -> None:
        """Add `entries` in order (used to reproduce a table read from a file)."""
        for entry in entries:
            self.ids.setdefault(entry, self.first_id + len(self.ids))

    def entries(self) -> list[bytes]:
        """The entries in id order."""
        return list(self.ids)


def encode_table(out: ByteWriter, entries: Sequence[bytes], width: int) -> None:
    """Append a table: count, padding to `width` (relative to `out`), offsets, then the data.

    An empty table is padded too, as cuTile's writer does (readers skip everything after a zero count).
    """
    out.varint(len(entries))
    out.pad_to(width)
    offset = 0
    for entry in entries:
        out.raw(offset.to_bytes(width, "little"))
        offset += len(entry)
    for entry in entries:
        out.raw(entry)
