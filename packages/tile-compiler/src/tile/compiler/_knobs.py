"""Every ``TILE_*`` environment variable tile-compiler reads, parsed once into a typed `Knobs` value.

Invariant: no other module of this package touches ``os.environ``. `knobs()` re-reads the environment on each
call (a few microseconds), so a variable set by a test or by the user mid-process takes effect on the next
compile; a malformed value raises `KnobError` naming the variable and the accepted spelling.

============================  ==========================================================================
variable                      meaning
============================  ==========================================================================
``TILE_TILEIRAS``             path of the ``tileiras`` executable to use (first in the discovery order)
``TILE_CACHE_DIR``            disk cache directory (default ``~/.cache/tile``); ``0``/``off``/``none`` disables
``TILE_CACHE_SIZE``           disk cache size cap, bytes or with a K/M/G suffix (default 1G)
``TILE_CACHE_SHARED``         ``1`` also trusts cache folders and files owned by root (a read-only system-wide
                              precompiled cache); by default Tile reads and writes only folders and files that
                              you own and nobody else can write, and warns (`CacheTrustWarning`) about others
``TILE_DUMP``                 comma-separated stages to dump: ast, resolved, typed, ir, bytecode, cubin, or all
``TILE_DUMP_DIR``             where dumps go (default: text to stderr, binaries to a temporary folder)
``TILE_BYTECODE_VERSION``     bytecode version to emit (``13.3``); default: the highest both sides support
``TILE_OPT_LEVEL``            ``tileiras`` optimisation level 0-3 where the kernel's options leave the default 3
``TILE_COMPILE_TIMEOUT``      seconds one ``tileiras`` run may take (default 300)
``TILE_DEBUG``                ``1`` shows compiler frames in tracebacks and full tracebacks from the ``tile`` CLI
============================  ==========================================================================
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tile.compiler._errors import TileError

__all__ = ["DUMP_STAGES", "KnobError", "Knobs", "knobs", "tileiras_environment"]

DUMP_STAGES = ("ast", "resolved", "typed", "ir", "bytecode", "cubin")
_OFF = {"0", "off", "none", "false", "no"}
_ON = {"1", "on", "true", "yes"}
_SIZE_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# Variables that make a foreign CUDA toolkit visible to tileiras; see tileiras_environment.
_FOREIGN_TOOLKIT_VARS = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")


class KnobError(TileError, ValueError):
    """A ``TILE_*`` environment variable holds a value that cannot be used.

    Parameters
    ----------
    name
        The variable.
    value
        Its value.
    expected
        The accepted spelling.
    """

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name, self.value, self.expected = name, value, expected
        super().__init__(f"environment variable {name}={value!r} is not valid: expected {expected}; fix or unset it")

    def __reduce__(self) -> tuple[type[KnobError], tuple[str, str, str]]:
        return (type(self), (self.name, self.value, self.expected))


@dataclass(frozen=True)
class Knobs:
    """The parsed ``TILE_*`` settings (see the module docstring for each variable)."""

    tileiras: Path | None = None
    cache_dir: Path | None = None
    cache_size: int = 1 << 30
    cache_shared: bool = False
    dump: frozenset[str] = frozenset()
    dump_dir: Path | None = None
    bytecode_version: tuple[int, int] | None = None
    opt_level: int = 3
    compile_timeout: float = 300.0
    debug: bool = False
    cuda_home: Path | None = None
    path: str = ""


_READ: tuple[str, ...] = (
    "TILE_TILEIRAS",
    "TILE_CACHE_DIR",
    "TILE_CACHE_SIZE",
    "TILE_CACHE_SHARED",
    "TILE_DUMP",
    "TILE_DUMP_DIR",
    "TILE_BYTECODE_VERSION",
)
_READ += ("TILE_OPT_LEVEL", "TILE_COMPILE_TIMEOUT", "TILE_DEBUG", "CUDA_HOME", "PATH", "HOME", "XDG_CACHE_HOME")


def knobs(environ: Mapping[str, str] | None = None) -> Knobs:
    """Parse the settings from ``environ`` (default: the process environment)."""
    env = os.environ if environ is None else environ
    # Launches ask for the settings every time: parse each distinct combination of values once.
    values = [(name, env.get(name)) for name in _READ]
    return _parse(tuple((name, value) for name, value in values if value is not None))


@functools.lru_cache(maxsize=64)
def _parse(items: tuple[tuple[str, str], ...]) -> Knobs:
    env = dict(items)
    return Knobs(
        tileiras=_path(env.get("TILE_TILEIRAS")),
        cache_dir=_cache_dir(env),
        cache_size=_size("TILE_CACHE_SIZE", env.get("TILE_CACHE_SIZE", "1G")),
        cache_shared=_flag("TILE_CACHE_SHARED", env.get("TILE_CACHE_SHARED", "")),
        dump=_dump(env.get("TILE_DUMP", "")),
        dump_dir=_path(env.get("TILE_DUMP_DIR")),
        bytecode_version=_version(env.get("TILE_BYTECODE_VERSION", "")),
        opt_level=_int_in("TILE_OPT_LEVEL", env.get("TILE_OPT_LEVEL", "3"), 0, 3),
        compile_timeout=_seconds(env.get("TILE_COMPILE_TIMEOUT", "300")),
        debug=_flag("TILE_DEBUG", env.get("TILE_DEBUG", "")),
        cuda_home=_path(env.get("CUDA_HOME")),
        path=env.get("PATH", os.defpath),
    )


def tileiras_environment(toolkit_root: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment to run the ``tileiras`` found under ``toolkit_root`` with.

    tileiras picks up ``ptxas`` and ``libnvvm`` through ``CUDA_HOME`` when it is set; a foreign toolkit there (say
    CUDA 13.0 beside tileiras 13.5) makes it fail with "failed to compile Tile IR program". So the variable is
    pointed at tileiras's own root when that root is a full toolkit, and removed otherwise.
    """
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in _FOREIGN_TOOLKIT_VARS}
    if (toolkit_root / "bin" / "ptxas").is_file() and (toolkit_root / "nvvm").is_dir():
        env["CUDA_HOME"] = str(toolkit_root)
    return env


