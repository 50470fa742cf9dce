"""Reading a cubin's target architecture from its ELF header, to refuse a wrong-arch load with a clear message.

Invariants: pure byte parsing, no driver; anything that is not a CUDA ELF yields None (the driver then judges);
SASS runs on a device of the same major version and an equal or higher minor version, never across majors.
"""

from __future__ import annotations

import struct

__all__ = ["cubin_arch", "runs_on"]

_EM_CUDA = 190
_ELF_MAGIC = b"\x7fELF"


def cubin_arch(image: bytes) -> tuple[int, int] | None:
    """Return the ``(major, minor)`` SM version a cubin was built for, or None when it is not a CUDA ELF.

    The SM number sits in ``e_flags``: bits 0-7 for ELF ABI version 7 and older, bits 8-15 from version 8 (CUDA
    12.8+ toolchains, tileiras included).
    """
    if len(image) < 52 or image[:4] != _ELF_MAGIC:
        return None
    is_64 = image[4] == 2
    little = "<" if image[5] == 1 else ">"
    (machine,) = struct.unpack_from(little + "H", image, 18)
    if machine != _EM_CUDA:
        return None
    (flags,) = struct.unpack_from(little + "I", image, 48 if is_64 else 36)
    sm = (flags >> 8) & 0xFF if image[8] >= 8 else flags & 0xFF
    if sm < 10:
        return None
    return sm // 10, sm % 10


def runs_on(cubin: tuple[int, int], device: tuple[int, int]) -> bool:
    """True when SASS for ``cubin`` can run on a device of compute capability ``device``."""
    return cubin[0] == device[0] and cubin[1] <= device[1]
