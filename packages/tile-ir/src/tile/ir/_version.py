"""Tile IR bytecode versions.

A `Version` is a (major, minor) pair ordered numerically. Every catalog entry, type and field says since
which version it exists; the writer emits exactly the layout of the version it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tile.ir._errors import UnsupportedVersionError

__all__ = ["LATEST", "SUPPORTED_VERSIONS", "V13_1", "V13_2", "V13_3", "V13_4", "V13_5", "Version"]


@dataclass(frozen=True, order=True)
class Version:
    """A bytecode version such as 13.3.

    Parameters
    ----------
    major, minor
        The two numbers written in the bytecode header.
    """

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str | Version) -> Version:
        """Return the supported version spelled ``text`` ("13.3"), raising if it is not supported."""
        if isinstance(text, Version):
            version = text
        else:
            match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
            if match is None:
                raise UnsupportedVersionError(f"bad bytecode version {text!r}: write it as MAJOR.MINOR, e.g. '13.3'")
            version = cls(int(match[1]), int(match[2]))
        if version not in SUPPORTED_VERSIONS:
            names = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
            raise UnsupportedVersionError(f"bytecode version {version} is not supported; choose one of {names}")
        return version


V13_1 = Version(13, 1)
V13_2 = Version(13, 2)
V13_3 = Version(13, 3)
V13_4 = Version(13, 4)
V13_5 = Version(13, 5)
SUPPORTED_VERSIONS: tuple[Version, ...] = (V13_1, V13_2, V13_3, V13_4, V13_5)
LATEST = V13_5