def _path(value: str | None) -> Path | None:
    return Path(value).expanduser() if value and value.strip() else None


def _cache_dir(env: Mapping[str, str]) -> Path | None:
    value = env.get("TILE_CACHE_DIR")
    if value is None:
        home = env.get("HOME") or str(Path("~").expanduser())
        base = env.get("XDG_CACHE_HOME") or str(Path(home) / ".cache")
        return Path(base) / "tile"
    return None if value.strip().lower() in _OFF | {""} else Path(value).expanduser()


def _size(name: str, value: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)i?b?\s*", value.lower())
    if match is None:
        raise KnobError(name, value, "a byte count such as 500M or 2G")
    return int(match[1]) * _SIZE_SUFFIX[match[2]]


def _dump(value: str) -> frozenset[str]:
    stages = {s.strip().lower() for s in value.split(",") if s.strip()}
    if "all" in stages:
        return frozenset(DUMP_STAGES)
    if unknown := stages - set(DUMP_STAGES):
        choices = f"a comma-separated subset of {', '.join(DUMP_STAGES)} or 'all' (not {', '.join(sorted(unknown))})"
        raise KnobError("TILE_DUMP", value, choices)
    return frozenset(stages)


def _version(value: str) -> tuple[int, int] | None:
    if not value.strip():
        return None
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", value)
    if match is None:
        raise KnobError("TILE_BYTECODE_VERSION", value, "MAJOR.MINOR, e.g. 13.3")
    return int(match[1]), int(match[2])


def _int_in(name: str, value: str, low: int, high: int) -> int:
    if not value.strip().isdigit() or not low <= int(value) <= high:
        raise KnobError(name, value, f"an integer from {low} to {high}")
    return int(value)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise KnobError("TILE_COMPILE_TIMEOUT", value, "a positive number of seconds")
    return seconds


def _flag(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _ON:
        return True
    if lowered in _OFF | {""}:
        return False
    raise KnobError(name, value, "1 or 0")
